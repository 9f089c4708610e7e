"""Loopback servers for tests: a recording HTTP target and a TCP trap that counts connections."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from hostcall.qa.servers import serve_in_thread

HUGE_CHUNK = b"x" * 256 * 1024
HUGE_CHUNKS = 64  # 16 MiB, paced so that reading all of it takes over a second
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]


@dataclass
class Seen:
    method: str
    raw_path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    hits: Counter[str] = field(default_factory=Counter)
    requests: list[Seen] = field(default_factory=list)
    huge_sent: int = 0
    huge_finished: bool = False

    def clear(self) -> None:
        self.hits.clear()
        self.requests.clear()
        self.huge_sent, self.huge_finished = 0, False

    @property
    def last(self) -> Seen:
        return self.requests[-1]


def recording_app(rec: Recorder) -> ASGIApp:
    async def record(request: Request) -> Seen:
        seen = Seen(
            method=request.method,
            raw_path=request.scope["raw_path"].decode("ascii"),
            query=request.scope["query_string"].decode("ascii"),
            headers=dict(request.headers),
            body=await request.body(),
        )
        rec.hits[request.url.path.split("/")[1]] += 1
        rec.requests.append(seen)
        return seen

    async def echo(request: Request) -> Response:
        seen = await record(request)
        return JSONResponse(
            {
                "method": seen.method,
                "path": seen.raw_path,
                "headers": seen.headers,
                "body": seen.body.decode(),
            }
        )

    async def redirect(request: Request) -> Response:
        await record(request)
        status = int(request.query_params.get("status", "302"))
        return RedirectResponse(request.query_params["to"], status_code=status)

    async def loop(request: Request) -> Response:
        await record(request)
        return RedirectResponse("/loop", status_code=302)

    async def slow(request: Request) -> Response:
        await record(request)
        for _ in range(100):  # 5 s unless the client goes away
            await asyncio.sleep(0.05)
            if await request.is_disconnected():
                break
        return PlainTextResponse("late")

    async def huge(request: Request) -> Response:
        await record(request)

        async def chunks() -> Any:
            for _ in range(HUGE_CHUNKS):
                rec.huge_sent += len(HUGE_CHUNK)
                yield HUGE_CHUNK
                await asyncio.sleep(0.02)
            rec.huge_finished = True

        return StreamingResponse(chunks(), media_type="application/octet-stream")

    async def status(request: Request) -> Response:
        seen = await record(request)
        code = int(request.path_params["code"])
        if "split" in request.query_params:  # the credential cut across two chunks
            at, echoed = int(request.query_params["split"]), seen.headers["authorization"]

            async def chunks() -> Any:
                yield " " * 1100 + echoed[:at]
                await asyncio.sleep(0.05)
                yield echoed[at:]

            return StreamingResponse(chunks(), status_code=code, media_type="text/plain")
        return PlainTextResponse(f"target says no; you sent {seen.headers}", status_code=code)

    methods = ALL_METHODS
    app = Starlette(
        routes=[
            Route("/echo", echo, methods=methods),
            Route("/redirect", redirect, methods=methods),
            Route("/loop", loop, methods=methods),
            Route("/slow", slow),
            Route("/huge", huge),
            Route("/status/{code:int}", status),
        ]
    )

    async def by_raw_path(scope: Scope, receive: Receive, send: Send) -> None:
        # Route /echo/* on the raw path: a decoded path may hold "\r\n", which no route matches.
        if scope["type"] == "http" and scope["raw_path"].startswith(b"/echo/"):
            scope = {**scope, "path": "/echo"}
        await app(scope, receive, send)

    return by_raw_path


@dataclass
class Live:
    rec: Recorder
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextmanager
def live_server() -> Iterator[Live]:
    """A recording app on loopback."""
    rec = Recorder()
    with serve_in_thread(recording_app(rec)) as port:
        yield Live(rec, port)


class Trap:
    """A loopback port that counts every TCP connection made to it (and would answer 200)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
