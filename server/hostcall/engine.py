"""The run engine: a user message starts a run; the model steps until it stops calling tools.

A run waiting for a client holds no coroutine. Its state lives in the store (status
``waiting``, the calls of its current step); whoever settles the last open call of the step
gets a ``Settled`` back from the ledger and hands it here: the engine claims the run
(``waiting`` → ``running``, atomically) and starts the next step.

Several processes may share the store. A step, and a server-side call in flight, is owned
by a lease (hostcall/leases.py) taken in the transaction that starts it; ``sweep`` runs in
one process of the cluster at a time: it expires calls past their deadline, adopts the
work of processes whose leases lapsed (they died), and resumes runs a crash left between
two transactions. The same code recovers a single process after a restart.

The engine is the one place that acts on what happened; the work itself is done by its
collaborators in hostcall/runs/ (composed in hostcall/runtime.py): stepping.py (one model
step, and a run's failure), server_calls.py (server-side tools), recovery.py (the
sweeper's passes), agents.py (each run's agent and model), tasks.py (what it started),
starting.py (a run's start).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from hostcall import metrics
from hostcall.calls.outcomes import CallExpired, Dispatched, Moved, Settled
from hostcall.errors import (
    Conflict,
    LeaseLost,
    NotFound,
    ToolErrorCode,
    is_store_failure,
)
from hostcall.journal import Journal
from hostcall.leases import Leases, call_key, run_key
from hostcall.ledger import Ledger
from hostcall.notices import run_notice
from hostcall.platform import Platform
from hostcall.protocol.codes import ErrorCode, RunErrorCode
from hostcall.protocol.events import (
    MessageDiscarded,
    RunError,
    TextMessageEnd,
)
from hostcall.runs.agents import RunAgents
from hostcall.runs.recovery import Adopted, Recovery, Resumable, Work
from hostcall.runs.server_calls import ServerCalls
from hostcall.runs.starting import Starts
from hostcall.runs.stepping import Steps
from hostcall.runs.tasks import Tasks
from hostcall.store.interfaces import (
    Calls,
    Events,
    Runs,
)
from hostcall.store.interfaces import Leases as LeaseRows
from hostcall.store.records import (
    AttachmentRef,
    Branch,
    Call,
    ClaimedRun,
    Conversation,
    Run,
    RunStatus,
    Surface,
)
from hostcall.transcript import open_messages
from hostcall.visitors.visitor import Visitor

log = logging.getLogger("hostcall.engine")


class _EngineStore(Calls, Events, LeaseRows, Runs, Protocol):
    """What the engine reads and writes itself, outside its parts: a stopped run, its step's
    calls and open messages, and its lease."""


class Engine:
    def __init__(
        self,
        journal: Journal,
        leases: Leases,
        agents: RunAgents,
        ledger: Ledger,
        *,
        store: _EngineStore,
        starts: Starts,
        steps: Steps,
        server_calls: ServerCalls,
        recovery: Recovery,
    ) -> None:
        self.journal = journal
        self.store = store
        self.leases = leases
        self.agents = agents
        self.ledger = ledger
        self.starts = starts
        self.steps = steps
        self.server_calls = server_calls
        self.recovery = recovery
        self.tasks = Tasks()
        self._stalled_checked = 0.0
        # The task stepping each run in this process, so that Stop ends it at once.
        self._stepping: dict[str, asyncio.Task[None]] = {}
        # Runs whose step failed and whose failure the store would not take yet (a long
        # outage): run id -> (code, detail), recorded by the next tick that gets through.
        # Left `running`, such a run would refuse every message until a restart: its
        # lease is this process's, renewed as long as it lives.
        self._unrecorded: dict[str, tuple[str, str]] = {}

    @property
    def platform(self) -> Platform:
        return self.agents.platform

    # ---- starting and resuming -------------------------------------------------------------

    async def start_run(
        self,
        conversation: Conversation,
        text: str | None,
        *,
        simulate: bool = False,
        visitor: Visitor | None = None,
        context: dict[str, Any] | None = None,
        branch: Branch | None = None,
        attachments: tuple[AttachmentRef, ...] = (),
        surfaces: list[Surface] | None = None,
    ) -> Run:
        """A run for the visitor's new message ``text``; or, with ``text`` None, Retry: a
        run over the history as it is, after a failed run (the message it failed on is
        not sent, nor stored, again: the thread shows it once, the model reads one turn).
        ``context``: the page's, as its agent admitted it (hostcall/page_context.py), kept
        with the message. ``branch``: an edit or a regeneration, whose messages ``text``
        replaces in the unit that starts the run (hostcall/services/branches.py).
        ``attachments``: files uploaded to the conversation that the message sends; each is
        taken in the same unit, or none is (``bad_attachment``: one was sent meanwhile).
        ``surfaces``: the conversation's, read with it (a message's session check), or None
        to read them here: the run plans with the page tools of those present."""
        started = await self.starts.start(
            conversation, text, simulate=simulate, visitor=visitor, context=context,
            branch=branch, attachments=attachments, surfaces=surfaces,
        )  # fmt: skip
        run = started.claimed.run
        metrics.child(metrics.RUNS, metrics.agent_label(started.agent_id), "started").inc()
        self.tasks.spawn(self._advance(run.id, started.claimed))
        return run

    async def stop_run(self, run_id: str, code: RunErrorCode) -> Run:
        """Stop a running or waiting run (the visitor's Stop: ``cancelled``; an operator's
        cancel: ``operator_cancelled``): it fails with ``code``, and each open call of its
        step fails with the matching ``ToolErrorCode``, the model told by its tool message.

        One unit breaks the run's lease (whoever holds it: a step mid-stream, in any
        process, then commits nothing more, its fenced appends and its end refused with
        ``LeaseLost``) and claims the run; a step of this process is cancelled too, so
        the model is not read to the end. Lease first, then the run, in the step's own
        order: on PostgreSQL the two wait for each other, never deadlock. Raises
        ``Conflict`` (``run_not_active``) for a run that ended first, stopped twice included.
        """
        run = await self.store.get_run(run_id)
        if run is None:
            raise NotFound(f"no run {run_id}", code=ErrorCode.UNKNOWN_RUN)
        message = run_notice(code)
        cid = run.conversation_id
        # The visitor's Stop is an outcome of its own; an operator's cancel stays a failure
        # of the run as the visitor sees it (the team ended it, not the visitor).
        ending = RunStatus.STOPPED if code is RunErrorCode.CANCELLED else RunStatus.FAILED
        async with self.journal.unit() as unit:
            await self.store.break_lease(run_key(run_id))
            stopped = await self.store.claim_run(
                run_id, RunStatus.RUNNING, ending
            ) or await self.store.claim_run(run_id, RunStatus.WAITING, ending)
            if stopped is None:  # the unit rolls back: the lease stays its holder's
                ended = await self.store.get_run(run_id)
                status = ended.status.value if ended is not None else "gone"
                raise Conflict(
                    f"run {run_id} is {status}; only a running or waiting run can be stopped",
                    code=ErrorCode.RUN_NOT_ACTIVE,
                    status=status,
                )
            # What the step streamed and never stored goes, as after a failure
            # (Steps.fail): every started message ends before the RUN_ERROR.
            for message_id in await open_messages(self.store, cid):
                await unit.emit(cid, MessageDiscarded(message_id))
                await unit.emit(cid, TextMessageEnd(message_id))
            await self.store.update_run(run_id, error={"code": code, "message": message})
            await unit.emit(cid, RunError(message, code, run_id))
        step = self._stepping.get(run_id)
        if step is not None:
            step.cancel()
        await self.steps.usage.run_ended(stopped, ending, error=code)
        tool_code = (
            ToolErrorCode.CANCELLED
            if code is RunErrorCode.CANCELLED
            else ToolErrorCode.OPERATOR_CANCELLED
        )
        for call in await self.store.calls_of_step(run_id, stopped.step):
            if call.state.open:
                # Settled, its run is not resumed: a failed run is never claimed again.
                await self.ledger.answers.cancel(call, tool_code)
        return stopped

    # ---- what a request's ledger write left to do -------------------------------------

    async def follow(self, outcome: Moved) -> Call:
        """Do what a request's ledger write left for after its unit committed, before the
        request answers: resume the run of a settled call, start the block of a dispatched
        server-side call. The call as the write left it."""
        if isinstance(outcome, Settled):
            self.resume(outcome)
            # Do not "fix" these: they are what the person waits for. The streams were
            # woken (by the settling unit's publish) before the run's task was started, so
            # in the first turn they write ``TOOL_CALL_RESULT``, then the resumed step runs
            # up to its first wait (a model that answers at once: up to its first text,
            # committed and published); in the second, the streams write that text. The
            # person's next words do not wait behind the answering page's 200.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        elif isinstance(outcome, Dispatched) and outcome.execute:
            self.tasks.spawn(self._run_server_call(outcome.call.id))
        return outcome.call

    def resume(self, settled: Settled) -> None:
        """Resume the settled call's run in a task of its own, now that the unit that
        settled it has committed and published: the streams, woken by that publish, write
        the ``TOOL_CALL_RESULT`` before the next step is claimed and started. A crash in
        between leaves a waiting run with every call settled, which the sweeper resumes
        (``stalled_runs``)."""
        self.tasks.spawn(self._resume_later(settled.run_id))

    def resume_expired(self, expired: CallExpired) -> None:
        """A request found its call past the deadline and expired it: ``resume`` the run
        before the refusal goes out (nothing to do if another request expired it first)."""
        if expired.settled is not None:
            self.resume(expired.settled)

    async def _resume_later(self, run_id: str) -> None:
        try:
            claimed = await self.leases.claim_ready_run(run_id, turns=await self._turns(run_id))
        except Exception:  # the sweeper's stalled-run scan tries again
            log.exception("run %s: could not resume it", run_id)
            return
        if claimed is not None:
            # This task is the run's own already: step here, with the run just read.
            await self._advance(run_id, claimed)

    async def _resume_if_ready(self, run_id: str) -> None:
        """Claim a waiting run whose step has no open call left, and step it. The lease and
        the claim commit together, in one statement: no process ever sees the run running
        without an owner (the sweeper would adopt it)."""
        claimed = await self.leases.claim_ready_run(run_id, turns=await self._turns(run_id))
        if claimed is not None:
            self.tasks.spawn(self._advance(run_id, claimed))

    async def _turns(self, run_id: str) -> int | None:
        """How many turns the run's steps send the model (its agent's ``history_turns``): what
        its claim reads. Known in memory for a run this process started or stepped; else one
        read of the run (None, all turns: no such run, and the claim finds none either)."""
        agent = await self.agents.run_agent(run_id)
        return agent.history_turns if agent is not None else None

    # ---- stepping --------------------------------------------------------------------------

    async def _advance(self, run_id: str, claimed: ClaimedRun | None = None) -> None:
        """Step the run while it can go on; we hold its lease, and hand it back at the end.
        ``claimed``: the run as its claim (or start) left it, and its history then, so the
        first step need not read them."""
        task = asyncio.current_task()
        if task is not None:
            self._stepping[run_id] = task
        try:
            try:
                while True:
                    stepped = await self.steps.step(run_id, claimed)
                    for call in stepped.executing:
                        self.tasks.spawn(self._run_server_call(call.id))
                    if not stepped.again:
                        break
                    claimed = None
            except LeaseLost:
                raise
            except Exception as exc:
                log.exception("run %s failed", run_id)
                # A write the store refused (full disk, read-only file) must still end the
                # run, or it stays `running` and refuses every message.
                code = (
                    RunErrorCode.STORE_UNAVAILABLE
                    if is_store_failure(exc)
                    else RunErrorCode.INTERNAL_ERROR
                )
                detail = f"{type(exc).__name__}: {exc}"
                if not await self.steps.fail_eventually(run_id, code, detail):
                    self._unrecorded[run_id] = (code, detail)
        except LeaseLost as lost:
            # This process stalled past its lease and another adopted the run, or the run
            # was stopped: the step was rolled back; the new owner runs it, if any.
            log.warning("run %s left to its new owner: %s", run_id, lost)
        finally:
            if self._stepping.get(run_id) is task:
                del self._stepping[run_id]

    async def _run_server_call(self, call_id: str) -> None:
        """A server-side call's request, under the lease its dispatch took; then its run
        goes on, as after any answer."""
        try:
            settled = await self.server_calls.request(call_id)
            if settled is not None:
                await self.follow(settled)
        finally:
            await self.leases.release(call_key(call_id))

    # ---- recovery ------------------------------------------------------------------------

    async def recover(self) -> None:
        """Pick up what a previous process left (called once at start)."""
        for work in await self.recovery.recover():
            await self._take_up(work)

    async def sweep(self, *, stalled: bool = False) -> None:
        """The cluster's periodic chores; a no-op unless this process has the sweeper's turn."""
        for work in await self.recovery.sweep(stalled=stalled):
            await self._take_up(work)

    async def _take_up(self, work: Work) -> None:
        if isinstance(work, Adopted):
            self.tasks.spawn(self._advance(work.run_id))
        elif isinstance(work, Resumable):
            await self._resume_if_ready(work.run_id)
        elif isinstance(work, Settled):
            self.resume(work)
        else:
            self.tasks.spawn(self._run_server_call(work.call.id))

    async def retire(self) -> None:
        """A clean shutdown: our streams stop counting now, not when our lease lapses."""
        await self.recovery.retire()

    async def sweep_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            # Stalled runs need a scan of open runs: look for them once per lease period.
            stalled = now - self._stalled_checked >= self.leases.ttl
            if stalled:
                self._stalled_checked = now
            await self._record_failures()
            try:
                await self.sweep(stalled=stalled)
            except Exception:  # a bad row must not stop expiry for every other call
                log.exception("sweep failed")

    async def _record_failures(self) -> None:
        """Try again to end the runs whose failure the store refused (``_unrecorded``)."""
        for run_id, (code, detail) in list(self._unrecorded.items()):
            try:
                await self.steps.fail(run_id, code, detail)
            except LeaseLost:
                pass  # another process adopted the run when our lease lapsed: it is theirs
            except Exception as exc:  # still refused: the next tick tries again
                log.debug("run %s: still cannot record its failure: %s", run_id, exc)
                continue
            del self._unrecorded[run_id]

    async def drain(self) -> None:
        """Wait for steps in flight (tests and shutdown)."""
        await self.tasks.drain()
