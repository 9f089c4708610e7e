"""Turns on the event loop for the work of event streams: connecting, and replaying a backlog.

asyncio runs ready work first come, first served. A crowd of streams connecting at once
(a long conversation's readers after a restart, say) put every one's set-up (its ticket,
the conversation's read, its subscription) and then every one's replay pages in the
loop's queue together, and another user's request, arriving behind them, waited for all of
it. Here a stream's set-up and each page of its replay take a turn: one runs at a time
(``turns``), and every other request gets the rest of the loop. The turns are
first come, first served too, so a stream waiting to connect is not starved by others
replaying, nor the other way round. On PostgreSQL a turn includes the set-up's statement or
the page's read: streams take one pooled connection at a time, never a crowd of waiters for
the pool ahead of run steps (which the door would count as the database being full).

Waiting for a turn to connect costs a request and its connection, so the wait is bounded:
past ``max_waiting`` streams waiting to connect, another is refused at once with ``503
overloaded`` and ``Retry-After`` (the door's answer, hostcall/door.py), before anything is
read; the widget reconnects on its own. A stream already connected never waits on that
bound for its next page: it holds its connection either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from hostcall import metrics
from hostcall.errors import Overloaded

# One: a stream's set-up or page is ~0.4 ms of the loop, and a request waits behind as many
# of them as are admitted at once on each of its own passes through the loop (two turns
# gave the slow-readers bench's other user a p99 of 14-17 ms where one gave 9-13 ms).
TURNS = 1
STREAM_WAITERS = "stream_waiters"


class StreamGate:
    def __init__(self, *, turns: int = TURNS, max_waiting: int, retry_after: int) -> None:
        self._turns = asyncio.Semaphore(turns)
        self.max_waiting = max_waiting
        self.retry_after = retry_after
        self.waiting = 0  # streams waiting for a turn to connect

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[None]:
        """A turn for a stream's set-up; ``Overloaded`` at once if too many wait for one."""
        if self.waiting >= self.max_waiting:
            metrics.DOOR_REFUSALS.labels(STREAM_WAITERS).inc()
            raise Overloaded(STREAM_WAITERS, retry_after=self.retry_after)
        self.waiting += 1
        try:
            await self._turns.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self._turns.release()

    @asynccontextmanager
    async def page(self) -> AsyncIterator[None]:
        """A turn for one page of a replay, held through one pass of the loop after it."""
        async with self._turns:
            yield
            # Everything else that is ready runs before the next turn's work (do not drop
            # this: without it the next page may run in the same pass as this one).
            await asyncio.sleep(0)
