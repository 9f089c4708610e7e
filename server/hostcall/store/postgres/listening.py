"""A LISTEN connection's notifications, read where its socket becomes readable.

psycopg's ``notifies()`` waits for each packet its own way: it registers the socket with the
event loop, arms a timer, takes both down once the packet is in, and hands each notification
to the task as a ``Notify``. Every process listens to every append of the cluster, its own
included (about fifteen a conversation), and that wait was a twentieth of a PostgreSQL
process's CPU. Here the socket stays registered while the connection listens; the reader
callback takes the input in, keeps the payloads ``wanted`` says the task needs (a process's
own appends are not), and wakes the task only when there is one: a packet with nothing
wanted costs no task step.

The registration never outlives the socket: it is dropped when reading fails (the server
closed the connection) and when the reading ends, before the connection is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

import psycopg


class Listening:
    """Notifications of ``connection`` (autocommit, already LISTENing), batch by batch."""

    def __init__(
        self, connection: psycopg.AsyncConnection[Any], wanted: Callable[[str], bool]
    ) -> None:
        self._pgconn = connection.pgconn
        self._fd = -1  # the socket while registered; libpq closes it when reading fails
        self._encoding = connection.info.encoding
        self._wanted = wanted
        self._ready: list[str] = []
        self._failed: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def batches(self) -> AsyncGenerator[list[str], None]:
        """The wanted payloads, in the order the server sent them, a list per wake-up;
        raises ``psycopg.OperationalError`` once the connection is lost."""
        loop = asyncio.get_running_loop()
        self._fd = self._pgconn.socket
        loop.add_reader(self._fd, self._readable)
        try:
            self._take()  # what came with the LISTEN's answer, already in libpq's buffer
            while True:
                if not self._ready and self._failed is None:
                    self._waiter = loop.create_future()
                    try:
                        await self._waiter
                    finally:
                        self._waiter = None
                if self._ready:
                    batch, self._ready = self._ready, []
                    yield batch
                elif self._failed is not None:
                    raise self._failed
        finally:
            self._unwatch()

    def _unwatch(self) -> None:
        """Once: by then the number may be another socket's, whose reader must stay."""
        if self._fd >= 0:
            asyncio.get_running_loop().remove_reader(self._fd)
            self._fd = -1

    def _readable(self) -> None:
        try:
            self._pgconn.consume_input()
        except psycopg.OperationalError as exc:
            # libpq has closed the socket: unregistered in this same callback, before any
            # other socket can be given its number.
            self._failed = exc
            self._unwatch()
        else:
            self._take()
        if (self._ready or self._failed) and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _take(self) -> None:
        while (note := self._pgconn.notifies()) is not None:
            payload = note.extra.decode(self._encoding)
            if self._wanted(payload):
                self._ready.append(payload)
