"""The run engine: a user message starts a run; the model steps until it stops calling tools.

A run waiting for a client holds no coroutine. Its state lives in the store (status
``waiting``, the calls of its current step); whoever settles the last open call of the step
claims the run (``waiting`` → ``running``, atomically) and starts the next step.

Several processes may share the store. A step, and a server-side call in flight, is owned
by a lease (server/leases.py) taken in the transaction that starts it; ``sweep`` runs in
one process of the cluster at a time: it expires calls past their deadline, adopts the
work of processes whose leases lapsed (they died), and resumes runs a crash left between
two transactions. The same code recovers a single process after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from server.agents import Agent, definition_digest, parse_agent
from server.blocks.http_request import BlockError, BlockFailed, execute, render_request
from server.errors import Conflict, LeaseLost, NotFound, ToolErrorCode
from server.journal import Journal
from server.leases import Leases, call_key, process_key, run_key
from server.ledger import Ledger, new_id
from server.models.base import (
    Message,
    Model,
    ModelError,
    TextDelta,
    ToolCallRequest,
    ToolDescriptor,
)
from server.models.factory import build_model
from server.notices import run_notice
from server.platform import Platform
from server.protocol.events import (
    MessageDiscarded,
    RunError,
    RunFinished,
    RunStarted,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
)
from server.quotas import estimate_tokens
from server.store.records import Call, CallState, Conversation, Run, RunStatus, StoredMessage
from server.tokens import Tokens
from server.transcript import open_messages

log = logging.getLogger("hostcall.engine")
RUN_CACHE_SIZE = 4096
FAIL_RETRY_MAX_SECONDS = 5.0
FAIL_RETRIES = 12  # about 45 s of a full disk before giving up until the next start
# Told to the model after a reply of its own that an error cut off.
INTERRUPTED_NOTE = "\n\n[This reply was interrupted by an error before it was complete.]"
SWEEPER = "sweeper"


class Engine:
    def __init__(
        self,
        journal: Journal,
        tokens: Tokens,
        agents: Mapping[str, Agent],
        *,
        platform: Platform,
        environ: Mapping[str, str],
        leases: Leases,
        clock: Callable[[], float] = time.time,
        surface_grace: float = 5.0,
    ) -> None:
        self.journal = journal
        self.store = journal.store
        # Told the (estimated) model tokens of each step: the cost limits (server/quotas.py).
        self.on_model_tokens: Callable[[Agent, str, int], None] | None = None
        self.leases = leases
        self._stalled_checked = 0.0
        # Replaced whole on reload; runs in flight keep the definition they started with.
        self.agents = agents
        self.platform = platform
        self.environ = environ
        # Definitions are immutable once a run starts: cache by run id (bounded), and share
        # parsed agents and built models between runs of the same definition.
        self._by_run: OrderedDict[str, Agent] = OrderedDict()
        self._frozen: dict[str, Agent] = {}
        self._models: dict[str, Model] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.ledger = Ledger(
            journal,
            tokens,
            agent_of_run=self.agent_of_run,
            platform=lambda: self.platform,
            on_settled=self._resume_soon,
            on_dispatched=self._start_server_call,
            clock=clock,
            surface_grace=surface_grace,
        )
        self.clock = clock

    # ---- agents, frozen per run -----------------------------------------------------------

    def agent_of_run(self, run_id: str) -> Agent:
        """The agent as it was when the run started (its definition is stored in the run)."""
        agent = self._by_run.get(run_id)
        if agent is not None:
            self._by_run.move_to_end(run_id)
            return agent
        run = self.store.get_run(run_id)
        assert run is not None, f"no run {run_id}"
        key = definition_digest(run.agent)
        agent = self._frozen.get(key)
        if agent is None:
            agent, problems = parse_agent(run.agent, f"run {run_id}", self.environ)
            assert agent is not None, problems
            self._frozen[key] = agent
        self._remember(run_id, agent)
        return agent

    def _remember(self, run_id: str, agent: Agent) -> None:
        self._by_run[run_id] = agent
        if len(self._by_run) > RUN_CACHE_SIZE:
            self._by_run.popitem(last=False)

    def _model(self, agent: Agent) -> Model:
        key = agent.digest
        model = self._models.get(key)
        if model is None:
            names = [t.name for t in agent.tools]
            model = self._models[key] = build_model(agent.model, environ=self.environ, tools=names)
        return model

    # ---- starting and resuming -------------------------------------------------------------

    def start_run(self, conversation: Conversation, text: str, *, simulate: bool = False) -> Run:
        agent = self.agents.get(conversation.agent_id)
        if agent is None:
            raise NotFound(
                f"agent {conversation.agent_id!r} is no longer loaded", code="unknown_agent"
            )
        latest = self.store.latest_run(conversation.id)
        if latest is not None and latest.status in (RunStatus.RUNNING, RunStatus.WAITING):
            raise Conflict(
                f"run {latest.id} is still {latest.status.value}; wait for it to finish",
                code="run_in_progress",
                runId=latest.id,
            )
        run = Run(new_id("r"), conversation.id, agent.source, RunStatus.RUNNING, simulate=simulate)
        self._remember(run.id, agent)
        message_id = new_id("m")
        cid = conversation.id
        with self.journal.unit() as unit:
            self.store.create_run(run)
            taken = self.leases.take(run_key(run.id))
            assert taken, "a new run's lease is free"
            self.store.add_message(StoredMessage(message_id, cid, run.id, "user", text))
            unit.emit(cid, RunStarted(cid, run.id, simulated=True if simulate else None))
            unit.emit(cid, TextMessageStart(message_id, "user"))
            unit.emit(cid, TextMessageContent(message_id, text))
            unit.emit(cid, TextMessageEnd(message_id))
        self._spawn(self._advance(run.id))
        return run

    def cancel_run(self, run_id: str) -> bool:
        """Stop a run waiting on its calls (the operator console); its open calls expire.

        False if the run is not waiting (a run mid-step finishes its step first). A waiting
        run holds no lease, so the claim is the whole story, in any process.
        """
        run = self.store.get_run(run_id)
        if run is None:
            return False
        message = run_notice("cancelled")
        with self.journal.unit() as unit:
            if not self.store.claim_run(run_id, RunStatus.WAITING, RunStatus.FAILED):
                return False
            self.store.update_run(run_id, error={"code": "cancelled", "message": message})
            unit.emit(run.conversation_id, RunError(message, "cancelled", run_id))
        for call in self.store.calls_of_step(run_id, run.step):
            if call.state.open:
                self.ledger.expire(call)
        return True

    def _resume_soon(self, run_id: str) -> None:
        """Resume the run in a task of its own, after the unit that settled its last call
        has committed: the request that answered the call gets its response, and streams
        write the ``TOOL_CALL_RESULT``, before the next step is claimed and started (issue 9:
        the round trip). A crash in between leaves a waiting run with every call settled,
        which the sweeper resumes (``stalled_runs``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a command, a synchronous test): at once
            self._resume_if_ready(run_id)
            return
        self._spawn(self._resume_later(run_id))

    async def _resume_later(self, run_id: str) -> None:
        try:
            self._resume_if_ready(run_id)
        except Exception:  # the sweeper's stalled-run scan tries again
            log.exception("run %s: could not resume it", run_id)

    def _resume_if_ready(self, run_id: str) -> None:
        run = self.store.get_run(run_id)
        if run is None or run.status is not RunStatus.WAITING:
            return
        if any(c.state.open for c in self.store.calls_of_step(run_id, run.step)):
            return
        key = run_key(run_id)
        # The lease and the claim commit together: no process ever sees the run running
        # without an owner (the sweeper would adopt it).
        with self.store.transaction():
            if not self.leases.take(key):
                return  # another process holds the run; it resumes it
            if not self.store.claim_run(run_id, RunStatus.WAITING, RunStatus.RUNNING):
                self.leases.end(key)
                return
        self._spawn(self._advance(run_id))

    def recover(self) -> None:
        """Pick up what a previous process left (called once at start)."""
        # Every stream this store counted belonged to a process that is gone; their pages
        # reconnect within the grace period, or their calls move on.
        self.store.reset_surfaces(self.clock())
        # Our streams count while this lease lives; the sweeper of a cluster drops them
        # once it lapses (the process died), and the grace period starts.
        with self.store.transaction():
            self.leases.take(process_key(self.leases.owner))
        self.sweep(stalled=True)

    def retire(self) -> None:
        """A clean shutdown: our streams stop counting now, not when our lease lapses."""
        with self.store.transaction():
            self.store.drop_streams(self.leases.owner, self.clock())
            self.leases.release(process_key(self.leases.owner))

    def sweep(self, *, stalled: bool = False) -> None:
        """The cluster's periodic chores; a no-op unless this process has the sweeper's turn."""
        if not self.store.try_singleton(SWEEPER):
            return
        self.ledger.expire_due()
        self.ledger.rehome_due()
        for key in self.leases.expired():
            if self.leases.take(key):
                self._adopt(key)
        if stalled:
            for run in self.store.stalled_runs():
                self._adopt_stalled(run)

    def _adopt(self, key: str) -> None:
        """Go on with the work of a lease that lapsed (its process died); we hold it now."""
        kind, _, ident = key.partition(":")
        if kind == "process":
            # Its streams died with it: their surfaces stop counting them, the grace period
            # starts, and the next passes re-assign their reads and send writes to the form.
            with self.store.transaction():
                dropped = self.store.drop_streams(ident, self.clock())
                self.leases.release(key)
            log.info("process %s is gone: %d of its surface streams dropped", ident, dropped)
            return
        if kind == "run":
            run = self.store.get_run(ident)
            if run is not None and run.status is RunStatus.RUNNING:
                log.info("resuming run %s, interrupted mid-step", ident)
                self._discard_cut_off(run)
                self._spawn(self._advance(ident))
                return
            self.leases.release(key)
            if run is not None and run.status is RunStatus.WAITING:
                self._resume_if_ready(ident)
            return
        call = self.store.get_call(ident) if kind == "call" else None
        tool = self.ledger.tool_of(call) if call is not None else None
        if call is None or tool is None or call.state is not CallState.DISPATCHED:
            self.leases.release(key)
            return
        if tool.effect == "read":
            self._spawn(self._run_server_call(call.id))
            return
        # It may have reached its target before the process died: never send a write twice.
        self.ledger.fail(
            call, ToolErrorCode.BLOCK_FAILED,
            "The server restarted while this request was in flight; a write is not "
            "retried, so check whether it took effect.",
        )  # fmt: skip
        self.leases.release(key)

    def _adopt_stalled(self, run: Run) -> None:
        if run.status is RunStatus.WAITING:
            self._resume_if_ready(run.id)
            return
        key = run_key(run.id)
        if not self.leases.take(key):
            return
        current = self.store.get_run(run.id)  # it may have moved since we listed it
        if current is not None and current.status is RunStatus.RUNNING:
            log.info("resuming run %s, left running without an owner", run.id)
            self._discard_cut_off(current)
            self._spawn(self._advance(run.id))
        else:
            self.leases.release(key)

    def _discard_cut_off(self, run: Run) -> None:
        """A step cut off mid-answer left a message started and never ended (its text was
        never stored: a message is stored when its step commits). Before the step runs
        again, tell surfaces to discard that message, then end it, so the answer is shown
        once — as the snapshot and the model's history have it (issue 9).

        The discard comes first: a client that takes ``TEXT_MESSAGE_END`` as "this text is
        final" (the widget announces it and tells the host page) has already dropped the
        cut copy when the end arrives. The end still follows, because AG-UI wants every
        started message ended before the run finishes; AG-UI allows other events while a
        message is open."""
        cid = run.conversation_id
        started = open_messages(self.store, cid)
        if not started:
            return
        with self.journal.unit() as unit:
            for message_id in started:
                log.info("discarding message %s of run %s, cut off mid-answer", message_id, run.id)
                unit.emit(cid, MessageDiscarded(message_id))
                unit.emit(cid, TextMessageEnd(message_id))

    async def sweep_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            # Stalled runs need a scan of open runs: look for them once per lease period.
            stalled = now - self._stalled_checked >= self.leases.ttl
            if stalled:
                self._stalled_checked = now
            try:
                self.sweep(stalled=stalled)
            except Exception:  # a bad row must not stop expiry for every other call
                log.exception("sweep failed")

    # ---- server-side tools ---------------------------------------------------------------

    def _start_server_call(self, call: Call) -> None:
        # Called inside the dispatching transaction: the lease commits with the dispatch.
        taken = self.leases.take(call_key(call.id))
        assert taken, "a newly dispatched call's lease is free"
        self._spawn(self._run_server_call(call.id))

    async def _run_server_call(self, call_id: str) -> None:
        try:
            await self._request(call_id)
        finally:
            self.leases.release(call_key(call_id))

    async def _request(self, call_id: str) -> None:
        call = self.store.get_call(call_id)
        if call is None or not call.state.answerable:
            return
        tool = self.ledger.tool_of(call)
        assert tool is not None and tool.http is not None
        agent = self.agent_of_run(call.run_id)
        environment = self.platform.environment(agent.environment)
        connection = self.platform.connections.get(tool.http.connection or "", {})
        try:
            request = render_request(tool.http.spec, call.input)
            result = await execute(
                request,
                allowed_hosts=environment.allowed_hosts,
                extra_headers=connection,
                timeout=tool.deadline_seconds,
                max_response_bytes=int(tool.http.max_response_kb * 1024),
            )
        except BlockError as exc:
            # The model gets the message; the visitor's card shows only a translated sentence
            # for the code, so the operator's log is where the detail is read.
            log.warning(
                "server-side tool failed: agent=%s tool=%s call=%s code=%s: %s",
                agent.id, tool.name, call.id, exc.code, exc.message,
            )  # fmt: skip
            status = exc.status if isinstance(exc, BlockFailed) else None
            details = {"status": status} if status else {}
            self._settle_quietly(call, ToolErrorCode(exc.code), exc.message, **details)
            return
        current = self.store.get_call(call_id)
        if current is None or not current.state.answerable:
            return  # expired (or settled by an operator) while the request ran
        try:
            self.ledger.answer(current, result.to_output())
        except Exception as exc:  # e.g. the body does not match the tool's output schema
            self._settle_quietly(current, ToolErrorCode.BLOCK_FAILED, str(exc))

    def _settle_quietly(
        self, call: Call, code: ToolErrorCode, message: str, **details: Any
    ) -> None:
        current = self.store.get_call(call.id)
        if current is not None and current.state.answerable:
            self.ledger.fail(current, code, message, **details)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for steps in flight (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    # ---- stepping --------------------------------------------------------------------------

    async def _advance(self, run_id: str) -> None:
        """Step the run while it can go on; we hold its lease, and hand it back at the end."""
        try:
            try:
                while await self._step(run_id):
                    pass
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

    async def _step(self, run_id: str) -> bool:
        """One model step; True when the run should step again at once."""
        run = self.store.get_run(run_id)
        assert run is not None
        agent = self.agent_of_run(run_id)
        cid = run.conversation_id
        if run.step >= agent.max_steps:
            self._fail(
                run_id,
                "step_limit",
                f"The agent made {run.step} model steps without finishing; "
                f"the limit is {agent.max_steps}.",
            )
            return False
        model = self._model(agent)
        tools = [ToolDescriptor(t.name, t.description, t.input_schema) for t in agent.tools]
        history = [_model_message(m) for m in self.store.list_messages(cid)]
        message_id = new_id("m")
        text: list[str] = []
        requests: list[ToolCallRequest] = []
        try:
            async for item in model.stream(history, tools, instructions=agent.instructions):
                if isinstance(item, TextDelta):
                    if not item.text:
                        continue
                    with self.journal.unit() as unit:  # the start and first text: one commit
                        if not text:
                            unit.emit(cid, TextMessageStart(message_id, "assistant"))
                        unit.emit(cid, TextMessageContent(message_id, item.text))
                    text.append(item.text)
                    if len(text) == 1:
                        # Let streams write the first text now: a model whose chunks come in
                        # a burst (or without awaiting) must not hold it until the step ends.
                        await asyncio.sleep(0)
                else:
                    requests.append(item)
        except ModelError as exc:
            partial = (message_id, "".join(text)) if text else None
            self._fail(run_id, exc.code, exc.message, interrupted=partial)
            return False
        if self.on_model_tokens is not None:
            sent = [agent.instructions, *(m.text for m in history)]
            written = [*text, *(r.arguments for r in requests)]
            self.on_model_tokens(agent, cid, estimate_tokens(sent + written))
        conversation = self.store.get_conversation(cid)
        assert conversation is not None
        step = run.step + 1
        calls = [(new_id("k"), r) for r in requests]
        with self.journal.unit() as unit:
            if text:
                unit.emit(cid, TextMessageEnd(message_id))
            self.store.add_message(
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
            if not calls:
                self.leases.end(run_key(run_id))
                self.store.update_run(run_id, status=RunStatus.FINISHED, step=step)
                unit.emit(cid, RunFinished(cid, run_id))
                return False
            opened = [
                self.ledger.propose(
                    unit,
                    run=run,
                    agent=agent,
                    conversation=conversation,
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
            if waiting:
                self.leases.end(run_key(run_id))
            else:
                self.leases.keep(run_key(run_id))
            self.store.update_run(run_id, status=status, step=step)
        return not waiting

    async def _fail_eventually(self, run_id: str, code: str, detail: str) -> None:
        """``_fail``, retried while the store refuses writes: the run ends (RUN_ERROR, and
        the person may send again) as soon as a write gets through."""
        delay = 0.25
        for attempt in range(FAIL_RETRIES):
            try:
                self._fail(run_id, code, detail)
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

    def _fail(
        self, run_id: str, code: str, detail: str, *, interrupted: tuple[str, str] | None = None
    ) -> None:
        """End the run: the operator's log gets ``detail``; the visitor (event and snapshot)
        gets the code and a sentence from ``server.notices``, never the detail.

        ``interrupted`` is (message id, text) of an assistant message the failure cut off:
        the person saw it streamed, so it stays in the conversation, marked (issue 8)."""
        run = self.store.get_run(run_id)
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
        with self.journal.unit() as unit:
            if interrupted is not None:
                message_id, partial = interrupted
                unit.emit(cid, TextMessageEnd(message_id, interrupted=True))
                self.store.add_message(
                    StoredMessage(message_id, cid, run_id, "assistant", partial, interrupted=True)
                )
            self.leases.end(run_key(run_id))
            self.store.update_run(
                run_id, status=RunStatus.FAILED, error={"code": code, "message": message}
            )
            unit.emit(cid, RunError(message, code, run_id))


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
