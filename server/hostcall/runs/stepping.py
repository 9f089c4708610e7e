"""Stepping a run: one model step streams its text and records the calls it asked for;
the run steps again at once, waits on its calls, finishes, or fails. The step is owned by
the run's lease (hostcall/leases.py), taken in the transaction that starts it. A step says
what it did (``Stepped``); the engine (hostcall/engine.py) loops and starts what it dispatched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hostcall import strictjson
from hostcall.appender import Appender
from hostcall.apps.resources import app_only, has_views, with_views_context
from hostcall.attachments.for_model import model_files
from hostcall.calls.moves import new_id
from hostcall.calls.outcomes import Dispatched
from hostcall.calls.proposals import Proposals
from hostcall.errors import LeaseLost, RunUnreadable
from hostcall.journal import Journal
from hostcall.leases import Leases, run_key
from hostcall.models.base import (
    Attached,
    Message,
    ModelError,
    ReasoningDelta,
    ReasoningEncrypted,
    StepEnd,
    TextDelta,
    ToolCallRequest,
    ToolDescriptor,
)
from hostcall.notices import run_notice
from hostcall.protocol.codes import RunErrorCode
from hostcall.protocol.events import (
    MessageDiscarded,
    RunError,
    RunFinished,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
)
from hostcall.quotas import Quotas
from hostcall.runs.agents import RunAgents
from hostcall.runs.reasoning import Reasoning
from hostcall.runs.usage import StepUsage, Usage
from hostcall.store.console_records import UsageRecord
from hostcall.store.interfaces import Attachments, CallApps, Events, Messages, ModelUsage, Runs
from hostcall.store.records import Call, ClaimedRun, Run, RunStatus, StoredMessage
from hostcall.tracing import Attributes, Tracing
from hostcall.transcript import open_messages, recent_turns

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("hostcall.engine")

FAIL_RETRY_MAX_SECONDS = 5.0
FAIL_RETRIES = 12  # about 45 s of a full disk before giving up until the next start
# Told to the model after a reply of its own that an error cut off.
INTERRUPTED_NOTE = "\n\n[This reply was interrupted by an error before it was complete.]"


class _StepStore(Attachments, CallApps, Events, Messages, ModelUsage, Runs, Protocol):
    """What a step reads and writes: its run, the history (and its files' bytes), its
    messages and usage."""


@dataclass(frozen=True, slots=True)
class Stepped:
    """What one model step did. ``again``: the run steps again at once (its calls, if any,
    were all settled in the step). ``executing``: server-side calls it dispatched, whose
    leases its unit took: their requests start now that it has committed."""

    again: bool
    executing: tuple[Call, ...] = ()
    # The run finished with this step.
    finished: bool = False


class Steps:
    def __init__(
        self,
        journal: Journal,
        leases: Leases,
        agents: RunAgents,
        proposals: Proposals,
        quotas: Quotas,
        *,
        store: _StepStore,
        tracing: Tracing | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.journal = journal
        self.store = store
        self.leases = leases
        self.agents = agents
        self.proposals = proposals
        # Each step's tokens: recorded, priced, counted against the limits, traced.
        self.usage = Usage(store, quotas, tracing or Tracing.off(), clock=clock)
        self.tracing = self.usage.tracing

    async def step(self, run_id: str, known: ClaimedRun | None = None) -> Stepped:
        """One model step, under the run's lease. ``known``: the run as its claim (or start)
        left it, and its history then, so the step need not read them."""
        run = known.run if known is not None else await self.store.get_run(run_id)
        if run is None:  # deleted meanwhile (its conversation, by the retention sweeper)
            raise RunUnreadable(run_id, ["no such run"])
        began = self.usage.clock()
        if run.step == 0:
            self.usage.first_step(run_id, began)
        if not self.tracing.on:
            stepped = await self._step(run_id, run, known, began)
        else:
            attributes: Attributes = {
                "gen_ai.conversation.id": run.conversation_id,
                "hostcall.run.id": run_id,
                "hostcall.step": run.step + 1,
            }
            with self.tracing.span("hostcall.step", attributes, run_id=run_id) as span:
                stepped = await self._step(run_id, run, known, began, span=span)
        if stepped.finished:
            await self.usage.run_ended(run, RunStatus.FINISHED, error=None)
        return stepped

    async def _step(
        self,
        run_id: str,
        run: Run,
        known: ClaimedRun | None,
        began: float,
        *,
        span: Span | None = None,
    ) -> Stepped:
        agent = await self.agents.agent_of_run(run_id)
        cid = run.conversation_id
        if run.step >= agent.max_steps:
            await self.fail(
                run_id,
                RunErrorCode.STEP_LIMIT,
                f"The agent made {run.step} model steps without finishing; "
                f"the limit is {agent.max_steps}.",
            )
            return Stepped(again=False)
        model = self.agents.model(agent)
        tools = [
            ToolDescriptor(t.name, t.description, t.input_schema)
            for t in agent.tools
            if not app_only(t)  # a view's tool: the model never sees it
        ]
        turns = agent.history_turns
        stored = (
            known.history if known is not None else await self.store.recent_messages(cid, turns)
        )
        window = recent_turns(stored, turns)
        files = await model_files(self.store, agent.attachments, window)
        history = [_model_message(m, files.get(m.id, ())) for m in window]
        if has_views(agent.tools):
            history = with_views_context(history, await self.store.app_contexts(cid))
        page = next((m.context for m in reversed(history) if m.role == "user"), None)
        if page:
            self.tracing.add_content(span, "hostcall.page_context", strictjson.dumps(page))
        message_id = new_id("m")
        fence = (run_key(run_id), self.leases.owner)
        text: list[str] = []
        requests: list[ToolCallRequest] = []
        # Fenced: if this process stalled past the run's lease and another took
        # the step over, an append fails with LeaseLost and this copy of the step ends
        # there, its message cut where the new owner discarded it. Chunks that come while
        # an append is in flight go in together (hostcall/appender.py).
        appender = Appender(self.journal, cid, fence)
        reasoning = Reasoning(appender, shown=agent.show_reasoning)
        measure = self.usage.measure(run, agent, began=began)
        end: StepEnd | None = None
        try:
            async for item in measure.stream(model, history, tools):
                if isinstance(item, StepEnd):
                    end = item
                elif isinstance(item, ReasoningDelta | ReasoningEncrypted):
                    await reasoning.add(item)
                elif isinstance(item, TextDelta):
                    if not item.text:
                        continue
                    reasoning.end()
                    content = TextMessageContent(message_id, item.text)
                    if text:
                        appender.add(content)
                    else:
                        # Let streams write the first text now: a model whose chunks come in
                        # a burst (or without awaiting) must not hold it until the step ends.
                        await appender.put(TextMessageStart(message_id, "assistant"), content)
                    text.append(item.text)
                    if len(text) == 1:
                        # Two turns: in the first, the streams write the first text; in the
                        # second, the answer whose result resumed this step has its response
                        # written (hostcall/engine.py, ``follow``) before the rest of a burst.
                        await asyncio.sleep(0)
                        await asyncio.sleep(0)
                else:
                    requests.append(item)
            reasoning.end()
            # What has not gone out yet ends the message, in the step's last transaction.
            rest = await appender.settle()
        except ModelError as exc:
            reasoning.end()
            await appender.flush()
            partial = (message_id, "".join(text)) if text else None
            # A model that failed once it had begun to answer was paid for that much: its
            # estimate is recorded and counted. One that failed before (refused, rate
            # limited, down) wrote nothing, and nothing is.
            cut: StepUsage | None = None
            if text or requests:
                written = [*text, *(r.arguments for r in requests)]
                cut = measure.spent(end, history, written, cut_off=True)
                await self.usage.count(cut)
            await self.fail(
                run_id, exc.code, exc.message, interrupted=partial,
                usage=cut.record if cut is not None else None,
            )  # fmt: skip
            return Stepped(again=False)
        finally:
            appender.cancel()  # a no-op once flushed; a cancelled step appends no more
        spent = measure.spent(end, history, [*text, *(r.arguments for r in requests)])
        await self.usage.count(spent)
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
                # statement, which ends the run only if the append's fence holds (not the
                # end alone after the append); SQLite's fence knows the lease was held when
                # this transaction let it go.
                await self.leases.end_step(run_id, status=RunStatus.FINISHED, step=step)
                # The step's usage rides in that statement too (PostgreSQL).
                await self.store.add_usage(spent.record, fence=fence)
                await unit.emit_all(cid, [*ending, RunFinished(cid, run_id)], fence=fence)
                return Stepped(again=False, finished=True)
            if ending:
                await unit.emit_all(cid, ending, fence=fence)
            proposed = [
                await self.proposals.propose(
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
            waiting = any(p.call.state.open for p in proposed)
            status = RunStatus.WAITING if waiting else RunStatus.RUNNING
            await self.leases.end_step(run_id, keep=not waiting, status=status, step=step)
            # Last: on PostgreSQL a held write, which goes out with the unit's appends at its
            # commit; a statement that reads nothing before them would send it on its own.
            await self.store.add_usage(spent.record)
        executing = (p.call for p in proposed if isinstance(p, Dispatched) and p.execute)
        return Stepped(again=not waiting, executing=tuple(executing))

    async def fail_eventually(self, run_id: str, code: str, detail: str) -> bool:
        """``fail``, retried while the store refuses writes: the run ends (RUN_ERROR, and
        the person may send again) as soon as a write gets through. False if none did
        after ``FAIL_RETRIES`` tries: the engine's sweeper ticks go on trying."""
        delay = 0.25
        for attempt in range(FAIL_RETRIES):
            try:
                await self.fail(run_id, code, detail)
                return True
            except LeaseLost:
                raise
            except Exception as exc:
                if attempt == FAIL_RETRIES - 1:
                    log.error("run %s: could not record its failure yet: %s", run_id, exc)
                    return False
                log.warning("run %s: cannot record its failure yet (%s); retrying", run_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, FAIL_RETRY_MAX_SECONDS)
        return False  # FAIL_RETRIES < 1: no try at all

    async def fail(
        self,
        run_id: str,
        code: str,
        detail: str,
        *,
        interrupted: tuple[str, str] | None = None,
        usage: UsageRecord | None = None,
    ) -> None:
        """End the run: the operator's log gets ``detail``; the visitor (event and snapshot)
        gets the code and a sentence from ``hostcall.notices``, never the detail.

        ``interrupted`` is (message id, text) of an assistant message the failure cut off:
        the person saw it streamed, so it stays in the conversation, marked. ``usage``: what
        the failed step used, recorded with the failure."""
        run = await self.store.get_run(run_id)
        if run is None:  # deleted meanwhile: there is nothing left to end
            log.error("run %s failed, and is gone: code=%s: %s", run_id, code, detail)
            return
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
        # What the failed step streamed and never stored (a write failed mid-text): gone
        # as after a crash (Recovery._discard_cut_off), discarded then ended, so every
        # started message ends before the RUN_ERROR and the stream agrees with the snapshot.
        kept = interrupted[0] if interrupted is not None else None
        cut_off = [m for m in await open_messages(self.store, cid) if m != kept]
        async with self.journal.unit() as unit:
            for message_id in cut_off:
                await unit.emit(cid, MessageDiscarded(message_id))
                await unit.emit(cid, TextMessageEnd(message_id))
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
            if usage is not None:
                await self.store.add_usage(usage)
        await self.usage.run_ended(run, RunStatus.FAILED, error=code)


def _model_message(message: StoredMessage, files: tuple[Attached, ...] = ()) -> Message:
    if message.role == "assistant":
        return Message(
            role="assistant",
            text=message.text + (INTERRUPTED_NOTE if message.interrupted else ""),
            tool_calls=tuple(
                ToolCallRequest(c["id"], c["name"], c["arguments"]) for c in message.tool_calls
            ),
        )
    if message.role == "operator":
        # A person of the team answered while they held the conversation (hostcall/
        # handoff.py): the model reads it as said on its side, and by whom.
        return Message(
            role="assistant", text=f"[{message.author}, a person of the team] {message.text}"
        )
    if message.role == "tool":
        return Message(
            role="tool",
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
        )
    return Message(role="user", text=message.text, context=message.context, attachments=files)
