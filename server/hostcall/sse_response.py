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
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping

from sse_starlette.sse import AppStatus
from starlette.types import Message, Receive, Scope, Send

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = ended = False

        def end() -> None:
            nonlocal ended
            ended = True
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
        try:
            async for chunk in self.body:
                if ended:  # mid-replay, say: the rest is not written
                    break
                await self._send(
                    {"type": "http.response.body", "body": chunk, "more_body": True}, send
                )
            if not gone:
                await self._send(
                    {"type": "http.response.body", "body": b"", "more_body": False}, send
                )
        finally:
            opened.wakes.discard(end)
            watching.cancel()
            await self.body.aclose()

    async def _send(self, message: Message, send: Send) -> None:
        try:
            async with asyncio.timeout(self.send_timeout):
                await send(message)
        except TimeoutError:
            raise SlowReader(f"no write taken in {self.send_timeout:g} s") from None
