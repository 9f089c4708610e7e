"""Recovery: the cluster's periodic chores, run by one process at a time (the sweeper's
turn, ``Store.try_singleton``): expire calls past their deadline, move calls whose surface
is gone, adopt the work of processes whose leases lapsed (they died), and resume runs a
crash left between two transactions. The same code recovers a single process at start.
"""

from __future__ import annotations

import asyncio
import logging
import time

from hostcall.errors import ToolErrorCode
from hostcall.leases import process_key, run_key
from hostcall.protocol.events import (
    MessageDiscarded,
    TextMessageEnd,
)
from hostcall.runs.base import SWEEPER
from hostcall.runs.server_calls import ServerCalls
from hostcall.runs.stepping import Stepping
from hostcall.store.records import CallState, Run, RunStatus
from hostcall.transcript import open_messages

log = logging.getLogger("hostcall.engine")


class Recovery(Stepping, ServerCalls):
    async def recover(self) -> None:
        """Pick up what a previous process left (called once at start)."""
        # Every stream this store counted belonged to a process that is gone; their pages
        # reconnect within the grace period, or their calls move on.
        await self.store.reset_surfaces(self.clock())
        # Our streams count while this lease lives; the sweeper of a cluster drops them
        # once it lapses (the process died), and the grace period starts.
        async with self.store.transaction():
            await self.leases.take(process_key(self.leases.owner))
        await self.sweep(stalled=True)

    async def retire(self) -> None:
        """A clean shutdown: our streams stop counting now, not when our lease lapses."""
        async with self.store.transaction():
            await self.store.drop_streams(self.leases.owner, self.clock())
            await self.leases.release(process_key(self.leases.owner))

    async def sweep(self, *, stalled: bool = False) -> None:
        """The cluster's periodic chores; a no-op unless this process has the sweeper's turn."""
        if not await self.store.try_singleton(SWEEPER):
            return
        await self.ledger.expire_due()
        await self.ledger.rehome_due()
        for key in await self.leases.expired():
            if await self.leases.take(key):
                await self._adopt(key)
        if stalled:
            for run in await self.store.stalled_runs():
                await self._adopt_stalled(run)

    async def _adopt(self, key: str) -> None:
        """Go on with the work of a lease that lapsed (its process died); we hold it now."""
        kind, _, ident = key.partition(":")
        if kind == "process":
            # Its streams died with it: their surfaces stop counting them, the grace period
            # starts, and the next passes re-assign their reads and send writes to the form.
            async with self.store.transaction():
                dropped = await self.store.drop_streams(ident, self.clock())
                await self.leases.release(key)
            log.info("process %s is gone: %d of its surface streams dropped", ident, dropped)
            return
        if kind == "run":
            run = await self.store.get_run(ident)
            if run is not None and run.status is RunStatus.RUNNING:
                log.info("resuming run %s, interrupted mid-step", ident)
                await self._discard_cut_off(run)
                self._spawn(self._advance(ident))
                return
            await self.leases.release(key)
            if run is not None and run.status is RunStatus.WAITING:
                await self._resume_if_ready(ident)
            return
        call = await self.store.get_call(ident) if kind == "call" else None
        tool = await self.ledger.tool_of(call) if call is not None else None
        if call is None or tool is None or call.state is not CallState.DISPATCHED:
            await self.leases.release(key)
            return
        if tool.effect == "read":
            self._spawn(self._run_server_call(call.id))
            return
        # It may have reached its target before the process died: never send a write twice.
        await self.ledger.fail(
            call, ToolErrorCode.BLOCK_FAILED,
            "The server restarted while this request was in flight; a write is not "
            "retried, so check whether it took effect.",
        )  # fmt: skip
        await self.leases.release(key)

    async def _adopt_stalled(self, run: Run) -> None:
        if run.status is RunStatus.WAITING:
            await self._resume_if_ready(run.id)
            return
        key = run_key(run.id)
        if not await self.leases.take(key):
            return
        current = await self.store.get_run(run.id)  # it may have moved since we listed it
        if current is not None and current.status is RunStatus.RUNNING:
            log.info("resuming run %s, left running without an owner", run.id)
            await self._discard_cut_off(current)
            self._spawn(self._advance(run.id))
        else:
            await self.leases.release(key)

    async def _discard_cut_off(self, run: Run) -> None:
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
        started = await open_messages(self.store, cid)
        if not started:
            return
        async with self.journal.unit() as unit:
            for message_id in started:
                log.info("discarding message %s of run %s, cut off mid-answer", message_id, run.id)
                await unit.emit(cid, MessageDiscarded(message_id))
                await unit.emit(cid, TextMessageEnd(message_id))

    async def sweep_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            # Stalled runs need a scan of open runs: look for them once per lease period.
            stalled = now - self._stalled_checked >= self.leases.ttl
            if stalled:
                self._stalled_checked = now
            try:
                await self.sweep(stalled=stalled)
            except Exception:  # a bad row must not stop expiry for every other call
                log.exception("sweep failed")
