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
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int
    ) -> None:
        self.reader, self.writer, self.port = reader, writer, port
        self.used = time.monotonic()

    @classmethod
    async def open(cls, port: int) -> RawHttp:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer, port)

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
        idle = time.monotonic() - self.used
        if idle > KEEP_ALIVE or self.reader.at_eof() or self.writer.transport.is_closing():
            # The server closes an idle keep-alive connection (uvicorn: after 5 s); a request
            # sent as it does is lost. A new connection carries it instead, as httpx does.
            self.writer.transport.abort()
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
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
