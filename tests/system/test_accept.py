"""A crowd connecting at once is taken a few connections a pass of the event loop.

The real server (``server_config`` and ``serving.listening`` under uvicorn, in this test's
loop) with a protocol that notes the pass each connection is set up in: a ticker counts the
loop's passes. While the loop is blocked, 30 clients connect; the kernel queues them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn

from hostcall.app import create_app
from hostcall.connections import GuardedH11Protocol
from hostcall.serving import ACCEPT_BATCH, listening, server_config
from tests.support.live import settings_for

CROWD = 30
DEADLINE = 30.0  # seconds; a ceiling for a loaded machine, never a wait


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def _serving(
    tmp_path: Path, protocol: type[GuardedH11Protocol], port: int, apps_port: int | None = None
) -> AsyncIterator[uvicorn.Server]:
    """Hostcall on the sockets the process binds itself (``listening``), each connection set
    up by ``protocol``; started, and stopped at the end."""
    config = server_config(
        create_app(settings_for(tmp_path)), host="127.0.0.1", port=port, log_level="warning"
    )
    config.http = protocol
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=listening(config, apps_port)))
    deadline = time.monotonic() + DEADLINE
    try:
        while not server.started:
            assert time.monotonic() < deadline and not serving.done()
            await asyncio.sleep(0.01)
        yield server
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, DEADLINE)


async def test_a_crowd_connecting_at_once_is_set_up_one_connection_a_pass(
    tmp_path: Path,
) -> None:
    passes = 0
    made: list[int] = []

    class Noting(GuardedH11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            made.append(passes)
            super().connection_made(transport)

    port = free_port()
    loop = asyncio.get_running_loop()
    clients: list[socket.socket] = []
    async with _serving(tmp_path, Noting, port) as server:
        try:

            def tick() -> None:
                nonlocal passes
                passes += 1
                if not server.should_exit:
                    loop.call_soon(tick)

            # The loop is blocked while they connect: all wait in the kernel's queue together.
            clients += [
                socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(CROWD)
            ]
            tick()
            deadline = time.monotonic() + DEADLINE
            while len(made) < CROWD:
                assert time.monotonic() < deadline, f"{len(made)} of {CROWD} connections set up"
                await asyncio.sleep(0.01)
            # Every one was set up, a few at most in any one pass of the loop, not all thirty
            # ahead of whatever else was ready (asyncio takes as many as uvicorn's backlog,
            # 2,048).
            per_pass = Counter(made)
            assert max(per_pass.values()) <= min(ACCEPT_BATCH, 4), per_pass
        finally:
            for client in clients:
                client.close()


async def test_a_connection_accepted_writes_at_once_without_waiting_for_an_ack(
    tmp_path: Path,
) -> None:
    """The process binds its own sockets (the main port's and the apps origin's): what they
    accept must have Nagle's algorithm off, as uvicorn's own bind gives, or each small
    write of a round trip waits for the client's delayed ACK."""
    seen: list[int] = []

    class Noting(GuardedH11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            sock = transport.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            super().connection_made(transport)

    port, apps_port = free_port(), free_port()
    clients: list[socket.socket] = []
    async with _serving(tmp_path, Noting, port, apps_port):
        try:
            clients += [
                socket.create_connection(("127.0.0.1", p), timeout=5) for p in (port, apps_port)
            ]
            deadline = time.monotonic() + DEADLINE
            while len(seen) < 2:
                assert time.monotonic() < deadline, f"{len(seen)} of 2 connections set up"
                await asyncio.sleep(0.01)
            assert all(seen), seen
        finally:
            for client in clients:
                client.close()
