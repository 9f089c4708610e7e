"""Leases: which process works on a run step, or on a server-side call, right now.

A lease is a row ``(key, owner, until)``. The process that starts a step (or dispatches a
server-side call) takes the lease in the same transaction, renews every lease it holds
while it works, and releases it in the transaction that ends the work. A process that dies
stops renewing; once ``until`` passes, the cluster's sweeper takes the lease over and
resumes the work (hostcall/runs/recovery.py, ``_adopt``). A starting process takes only
expired leases, so it never re-runs a step another live process is running.

The sweeper's turn (``take_turn``) is a lease too, renewed only by the sweeps that use it,
so a process that stops sweeping loses it within one lease time.

Fencing: the step's final transaction renews (or releases) its lease and fails with
``LeaseLost`` when another process took it, so a process that stalled past its lease
commits nothing; and each piece of text it streams is appended only while it holds the
lease (``Store.append_event``'s ``fence``), so it streams nothing more either.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from hostcall.errors import LeaseLost
from hostcall.store.interfaces import Leases as LeaseRows
from hostcall.store.interfaces import Runs
from hostcall.store.records import ClaimedRun, Run, RunStart

log = logging.getLogger("hostcall.leases")


def run_key(run_id: str) -> str:
    return f"run:{run_id}"


def call_key(call_id: str) -> str:
    return f"call:{call_id}"


def process_key(owner: str) -> str:
    """The lease a serving process holds for its life: the streams it serves count for
    surfaces while it lives; when it lapses, they stop counting."""
    return f"process:{owner}"


def turn_key(name: str) -> str:
    """The lease of the cluster's one turn at ``name`` (``Store.try_singleton``)."""
    return f"turn:{name}"


def new_owner() -> str:
    """Unique per process start, readable in the table: host, pid and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class _LeaseStore(LeaseRows, Runs, Protocol):
    """The lease rows, and the runs whose claim goes with a lease."""


class Leases:
    def __init__(
        self,
        store: _LeaseStore,
        *,
        ttl: float,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert ttl > 0
        self.store = store
        self.ttl = ttl
        self.owner = owner or new_owner()
        self.clock = clock

    async def take(self, key: str) -> bool:
        """Take ``key`` if it is free, expired, or already ours."""
        now = self.clock()
        return await self.store.take_lease(key, self.owner, now + self.ttl, now)

    async def take_turn(self, name: str) -> bool:
        """True while this process has the cluster's one turn at ``name`` (the sweeper's).

        Asking takes the turn, or renews it for ``ttl``; nothing else renews it (not
        ``renew``, nor the renewal thread). A holder that stops asking (killed, paused,
        its event loop stuck) loses it within ``ttl`` of its last ask, and the next process
        to ask takes it. A holder paused past that wakes up without it."""
        now = self.clock()
        return await self.store.try_singleton(name, self.owner, now + self.ttl, now)

    async def create_run_alone(self, run: Run, *, turns: int | None = None) -> RunStart:
        """``Store.create_run_alone``, with the run's lease ours."""
        until = self.clock() + self.ttl
        lease = (run_key(run.id), self.owner, until)
        return await self.store.create_run_alone(run, lease, turns=turns)

    async def claim_ready_run(self, run_id: str, *, turns: int | None = None) -> ClaimedRun | None:
        """Take the run's lease and claim it, if it waits with no open call (``Store``)."""
        now = self.clock()
        return await self.store.claim_ready_run(
            run_id, run_key(run_id), self.owner, now + self.ttl, now, turns=turns
        )

    async def keep(self, key: str) -> None:
        """Renew ``key`` inside the caller's transaction, or raise ``LeaseLost``."""
        if not await self.store.keep_lease(key, self.owner, self.clock() + self.ttl):
            raise LeaseLost(key, self.owner)

    async def end(self, key: str) -> None:
        """Release ``key`` inside the caller's transaction, or raise ``LeaseLost``."""
        if not await self.store.release_lease(key, self.owner):
            raise LeaseLost(key, self.owner)

    async def end_step(self, run_id: str, *, keep: bool = False, **changes: Any) -> None:
        """Change the run (``Store.update_run``) and release its lease, or renew it with
        ``keep``, in the caller's transaction, in one write; or raise ``LeaseLost``, with
        nothing changed."""
        key = run_key(run_id)
        until = self.clock() + self.ttl if keep else None
        if not await self.store.update_run_leased(
            run_id, (key, self.owner), until=until, **changes
        ):
            raise LeaseLost(key, self.owner)

    async def release(self, key: str) -> None:
        """Let go of ``key`` if we hold it (no error if another process took it)."""
        await self.store.release_lease(key, self.owner)

    async def expired(self) -> list[str]:
        """Other processes' lapsed leases. Ours lapse only when this process lagged; the
        work is still queued here, and adopting it again would run it twice."""
        return await self.store.expired_leases(self.clock(), other_than=self.owner)

    async def renew(self) -> int:
        return await self.store.renew_leases(self.owner, self.clock() + self.ttl)

    def renew_in_thread(self, url: str) -> Callable[[], None]:
        """Renew from a thread with its own (synchronous) PostgreSQL connection to ``url``;
        returns ``stop``.

        An event loop buried under requests runs its timers late (seconds, on a small
        machine); a thread keeps an overloaded but live process's leases, so only a dead
        process loses them. Do not move this onto the event loop or the store's pool: a
        renewal must not queue behind the work it is keeping alive.
        """
        from hostcall.store.postgres.coordination import RENEW_LEASES
        from hostcall.store.postgres.dialing import connect

        stopping = threading.Event()

        def beat() -> None:
            db = None
            try:
                while not stopping.wait(self.ttl / 3):
                    try:
                        if db is None or db.closed:
                            db = connect(url)
                        db.execute(RENEW_LEASES, (self.clock() + self.ttl, self.owner))
                    except Exception:
                        log.exception("renewing leases failed")
            finally:
                if db is not None:
                    db.close()

        thread = threading.Thread(target=beat, name="hostcall-leases", daemon=True)
        thread.start()

        def stop() -> None:
            stopping.set()
            thread.join(5)

        return stop

    async def renew_forever(self) -> None:
        # Three renewals per lifetime: one late renewal never loses a lease.
        while True:
            started = time.monotonic()
            await asyncio.sleep(self.ttl / 3)
            late = time.monotonic() - started - self.ttl / 3
            if late > self.ttl / 3:
                log.warning("lease renewal ran %.1f s late: the event loop is overloaded", late)
            try:
                await self.renew()
            except Exception:  # the database is down: retry; leases lapse if it stays down
                log.exception("renewing leases failed")
