"""4. Slow readers: other users' latency while 200 streams never read.

A conversation with a long log (1,320 events of ~0.5 KB, written into the database before
the server starts) gets 200 stream connections that send their GET and then never read a
byte: each must replay the whole log, which fills its socket and stalls. Meanwhile another
user reads the snapshot of a small conversation again and again. Measured in one server
process, in rounds: without the stalled readers (the baseline), then while they connect and
stall, then while they are held open, then they are closed; p99 of the other user's
requests over all rounds, and the first round's alone (the former method); server RSS.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import sqlite3
import statistics
import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Round:
    """The other user's request times in each phase of one round; the server's figures."""

    alone: list[float]
    during: list[float]
    held: list[float]
    cpu_storm: float
    rss_alone: int
    rss_held: int


async def storm(
    hc: servers.Server,
    other: httpx.AsyncClient,
    setup: httpx.AsyncClient,
    small: Conv,
    big: Conv,
    requests: int,
) -> Round:
    """One round: the other user alone, then while the readers connect, then while they are
    held; the readers are closed and the server idle again at the end."""
    cpu = hc.cpu()
    alone = await latencies(other, small, requests)
    cpu_alone = hc.cpu() - cpu
    rss_alone = hc.rss()
    paths = await stream_paths(setup, [big] * READERS)
    cpu = hc.cpu()
    opening = asyncio.create_task(stall(hc.port, paths))
    during = await latencies(other, small, requests)
    conns = await opening
    # The readers' cost: the server's CPU until it is idle again, less the other
    # user's requests (as many as alone). A figure the machine's load moves little.
    cpu_storm = await quiet(hc) - cpu - cpu_alone
    await asyncio.sleep(2)
    held = await latencies(other, small, requests)
    rss_held = hc.rss()
    hc.check_alive()
    for sock in conns:
        sock.close()
    await quiet(hc)
    return Round(alone, during, held, cpu_storm, rss_alone, rss_held)


def phase(rounds: list[Round], name: str, only: int | None = None) -> dict[str, float]:
    """p50/p99 of one phase over every round, or over round ``only``."""
    picked = rounds if only is None else rounds[only : only + 1]
    return summary([v for r in picked for v in getattr(r, name)])


async def stalled_readers(requests: int, rounds: int, workdir: Path, secret: str) -> None:
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
            # Alone and with the readers in turn, several times: on a shared machine one
            # "alone" p99 of a few hundred requests swung 3-45 ms with the others' work, and
            # the ratio with it; each round's phases see the same minutes.
            results = [await storm(hc, other, setup, small, big, requests) for _ in range(rounds)]
    alone, during, held = (phase(results, name) for name in ("alone", "during", "held"))
    n = requests * rounds
    rows.append(
        compare(
            f"other user's p99, {READERS} readers connecting and stalling ({n} requests)",
            during["p99"],
            alone["p99"],
            ms,
            2.0,
        )
    )
    rows.append(
        compare(
            f"  the same, first round only ({requests}, the former method)",
            phase(results, "during", 0)["p99"],
            phase(results, "alone", 0)["p99"],
            ms,
            2.0,
        )
    )
    for i in range(rounds):
        rows.append(
            compare(
                f"  round {i + 1}",
                phase(results, "during", i)["p99"],
                phase(results, "alone", i)["p99"],
                ms,
                None,
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
    cpu = statistics.fmean(r.cpu_storm for r in results)
    rows.append(
        (
            f"server CPU for the {READERS} readers, per reader (mean of rounds)",
            ms(cpu / READERS),
            "-",
            "-",
            "-",
            "info",
        )
    )
    rows.append(
        compare(
            "server RSS with the stalled readers (first round)",
            results[0].rss_held,
            results[0].rss_alone,
            mib,
            None,
        )
    )
    rows.append(
        compare(
            f"server RSS with the readers, round {rounds} against round 1",
            results[-1].rss_held,
            results[0].rss_held,
            mib,
            None,
        )
    )
    print_table(
        f"4. Slow readers: {READERS} never-read streams on a {EVENTS}-event conversation",
        rows,
        [
            f"floor/bare = the same server and user without the stalled readers; {rounds} "
            f"rounds of {requests} sequential snapshot GETs alone, then while the readers "
            "connect, then while they are held; p99 over all rounds' requests"
        ],
    )
