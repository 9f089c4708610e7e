"""HTTP clients the bench drives the servers with: httpx, and a raw keep-alive connection."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx
from servers import HOST, Server

TIMEOUT = 10.0
# Reconnect rather than reuse a connection idle this long: the servers close theirs at 5 s.
KEEP_ALIVE = 4.0
# Write on a new connection within this long of starting to connect, else on another: the
# servers close one that has sent nothing 10 s after they accepted it (hostcall/connections.py,
# its header deadline; the accept comes after the connect began). A request written into a
# connection the server has just closed is lost with no response (0 bytes read), and a load
# generator starved of CPU can take that long between its connect and its write; a browser,
# whose network stack is not behind a busy page's loop, does not.
FRESH = 8.0


class Lateness:
    """Connections this process opened and then came to write on too late (past ``FRESH``),
    and so replaced before writing: the load generator's own slowness, reported beside what
    it measured."""

    reopened = 0


_CONTENT_LENGTH = re.compile(rb"(?i)\r\ncontent-length:[ \t]*(\d+)")


def expect(response: httpx.Response, status: int) -> None:
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.method} {response.request.url} answered "
            f"{response.status_code}: {response.text[:300]}"
        )


def client_for(server: Server) -> httpx.AsyncClient:
    # One persistent client per server: POSTs reuse a keep-alive connection.
    return httpx.AsyncClient(
        base_url=server.url,
        timeout=TIMEOUT,
        trust_env=False,
        headers={"Origin": server.url},
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
    )


@dataclass(frozen=True)
class Conv:
    id: str
    session: str
    stream: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.session}"}

    @property
    def events_path(self) -> str:
        return f"/api/conversations/{self.id}/events?token={self.stream}"


async def create_conversations(
    client: httpx.AsyncClient, n: int, concurrency: int = 16
) -> list[Conv]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> Conv:
        async with gate:
            r = await client.post("/api/agents/bench/conversations")
        expect(r, 201)
        body = r.json()
        return Conv(body["conversationId"], body["sessionToken"], body["streamToken"])

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def stream_paths(
    client: httpx.AsyncClient, convs: list[Conv], concurrency: int = 16
) -> list[str]:
    """An events path per conversation (repeats allowed), each with a fresh stream ticket:
    a ticket opens one stream, once."""
    gate = asyncio.Semaphore(concurrency)

    async def one(conv: Conv) -> str:
        async with gate:
            r = await client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
        expect(r, 200)
        return f"/api/conversations/{conv.id}/events?token={r.json()['streamToken']}"

    return list(await asyncio.gather(*(one(c) for c in convs)))


class RawHttp:
    """One keep-alive HTTP/1.1 connection, one request at a time: the least a client costs."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        port: int,
        connecting: float | None = None,
    ) -> None:
        self.reader, self.writer, self.port = reader, writer, port
        # From when it began connecting: the server's deadlines start later, at its accept.
        self.used = time.monotonic() if connecting is None else connecting
        self.fresh = True  # nothing written on it yet

    @classmethod
    async def open(cls, port: int) -> RawHttp:
        connecting = time.monotonic()
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer, port, connecting)

    async def post(
        self,
        path: str,
        body: dict[str, Any],
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> bytes:
        got, head, answer = await self.request(path, body, headers)
        if got != status:
            raise RuntimeError(f"POST {path} answered {head[:40]!r}: {answer[:300]!r}")
        return answer

    async def request(
        self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, bytes]:
        """POST ``body``; the status, the response's head and its body, whatever the status."""
        while (
            time.monotonic() - self.used > (FRESH if self.fresh else KEEP_ALIVE)
            or self.reader.at_eof()
            or self.writer.transport.is_closing()
        ):
            # The server may have closed it (FRESH, KEEP_ALIVE say when); a request sent as it does
            # is lost. A new connection carries it instead, as httpx does; checked again, for
            # a generator so starved that the new one is late too.
            Lateness.reopened += self.fresh
            self.writer.transport.abort()
            connecting = time.monotonic()
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
            self.used, self.fresh = connecting, True
        self.fresh = False
        payload = json.dumps(body, separators=(",", ":")).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}"
            f"\r\n\r\n".encode()
            + payload
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = _CONTENT_LENGTH.search(head)
        if length is None:
            raise RuntimeError(f"POST {path}: no Content-Length in {head[:300]!r}")
        answer = await self.reader.readexactly(int(length.group(1)))
        self.used = time.monotonic()
        return int(head.split(b" ", 2)[1]), head, answer

    def close(self) -> None:
        self.writer.transport.abort()
