"""Client side of the event streams: an httpx SSE reader (httpx-sse), and raw asyncio streams.

The round trip reads with httpx (what a Python client would use). Thousands of idle or
fan-out streams use bare asyncio connections instead: one GET written by hand, the headers
read, then bytes counted — far lighter than thousands of httpx streams in one process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from clients import FRESH, Lateness
from httpx_sse import EventSource


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event type, data) per SSE event, parsed by httpx-sse; comments (pings) are skipped.

    Hostcall and the floor are read through this same parser, so their ratio stays fair.
    """
    async for event in EventSource(response).aiter_sse():
        yield event.event, event.data


class _Counter:
    """Occurrences of a marker in a byte stream fed in arbitrary chunks."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.count = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> int:
        buf = self._tail + chunk
        found = buf.count(self.marker)
        # The tail is shorter than the marker, so no occurrence is counted twice.
        self._tail = buf[-(len(self.marker) - 1) :]
        self.count += found
        return found


@dataclass
class Tally:
    """End markers seen over all streams; ``reached`` is set once ``target`` is met."""

    target: int = 0
    ends: int = 0
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def expect(self, target: int) -> None:
        self.target = target
        if self.ends >= target:
            self.reached.set()
        else:
            self.reached.clear()

    def add(self, n: int) -> None:
        self.ends += n
        if self.ends >= self.target:
            self.reached.set()


class Refused(RuntimeError):
    """The stream's GET answered another status than 200."""

    def __init__(self, path: str, status: int, head: bytes) -> None:
        super().__init__(f"GET {path} answered {head[:300]!r}")
        self.status, self.head = status, head


class RawStream:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.delivered = _Counter(b"\nevent: ")
        self.last_id = ""  # the last event's id, for ``after=`` on a reconnect

    @classmethod
    async def open(cls, host: str, port: int, path: str) -> RawStream:
        """Connect, send the GET, and return once the response headers (first bytes) arrived."""
        while True:
            connecting = time.monotonic()
            reader, writer = await asyncio.open_connection(host, port)
            if time.monotonic() - connecting <= FRESH:
                break
            # Too late to write on (clients.FRESH): the server may have closed it. Its
            # ticket is unspent (nothing was sent), so a new connection takes it.
            Lateness.reopened += 1
            writer.transport.abort()
        try:
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Accept: text/event-stream\r\n\r\n".encode()
            )
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            if (status := int(head.split(b" ", 2)[1])) != 200:
                raise Refused(path, status, head)
        except BaseException:
            writer.transport.abort()
            raise
        return cls(reader, writer)

    async def events(self) -> AsyncIterator[tuple[str, str]]:
        """(event type, data) per SSE event, read from the chunked body; pings skipped.

        Frames end with a blank line in sse-starlette's default CRLF framing (both servers).
        """
        buffer = b""
        while size := int((await self.reader.readline()).split(b";")[0], 16):
            buffer += (await self.reader.readexactly(size + 2))[:-2]
            *frames, buffer = buffer.split(b"\r\n\r\n")
            for frame in frames:
                kind, data = "message", []
                for line in frame.decode().split("\r\n"):
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "event":
                        kind = value
                    elif name == "id":
                        self.last_id = value
                    elif name == "data":
                        data.append(value)
                if data:
                    yield kind, "\n".join(data)

    async def pump(self, end_marker: bytes, tally: Tally) -> None:
        """Count events and end markers until the server closes the stream."""
        ends = _Counter(end_marker)
        while chunk := await self.reader.read(65536):
            self.delivered.feed(chunk)
            if found := ends.feed(chunk):
                tally.add(found)

    def close(self) -> None:
        self.writer.transport.abort()


async def open_many(
    host: str, port: int, paths: list[str], concurrency: int = 200
) -> list[RawStream]:
    """Open one stream per path, at most ``concurrency`` connecting at a time; all or none."""
    gate = asyncio.Semaphore(concurrency)

    async def one(path: str) -> RawStream:
        async with gate:
            return await RawStream.open(host, port, path)

    results = await asyncio.gather(*(one(p) for p in paths), return_exceptions=True)
    opened = [r for r in results if isinstance(r, RawStream)]
    failures = [r for r in results if not isinstance(r, RawStream)]
    if failures:
        close_all(opened)
        raise RuntimeError(
            f"{len(failures)} of {len(paths)} streams failed to open: {failures[0]!r}"
        )
    return opened


def close_all(streams: list[RawStream]) -> None:
    for stream in streams:
        stream.close()
