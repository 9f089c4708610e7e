"""Stepping a run: one model step streams its text and records the calls it asked for;
the run steps again at once, waits on its calls, finishes, or fails. The step is owned by
the run's lease (hostcall/leases.py), taken in the transaction that starts it.
"""

from __future__ import annotations

import asyncio
import logging

from hostcall.appender import Appender
from hostcall.errors import LeaseLost
from hostcall.leases import run_key
from hostcall.ledger import new_id
from hostcall.models.base import (
    Message,
    ModelError,
    TextDelta,
    ToolCallRequest,
    ToolDescriptor,
)
from hostcall.notices import run_notice
from hostcall.protocol.events import (
    RunError,
    RunFinished,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
)
from hostcall.quotas import estimate_tokens
from hostcall.runs.base import FAIL_RETRIES, FAIL_RETRY_MAX_SECONDS, INTERRUPTED_NOTE, EngineBase
from hostcall.store.records import ClaimedRun, RunStatus, StoredMessage

log = logging.getLogger("hostcall.engine")


class Stepping(EngineBase):
    async def _resume_soon(self, run_id: str) -> None:
        """Resume the run in a task of its own, after the unit that settled its last call
        has committed and published: the streams, woken by that publish, write the
        ``TOOL_CALL_RESULT`` before the next step is claimed and started (issue 9: the round
        trip; ``CallMoves._settled`` says when the answering request gets its response). A
        crash in between leaves a waiting run with every call settled, which the sweeper
        resumes (``stalled_runs``)."""
        self._spawn(self._resume_later(run_id))

    async def _resume_later(self, run_id: str) -> None:
        try:
            claimed = await self._claim_if_ready(run_id)
        except Exception:  # the sweeper's stalled-run scan tries again
            log.exception("run %s: could not resume it", run_id)
            return
        if claimed is not None:
            # This task is the run's own already: step here, with the run just read.
            await self._advance(run_id, claimed)

    async def _resume_if_ready(self, run_id: str) -> None:
        claimed = await self._claim_if_ready(run_id)
        if claimed is not None:
            self._spawn(self._advance(run_id, claimed))

    async def _claim_if_ready(self, run_id: str) -> ClaimedRun | None:
        """Claim a waiting run whose step has no open call left (the run, now running), or
        None if it is not ready or another process holds it. The lease and the claim commit
        together, in one statement: no process ever sees the run running without an owner
        (the sweeper would adopt it). The run as the claim left it, and its history: the
        first step needs no read of its own."""
        return await self.leases.claim_ready_run(run_id)

    # ---- stepping --------------------------------------------------------------------------

    async def _advance(self, run_id: str, claimed: ClaimedRun | None = None) -> None:
        """Step the run while it can go on; we hold its lease, and hand it back at the end.
        ``claimed``: the run as its claim (or start) left it, and its history then, so the
        first step need not read them."""
        try:
            try:
                while await self._step(run_id, claimed):
                    claimed = None
            except LeaseLost:
                raise
            except Exception as exc:
                log.exception("run %s failed", run_id)
                # A write the store refused (full disk, read-only file) must still end the
                # run, or it stays `running` and refuses every message (issue 7, item 8).
                code = "store_unavailable" if _is_store_error(exc) else "internal_error"
                await self._fail_eventually(run_id, code, f"{type(exc).__name__}: {exc}")
        except LeaseLost as lost:
            # This process stalled past its lease and another adopted the run: the step
            # was rolled back; the new owner runs it.
            log.warning("run %s left to its new owner: %s", run_id, lost)

    async def _step(self, run_id: str, known: ClaimedRun | None = None) -> bool:
        """One model step; True when the run should step again at once."""
        run = known.run if known is not None else await self.store.get_run(run_id)
        assert run is not None
        agent = await self.agent_of_run(run_id)
        cid = run.conversation_id
        if run.step >= agent.max_steps:
            await self._fail(
                run_id,
                "step_limit",
                f"The agent made {run.step} model steps without finishing; "
                f"the limit is {agent.max_steps}.",
            )
            return False
        model = self._model(agent)
        tools = [ToolDescriptor(t.name, t.description, t.input_schema) for t in agent.tools]
        stored = known.history if known is not None else await self.store.list_messages(cid)
        history = [_model_message(m) for m in stored]
        message_id = new_id("m")
        fence = (run_key(run_id), self.leases.owner)
        text: list[str] = []
        requests: list[ToolCallRequest] = []
        # Fenced (issue 10): if this process stalled past the run's lease and another took
        # the step over, an append fails with LeaseLost and this copy of the step ends
        # there, its message cut where the new owner discarded it. Chunks that come while
        # an append is in flight go in together (hostcall/appender.py).
        appender = Appender(self.journal, cid, fence)
        try:
            async for item in model.stream(history, tools, instructions=agent.instructions):
                if isinstance(item, TextDelta):
                    if not item.text:
                        continue
                    content = TextMessageContent(message_id, item.text)
                    if text:
                        appender.add(content)
                    else:
                        # Let streams write the first text now: a model whose chunks come in
                        # a burst (or without awaiting) must not hold it until the step ends.
                        await appender.put(TextMessageStart(message_id, "assistant"), content)
                    text.append(item.text)
                    if len(text) == 1:
                        await asyncio.sleep(0)
                else:
                    requests.append(item)
            # What has not gone out yet ends the message, in the step's last transaction.
            rest = await appender.settle()
        except ModelError as exc:
            await appender.flush()
            partial = (message_id, "".join(text)) if text else None
            await self._fail(run_id, exc.code, exc.message, interrupted=partial)
            return False
        finally:
            appender.cancel()  # a no-op once flushed; a cancelled step appends no more
        if self.on_model_tokens is not None:
            sent = [agent.instructions, *(m.text for m in history)]
            written = [*text, *(r.arguments for r in requests)]
            await self.on_model_tokens(agent, cid, estimate_tokens(sent + written))
        step = run.step + 1
        calls = [(new_id("k"), r) for r in requests]
        async with self.journal.unit() as unit:
            # The message first: PostgreSQL holds it, and sends it inside the append below
            # (one statement), fenced with it.
            await self.store.add_message(
                StoredMessage(
                    message_id,
                    cid,
                    run_id,
                    "assistant",
                    "".join(text),
                    tool_calls=tuple(
                        {"id": k, "name": r.name, "arguments": r.arguments} for k, r in calls
                    ),
                )
            )
            ending = [*rest, TextMessageEnd(message_id)] if text else []
            if not calls:
                # The run's end, then its last events in one append: on PostgreSQL one
                # statement, which ends the run only if the append's fence holds (issue 10:
                # the end went alone after the append); SQLite's fence knows the lease was
                # held when this transaction let it go.
                await self.leases.end_step(run_id, status=RunStatus.FINISHED, step=step)
                await unit.emit_all(cid, [*ending, RunFinished(cid, run_id)], fence=fence)
                return False
            if ending:
                await unit.emit_all(cid, ending, fence=fence)
            opened = [
                await self.ledger.propose(
                    unit,
                    run=run,
                    agent=agent,
                    conversation_id=cid,
                    step=step,
                    call_id=call_id,
                    name=r.name,
                    arguments=r.arguments,
                    message_id=message_id,
                )
                for call_id, r in calls
            ]
            waiting = any(c.state.open for c in opened)
            status = RunStatus.WAITING if waiting else RunStatus.RUNNING
            await self.leases.end_step(run_id, keep=not waiting, status=status, step=step)
        return not waiting

    async def _fail_eventually(self, run_id: str, code: str, detail: str) -> None:
        """``_fail``, retried while the store refuses writes: the run ends (RUN_ERROR, and
        the person may send again) as soon as a write gets through."""
        delay = 0.25
        for attempt in range(FAIL_RETRIES):
            try:
                await self._fail(run_id, code, detail)
                return
            except LeaseLost:
                raise
            except Exception as exc:
                if attempt == FAIL_RETRIES - 1:
                    # Left `running`: the next start's recover() steps it again.
                    log.error("run %s: could not record its failure: %s", run_id, exc)
                    return
                log.warning("run %s: cannot record its failure yet (%s); retrying", run_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, FAIL_RETRY_MAX_SECONDS)

    async def _fail(
        self, run_id: str, code: str, detail: str, *, interrupted: tuple[str, str] | None = None
    ) -> None:
        """End the run: the operator's log gets ``detail``; the visitor (event and snapshot)
        gets the code and a sentence from ``server.notices``, never the detail.

        ``interrupted`` is (message id, text) of an assistant message the failure cut off:
        the person saw it streamed, so it stays in the conversation, marked (issue 8)."""
        run = await self.store.get_run(run_id)
        assert run is not None
        log.error(
            "run failed: agent=%s conversation=%s run=%s code=%s: %s",
            run.agent.get("id") if isinstance(run.agent, dict) else "?",
            run.conversation_id,
            run_id,
            code,
            detail,
        )
        message = run_notice(code)
        cid = run.conversation_id
        async with self.journal.unit() as unit:
            if interrupted is not None:
                message_id, partial = interrupted
                await unit.emit(cid, TextMessageEnd(message_id, interrupted=True))
                await self.store.add_message(
                    StoredMessage(message_id, cid, run_id, "assistant", partial, interrupted=True)
                )
            await self.leases.end_step(
                run_id, status=RunStatus.FAILED, error={"code": code, "message": message}
            )
            await unit.emit(cid, RunError(message, code, run_id))


def _is_store_error(exc: BaseException) -> bool:
    """The store's driver refused a statement (sqlite3 or psycopg: both DB-API errors)."""
    return type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg")


def _model_message(message: StoredMessage) -> Message:
    if message.role == "assistant":
        return Message(
            role="assistant",
            text=message.text + (INTERRUPTED_NOTE if message.interrupted else ""),
            tool_calls=tuple(
                ToolCallRequest(c["id"], c["name"], c["arguments"]) for c in message.tool_calls
            ),
        )
    if message.role == "tool":
        return Message(
            role="tool",
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
        )
    return Message(role="user", text=message.text)
