"""Lending the PostgreSQL store's pooled connections, one statement or transaction at a time.

A ``Lender`` keeps a ``psycopg_pool.AsyncConnectionPool`` of at most ``pool_max``
connections, and a queue of its own in front of it. While every connection is lent, a
statement waits in that queue, and the next connection given back unbroken and idle goes
straight to the first in it, never through the pool. The pool's own queue cost each waiter
a task (``asyncio.wait_for`` of a condition), the condition, and the pool's lock at both
ends; under a crowd (the load bench: 200 conversations at once on 5 connections) most
statements wait, and that was ~5% of the process's CPU, over a futures and a timer here.
The pool still opens, checks, replaces and expires connections: one given back broken, in a
transaction, or lent on without going back for ``HANDOFF_SECONDS``, goes back to it, and the
first waiter then takes one from it instead.

A wait for a connection past the pool's wait (``pool_wait``) is no failure while the
database is there (a starved CPU holds connections longer): the waiter asks whether
PostgreSQL takes a connection at all (``_reachable``) and waits on; only an outage fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from hostcall import metrics
from hostcall.errors import StoreError

log = logging.getLogger(__name__)

Connection = psycopg.AsyncConnection[dict[str, Any]]
# How long a connection may be handed from statement to statement without going back to
# the pool: the pool's care of it (its lifetime, a drain) waits no longer than this.
HANDOFF_SECONDS = 60.0
# How long the answer of a reachability check (``_reachable``) stands for the waiters that
# ask after it: one connection attempt a second at most, however many wait.
PROBE_SECONDS = 1.0
_IDLE = psycopg.pq.TransactionStatus.IDLE


class Lender:
    """The pool and its queue. ``lend`` a connection; ``give_back`` every one lent."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Connection],
        *,
        pool_max: int,
        target: str,
        probe: Callable[[], Awaitable[bool]],
    ) -> None:
        self._pool = pool
        self._max = pool_max
        self._target = target  # the database, for messages (no password)
        self._probe_once = probe
        self._opening: asyncio.Lock | None = None
        self.opened = False
        # Connections lent, and lenders inside the pool's getconn: each holds a place of
        # the ``pool_max``. A waiter handed over a connection or a place takes the giver's.
        self._places = 0
        self._queue: deque[asyncio.Future[Connection | None]] = deque()
        # When each connection lent came out of the pool (loop time).
        self._out_since: dict[Connection, float] = {}
        # Statements waiting for a connection now (the metric sums workers).
        self.waiters = 0
        # Connections handed over to a waiter cancelled meanwhile, on their way back.
        self._returning: set[asyncio.Task[None]] = set()
        # When a connection last came back unbroken (loop time): PostgreSQL answered then.
        # And the last reachability check: its answer, and when it began.
        self._returned_at = float("-inf")
        self._probe: asyncio.Future[bool] | None = None
        self._probed_at = float("-inf")

    async def open(self) -> None:
        if self.opened:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if not self.opened:
                try:
                    await self._pool.open(wait=True, timeout=10)
                except Exception as exc:
                    raise StoreError(
                        f"cannot connect to PostgreSQL ({self._target}): {exc}",
                        target=self._target,
                    ) from None
                self.opened = True

    async def close(self) -> None:
        if self.opened:
            self.opened = False
            await self._pool.close()
        # As the pool fails its own waiters: nothing will be handed over any more.
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_exception(PoolClosed("the pool is closed"))

    async def lend(self) -> Connection:
        """A connection, for ``give_back``: handed over by a statement before, or from the
        pool (which rolls back, or replaces, one left in a transaction or broken)."""
        if not self.opened:
            await self.open()
        loop = asyncio.get_running_loop()
        started = waiting = loop.time()
        metrics.DB_WAITERS_NOW.value += 1
        self.waiters += 1
        placed = False
        try:
            while True:
                try:
                    if not placed and (self._places >= self._max or self._queue):
                        handed = await self._wait_in_queue(loop, waiting)
                        placed = True
                        if handed is not None:
                            connection = handed
                            break
                    elif not placed:
                        self._places += 1
                        placed = True
                    # The pool's wait counts from this wait's start, queue and all.
                    left = waiting + self._pool.timeout - loop.time()
                    if left <= 0:
                        raise PoolTimeout()
                    connection = await self._pool.getconn(left)
                    self._out_since[connection] = loop.time()
                    break
                except PoolTimeout:
                    # Do not "fix" this into failing at once: a pool with every connection
                    # busy (a starved CPU, a burst) is not the database failing, and a run
                    # step failed here cost the visitor a message. Only an outage fails.
                    if self._returned_at < waiting and not await self._reachable():
                        metrics.DB_POOL_WAITS.labels(metrics.POOL_OUTAGE).inc()
                        raise
                    metrics.DB_POOL_WAITS.labels(metrics.POOL_BUSY).inc()
                    waiting = loop.time()
                    log.warning("waited %.1f s for a PostgreSQL connection: the pool is "
                                "busy; waiting on", waiting - started)  # fmt: skip
        except BaseException:
            if placed:
                self._pass_place()
            raise
        finally:
            metrics.DB_WAITERS_NOW.value -= 1
            self.waiters -= 1
        metrics.DB_IN_USE_NOW.value += 1
        return connection

    async def give_back(self, connection: Connection) -> None:
        metrics.DB_IN_USE_NOW.value -= 1
        loop = asyncio.get_running_loop()
        if not connection.broken:
            self._returned_at = loop.time()
        # The first waiter is taken from the queue only if it is handed this connection:
        # otherwise ``_pass_place`` below gives it the place, and it takes one from the pool
        # (taken here and then left, it would wait out ``pool_wait`` for nothing).
        if (
            not connection.broken
            and connection.info.transaction_status == _IDLE
            and loop.time() - self._out_since.get(connection, 0.0) < HANDOFF_SECONDS
            and (waiter := self._next_waiter()) is not None
        ):
            waiter.set_result(connection)  # its place and all
            return
        self._out_since.pop(connection, None)
        try:
            await self._pool.putconn(connection)
        finally:
            self._pass_place()

    def _next_waiter(self) -> asyncio.Future[Connection | None] | None:
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                return waiter
        return None

    def _pass_place(self) -> None:
        """A place freed: the first waiter takes it (and a connection from the pool)."""
        waiter = self._next_waiter()
        if waiter is None:
            self._places -= 1
        else:
            waiter.set_result(None)

    async def _wait_in_queue(
        self, loop: asyncio.AbstractEventLoop, since: float
    ) -> Connection | None:
        """Wait for a connection handed over (or None: a place, to take one from the pool);
        ``PoolTimeout`` once ``pool_wait`` has passed since ``since``."""
        waiter: asyncio.Future[Connection | None] = loop.create_future()
        self._queue.append(waiter)
        timer = loop.call_at(since + self._pool.timeout, _expire, waiter)
        try:
            return await waiter
        except BaseException:
            with contextlib.suppress(ValueError):
                self._queue.remove(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed over just as this was cancelled: pass it on.
                handed = waiter.result()
                if handed is None:
                    self._pass_place()
                else:  # lent to this waiter, place and all: given back for it
                    metrics.DB_IN_USE_NOW.value += 1
                    task = loop.create_task(self.give_back(handed))
                    self._returning.add(task)
                    task.add_done_callback(self._returning.discard)
            raise
        finally:
            timer.cancel()

    async def _reachable(self) -> bool:
        """Whether PostgreSQL takes a connection now: asked once for every waiter whose
        wait ran out with none coming back meanwhile (all held that long, or the database
        gone). A refused or failed connection (as the pool meets in an outage) is an
        outage; one that opens says the pool is only busy."""
        now = asyncio.get_running_loop().time()
        if self._probe is None or (self._probe.done() and now - self._probed_at > PROBE_SECONDS):
            self._probed_at = now
            self._probe = asyncio.ensure_future(self._probe_once())
        return await asyncio.shield(self._probe)


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(PoolTimeout())
