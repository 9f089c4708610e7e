"""A PostgreSQL connection whose socket the event loop keeps watching between statements.

psycopg waits for each answer by registering the socket with the loop, arming a timer,
and taking both down once it is readable (``psycopg.waiting.wait_async``): two
``epoll_ctl`` calls, a handle, a selector key and a timer per wait. A conversation waits
some 23 times for an answer, and that bookkeeping was a third of a statement's CPU in this
process (a bare ``UPDATE``: ~75 -> ~50 us). Here the socket is registered once and stays
registered; a wait is one future the reader callback resolves.

An answer that comes while no statement waits (a piped statement's, whose results are read
later) is taken into libpq's buffer at once, where the statement that reads it finds it
without waiting. So such a connection must not ``LISTEN``: psycopg's ``notifies()`` waits
for the socket before it looks in that buffer (the relay listens on a plain connection).

The registration must never outlive the socket: the loop's selector would keep a key for a
closed descriptor, and the next socket given that number (an HTTP connection, say) would
be silently left unwatched. So it is dropped before every path that closes the socket
(``close``, the server closing it, which fails the taking of input), and before psycopg
waits its own way (a wait with a timeout, and a statement interrupted mid-way, whose query
is cancelled and its answers read to the end as psycopg does); the next wait registers
again. While
registered, the loop's handle holds the connection, so it cannot be collected (and its
socket closed) unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
from typing import Any

import psycopg
from psycopg import waiting
from psycopg.abc import PQGen
from psycopg.waiting import READY_R, READY_W, WAIT_R, WAIT_W, Wait

_ACTIVE = psycopg.pq.TransactionStatus.ACTIVE
_CANCEL_SECONDS = 5.0  # psycopg's own, for a statement interrupted mid-way

_POLL_IN = select.POLLIN
_POLL_OUT = select.POLLOUT


def _ready_now(fileno: int, wait: Wait) -> int:
    """What the socket is ready for at once (a zero-timeout poll)."""
    poller = select.poll()
    poller.register(
        fileno, (_POLL_IN if wait & WAIT_R else 0) | (_POLL_OUT if wait & WAIT_W else 0)
    )
    ready = 0
    for _, events in poller.poll(0):
        ready |= (READY_R if events & _POLL_IN else 0) | (READY_W if events & _POLL_OUT else 0)
    return ready


def _resumed(gen: PQGen[Any], wait: Wait) -> PQGen[Any]:
    """``gen`` handed on mid-way: it first yields ``wait``, which ``gen`` yielded last."""
    while True:
        ready = yield wait
        try:
            wait = gen.send(ready)
        except StopIteration as stop:
            return stop.value


class WatchedConnection(psycopg.AsyncConnection[Any]):
    """``psycopg.AsyncConnection`` that waits for its answers on a kept registration."""

    _watching: asyncio.AbstractEventLoop | None = None
    _watched_fd = -1
    _waiting: asyncio.Future[None] | None = None

    async def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:
            self._unwatch()
            return await super().wait(gen, interval, timeout)
        # Before the generator starts, as psycopg's own wait: a connection already lost
        # raises here, and a generator never started has nothing left to run. Started and
        # left mid-way, it would finish when collected, and fail there, unseen (a
        # pipeline's exit sends its Sync from a ``finally``).
        fileno = self.pgconn.socket
        try:
            wait: Wait = next(gen)
        except StopIteration as done:
            return done.value
        loop = asyncio.get_running_loop()
        try:
            while True:
                if wait & WAIT_W:
                    ready = _ready_now(fileno, wait)
                    if not ready:  # a full send buffer: rare, and psycopg's way
                        self._unwatch()
                        return await super().wait(_resumed(gen, wait), interval)
                    wait = gen.send(ready)
                    continue
                self._watch(loop, fileno)
                self._waiting = answered = loop.create_future()
                try:
                    await answered
                finally:
                    self._waiting = None
                wait = gen.send(READY_R)
        except StopIteration as done:
            return done.value
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            # As psycopg does: the query cancelled on the server and its answers read to
            # the end (the generator finished, the connection usable), else closed.
            self._unwatch()
            if self.pgconn.transaction_status == _ACTIVE:
                await self._abandon(gen, wait, fileno, interval)
            raise
        except OSError as exc:
            self._unwatch()
            raise psycopg.OperationalError("connection socket closed") from exc

    async def _abandon(self, gen: PQGen[Any], wait: Wait, fileno: int, interval: float) -> None:
        try:
            with contextlib.suppress(Exception):
                await self.cancel_safe(timeout=_CANCEL_SECONDS)
            await waiting.wait_async(
                _resumed(gen, wait), fileno, interval=interval, timeout=_CANCEL_SECONDS
            )
        except psycopg.errors.QueryCanceled:
            pass
        except BaseException:  # not ended in time, or interrupted again: state unknown
            self.pgconn.finish()

    async def close(self) -> None:
        self._unwatch()
        await super().close()

    def _watch(self, loop: asyncio.AbstractEventLoop, fileno: int) -> None:
        if self._watching is loop and self._watched_fd == fileno:
            return
        self._unwatch()
        loop.add_reader(fileno, self._readable)
        self._watching, self._watched_fd = loop, fileno

    def _unwatch(self) -> None:
        loop, self._watching = self._watching, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._watched_fd)
        self._watched_fd = -1

    def _readable(self) -> None:
        waiting = self._waiting
        if waiting is None:
            # An answer nobody waits for yet (a piped statement's, or the rest of one
            # already read): taken into libpq's buffer, where the statement that reads it
            # finds it without waiting. A socket the server closed fails here: it is no
            # longer watched, and the next statement fails as it would have.
            try:
                self.pgconn.consume_input()
            except psycopg.Error:
                self._unwatch()
        elif not waiting.done():
            waiting.set_result(None)
