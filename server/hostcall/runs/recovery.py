"""Recovery: the cluster's periodic chores, run by one process at a time (the sweeper's
turn, ``Leases.take_turn``): expire calls past their deadline, move calls whose surface
is gone, adopt the work of processes whose leases lapsed (they died), find runs a crash
left between two transactions, and delete conversations past their agent's retention
(hostcall/retention.py). The same code recovers a single process at start.

A pass returns the work it found, for the engine to start (hostcall/engine.py):

    Adopted      a run left mid-step, whose lease this pass took: step it
    Resumable    a waiting run: claim it if its step has no open call left, and step it
    Settled      a call this pass settled (expired, or failed): its run may go on
    Dispatched   a server-side read left in flight, whose lease this pass took: run it again
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from hostcall.calls.outcomes import Dispatched, Settled
from hostcall.errors import ToolErrorCode
from hostcall.journal import Journal
from hostcall.leases import Leases, process_key, run_key, turn_key
from hostcall.ledger import Ledger
from hostcall.protocol.events import (
    MessageDiscarded,
    TextMessageEnd,
)
from hostcall.retention import Retention
from hostcall.store.interfaces import Calls, Database, Events, Runs, Surfaces
from hostcall.store.records import CallState, Run, RunStatus
from hostcall.transcript import open_messages

log = logging.getLogger("hostcall.engine")

SWEEPER = "sweeper"


class _RecoveryStore(Calls, Database, Events, Runs, Surfaces, Protocol):
    """What recovery reads and resets: stalled runs, their calls, streams and open messages."""


@dataclass(frozen=True, slots=True)
class Adopted:
    run_id: str


@dataclass(frozen=True, slots=True)
class Resumable:
    run_id: str


Work = Adopted | Resumable | Settled | Dispatched


class Recovery:
    def __init__(
        self,
        journal: Journal,
        leases: Leases,
        ledger: Ledger,
        *,
        store: _RecoveryStore,
        clock: Callable[[], float],
        retention: Retention | None = None,
    ) -> None:
        self.journal = journal
        self.retention = retention
        self.store = store
        self.leases = leases
        self.ledger = ledger
        self.clock = clock

    async def recover(self) -> list[Work]:
        """Pick up what a previous process left (called once at start)."""
        # Every stream this store counted belonged to a process that is gone; their pages
        # reconnect within the grace period, or their calls move on.
        await self.store.reset_surfaces(self.clock())
        # Our streams count while this lease lives; the sweeper of a cluster drops them
        # once it lapses (the process died), and the grace period starts.
        async with self.store.transaction():
            await self.leases.take(process_key(self.leases.owner))
        return await self.sweep(stalled=True)

    async def retire(self) -> None:
        """A clean shutdown: our streams stop counting now, not when our lease lapses."""
        async with self.store.transaction():
            await self.store.drop_streams(self.leases.owner, self.clock())
            await self.leases.release(process_key(self.leases.owner))
            # Another process sweeps from its next pass, not once our turn lapses.
            await self.leases.release(turn_key(SWEEPER))

    async def sweep(self, *, stalled: bool = False) -> list[Work]:
        """The cluster's periodic chores; a no-op unless this process has the sweeper's turn.

        Asking for the turn renews it: a process that stops sweeping loses it within a
        lease. One that lost it mid-pass (paused past its lease) may finish that pass beside
        the new holder: every step of a pass is conditional (a call leaves a state once, a
        lease is taken only once lapsed), so nothing is done twice."""
        if not await self.leases.take_turn(SWEEPER):
            return []
        work: list[Work | None] = []
        work += await self.ledger.answers.expire_due()
        work += await self.ledger.rehoming.rehome_due()
        for key in await self.leases.expired():
            if await self.leases.take(key):
                work.append(await self._adopt(key))
        if stalled:
            for run in await self.store.stalled_runs():
                work.append(await self._adopt_stalled(run))
        if self.retention is not None:
            await self.retention.sweep()
        return [w for w in work if w is not None]

    async def _adopt(self, key: str) -> Work | None:
        """Go on with the work of a lease that lapsed (its process died); we hold it now."""
        kind, _, ident = key.partition(":")
        if kind == "turn":
            return None  # a turn whose holder lapsed: ours now, and we are sweeping anyway
        if kind == "process":
            # Its streams died with it: their surfaces stop counting them, the grace period
            # starts, and the next passes re-assign their reads and send writes to the form.
            async with self.store.transaction():
                dropped = await self.store.drop_streams(ident, self.clock())
                await self.leases.release(key)
            log.info("process %s is gone: %d of its surface streams dropped", ident, dropped)
            return None
        if kind == "run":
            run = await self.store.get_run(ident)
            if run is not None and run.status is RunStatus.RUNNING:
                log.info("resuming run %s, interrupted mid-step", ident)
                await self._discard_cut_off(run)
                return Adopted(ident)
            await self.leases.release(key)
            if run is not None and run.status is RunStatus.WAITING:
                return Resumable(ident)
            return None
        call = await self.store.get_call(ident) if kind == "call" else None
        tool = await self.ledger.views.tool_of(call) if call is not None else None
        if call is None or tool is None or call.state is not CallState.DISPATCHED:
            await self.leases.release(key)
            return None
        if tool.effect == "read":
            return Dispatched(call, execute=True)
        # It may have reached its target before the process died: never send a write twice.
        settled = await self.ledger.answers.fail(
            call, ToolErrorCode.BLOCK_FAILED,
            "The server restarted while this request was in flight; a write is not "
            "retried, so check whether it took effect.",
        )  # fmt: skip
        await self.leases.release(key)
        return settled

    async def _adopt_stalled(self, run: Run) -> Work | None:
        if run.status is RunStatus.WAITING:
            return Resumable(run.id)
        key = run_key(run.id)
        if not await self.leases.take(key):
            return None
        current = await self.store.get_run(run.id)  # it may have moved since we listed it
        if current is not None and current.status is RunStatus.RUNNING:
            log.info("resuming run %s, left running without an owner", run.id)
            await self._discard_cut_off(current)
            return Adopted(run.id)
        await self.leases.release(key)
        return None

    async def _discard_cut_off(self, run: Run) -> None:
        """A step cut off mid-answer left a message started and never ended (its text was
        never stored: a message is stored when its step commits). Before the step runs
        again, tell surfaces to discard that message, then end it, so the answer is shown
        once — as the snapshot and the model's history have it.

        The discard comes first: a client that takes ``TEXT_MESSAGE_END`` as "this text is
        final" (the widget announces it and tells the host page) has already dropped the
        cut copy when the end arrives. The end still follows, because AG-UI wants every
        started message ended before the run finishes; AG-UI allows other events while a
        message is open."""
        cid = run.conversation_id
        started = await open_messages(self.store, cid)
        if not started:
            return
        async with self.journal.unit() as unit:
            for message_id in started:
                log.info("discarding message %s of run %s, cut off mid-answer", message_id, run.id)
                await unit.emit(cid, MessageDiscarded(message_id))
                await unit.emit(cid, TextMessageEnd(message_id))
