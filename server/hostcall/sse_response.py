"""The conversation stream's HTTP response: SSE bytes, already framed, written as they come.

sse-starlette's ``EventSourceResponse`` runs each response in an anyio task group of four
tasks (the body, pings, the client's disconnect, the server's shutdown): ~170 objects a
stream that the garbage collector walks on every full collection, half of what an open
stream holds, and four tasks to start in a stream's set-up. Here one task, the request's
own, writes the body, and one more waits for the client to leave. The body (the stream's
generator, hostcall/stream.py) sends its own pings while idle. On the client's disconnect
and on the server's shutdown the body is not written on past its next piece, and ``wake``
makes a body waiting for its next event return (a ``None`` in its queue): the response
ends properly (on shutdown, with its last chunk) instead of being cancelled mid-body.

A write the client does not take within ``send_timeout`` seconds raises ``SlowReader``: the
server closes the connection and the client reconnects with ``Last-Event-ID``.

While the body waits for its next piece, another task may write one itself (``write_now``):
a publisher, with a live event, instead of waking the body's task to write it on a later pass
of the event loop. The publisher is never held by the client: what the transport cannot take
at once is finished by a task of the response's, under the same ``send_timeout``, and the
response writes nothing else before it.
"""

from __future__ import annotations

import asyncio
import types
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping

from sse_starlette.sse import AppStatus
from starlette.types import Receive, Scope, Send

from hostcall.stepped import resumed

SHUTDOWN_POLL = 0.5  # seconds between looks at whether the server is stopping


class SlowReader(TimeoutError):
    """The client took no write for the response's ``send_timeout``."""


class _Open:
    """The wakes of a loop's open responses, and one task that calls them all once the
    server is stopping (uvicorn's ``handle_exit``, which sse-starlette marks on
    ``AppStatus.should_exit``)."""

    def __init__(self) -> None:
        self.wakes: set[Callable[[], None]] = set()
        self.watcher: asyncio.Task[None] | None = None

    def add(self, wake: Callable[[], None]) -> None:
        if AppStatus.should_exit:
            wake()
            return
        self.wakes.add(wake)
        if self.watcher is None or self.watcher.done():
            self.watcher = asyncio.get_running_loop().create_task(self.watch())

    async def watch(self) -> None:
        while self.wakes and not AppStatus.should_exit:
            await asyncio.sleep(SHUTDOWN_POLL)
        for wake in list(self.wakes):
            wake()


_open: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Open] = weakref.WeakKeyDictionary()


def _opened() -> _Open:
    loop = asyncio.get_running_loop()
    if (found := _open.get(loop)) is None:
        found = _open[loop] = _Open()
    return found


class EventStreamResponse:
    def __init__(
        self,
        body: AsyncGenerator[bytes, None],
        *,
        wake: Callable[[], None],
        headers: Mapping[str, str],
        send_timeout: float,
    ) -> None:
        self.body = body
        self.wake = wake
        self.send_timeout = send_timeout
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"connection", b"keep-alive"),
            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()),
        ]
        self.ended = False  # the client left, or the server is stopping
        self._send: Send | None = None  # while the body may be written
        # The rest of a write made by ``write_now`` that the transport could not take at once.
        self._writing: asyncio.Future[None] | None = None

    def write_now(self, chunk: bytes) -> bool:
        """Write ``chunk`` from another task (a publisher's) while the body waits for its next
        piece, which the caller makes sure of (hostcall/stream.py); False if the response
        cannot take it now (not begun or ended, or a write of its own not finished): the
        caller gives it to the body instead.

        The caller is not held: the write goes as far as it can without waiting (uvicorn's
        ``send`` waits only while the transport's buffer is over its high-water mark), and
        what is left of it is finished by a task under ``send_timeout``. A failed write is
        raised by the response's own task, which it wakes, never by the caller."""
        send = self._send
        if send is None or self.ended or self._writing is not None:
            return False
        step = send({"type": "http.response.body", "body": chunk, "more_body": True})
        rest: Awaitable[None] = step
        if type(step) is types.CoroutineType:
            try:
                pending = step.send(None)
            except StopIteration:
                return True
            except Exception as error:
                failed = self._writing = asyncio.get_running_loop().create_future()
                failed.set_exception(error)
                failed.add_done_callback(self._written)
                return True
            rest = resumed(step, pending)
        writing = self._writing = asyncio.get_running_loop().create_task(self._within(rest))
        writing.add_done_callback(self._written)
        return True

    def _written(self, writing: asyncio.Future[None]) -> None:
        if writing.cancelled() or writing.exception() is not None:
            self.wake()  # the body returns, and the response raises what the write did
        elif self._writing is writing:
            self._writing = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = False

        def end() -> None:
            self.ended = True
            self.wake()

        async def left() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            end()

        watching = asyncio.get_running_loop().create_task(left())
        opened = _opened()
        opened.add(end)
        self._send = send
        try:
            async for chunk in self.body:
                if self._writing is not None:
                    await self._finished()
                if self.ended:  # mid-replay, say: the rest is not written
                    break
                await self._within(
                    send({"type": "http.response.body", "body": chunk, "more_body": True})
                )
            if self._writing is not None:
                await self._finished()
            if not gone:
                await self._within(
                    send({"type": "http.response.body", "body": b"", "more_body": False})
                )
        finally:
            self._send = None
            if self._writing is not None:
                self._writing.cancel()
            opened.wakes.discard(end)
            watching.cancel()
            await self.body.aclose()

    async def _finished(self) -> None:
        """Wait for the rest of a write made by ``write_now`` (raising what it raised)."""
        writing = self._writing
        self._writing = None
        if writing is not None:
            await writing

    async def _within(self, sending: Awaitable[None]) -> None:
        try:
            async with asyncio.timeout(self.send_timeout):
                await sending
        except TimeoutError:
            raise SlowReader(f"no write taken in {self.send_timeout:g} s") from None
