"""4. Slow readers: other users' latency while 200 streams never read.

A conversation with a long log (1,320 events of ~0.5 KB, written into the database before
the server starts) gets 200 stream connections that send their GET and then never read a
byte: each must replay the whole log, which fills its socket and stalls. Meanwhile another
user reads the snapshot of a small conversation again and again. Measured in one server
process, first without the stalled readers (the baseline), then while they connect and
stall, then while they are held open; p99 of the other user's requests, and server RSS.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import sqlite3
import time
from pathlib import Path

import httpx
import servers
from clients import Conv, client_for, create_conversations, expect, stream_paths
from report import Row, compare, mib, ms, print_table, summary

EVENTS = 1320
READERS = 200


def fill(db: Path, conversation_id: str, n: int) -> None:
    """Append ``n`` assistant text events to a conversation (the server is stopped)."""
    with sqlite3.connect(db) as c:
        last = c.execute(
            "SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()[0]
        rows = [
            (
                conversation_id,
                last + i + 1,
                "TEXT_MESSAGE_CONTENT",
                json.dumps(
                    {
                        "type": "TEXT_MESSAGE_CONTENT",
                        "messageId": "m_bench",
                        "delta": "lorem ipsum " * 40,
                    },
                    separators=(",", ":"),
                ),
            )
            for i in range(n)
        ]
        c.executemany(
            "INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, ?, ?)", rows
        )
        c.execute("UPDATE conversations SET last_seq = ? WHERE id = ?", (last + n, conversation_id))


async def latencies(client: httpx.AsyncClient, conv: Conv, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        expect(await client.get(f"/api/conversations/{conv.id}", headers=conv.auth), 200)
        out.append(time.perf_counter() - started)
    return out


async def stall(port: int, paths: list[str]) -> list[socket.socket]:
    """Send each GET and never read: the server's writes back up into a full socket.

    Plain sockets the loop never reads: asyncio's streams read up to their buffer's limit
    (128 KiB a connection, 25 MiB for 200) in this process, the one that times the other
    user, and counted that work as the server's."""
    loop = asyncio.get_running_loop()
    conns = []
    for path in paths:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        await loop.sock_connect(sock, (servers.HOST, port))
        await loop.sock_sendall(
            sock,
            f"GET {path} HTTP/1.1\r\nHost: {servers.HOST}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode(),
        )
        conns.append(sock)
    return conns


async def quiet(server: servers.Server, limit: float = 30.0) -> float:
    """The server's CPU seconds once it has used less than 10 ms in 200 ms (within a limit)."""
    deadline = time.monotonic() + limit
    used = server.cpu()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        now = server.cpu()
        if now - used < 0.01:
            return now
        used = now
    return used


async def stalled_readers(requests: int, workdir: Path, secret: str) -> None:
    db = workdir / "stalled.db"
    with servers.hostcall(workdir, db, secret) as hc:
        async with client_for(hc) as client:
            big, small = await create_conversations(client, 2)
    fill(db, big.id, EVENTS)
    rows: list[Row] = []
    with servers.hostcall(workdir, db, secret) as hc:
        async with client_for(hc) as other, client_for(hc) as setup:
            await latencies(other, small, 20)  # warm up
            # This process is the other user and the 200 readers: its own full collections,
            # set off by the readers' connections, took 25-58 ms and counted as the server's.
            gc.collect()
            gc.freeze()
            cpu = hc.cpu()
            alone = summary(await latencies(other, small, requests))
            cpu_alone = hc.cpu() - cpu
            rss_alone = hc.rss()
            paths = await stream_paths(setup, [big] * READERS)
            cpu = hc.cpu()
            opening = asyncio.create_task(stall(hc.port, paths))
            during = summary(await latencies(other, small, requests))
            conns = await opening
            # The readers' cost: the server's CPU until it is idle again, less the other
            # user's requests (as many as alone). A figure the machine's load moves little.
            cpu_storm = await quiet(hc) - cpu - cpu_alone
            await asyncio.sleep(2)
            held = summary(await latencies(other, small, requests))
            rss_held = hc.rss()
            hc.check_alive()
            for sock in conns:
                sock.close()
    rows.append(
        compare(
            f"other user's p99, {READERS} readers connecting and stalling",
            during["p99"],
            alone["p99"],
            ms,
            2.0,
        )
    )
    rows.append(
        compare(
            f"other user's p99, {READERS} stalled readers held open",
            held["p99"],
            alone["p99"],
            ms,
            2.0,
        )
    )
    rows.append(
        compare("other user's p50, readers connecting", during["p50"], alone["p50"], ms, None)
    )
    rows.append(
        (
            f"server CPU for the {READERS} readers, per reader",
            ms(cpu_storm / READERS),
            "-",
            "-",
            "-",
            "info",
        )
    )
    rows.append(compare("server RSS with the stalled readers", rss_held, rss_alone, mib, None))
    print_table(
        f"4. Slow readers: {READERS} never-read streams on a {EVENTS}-event conversation",
        rows,
        [
            f"floor/bare = the same server and user without the stalled readers "
            f"(baseline measured first); {requests} sequential snapshot GETs per phase"
        ],
    )
