"""Hostcall server benchmark, each measure next to a floor measured in the same run.

1. Tool round trip over loopback (Python client): call event received -> result POSTed ->
   the run's next events received; floor: SSE event -> POST echo -> SSE event, bare app.
2. Idle conversation streams: server RSS per open stream; floor: bare sse-starlette stream.
3. Event fan-out: N subscribers on one conversation, events/s delivered; floor: bare app.
4. Slow readers: another user's p99 with 200 never-read streams; floor: the same without.

Usage: .venv/bin/python bench/server_bench.py [--quick] [--only SECTION ...]
A measurement: exits 0 when a target is missed, 1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import servers
from clients import client_for, create_conversations, expect, stream_paths
from report import Row, compare, kib, mib, per_second, print_table
from round_trip import round_trip
from stalled import stalled_readers
from streams import RawStream, Tally, close_all, open_many

HELLO = "hello"  # the planner's greeting rule: a run with no tool call (fan-out)
RUN_TIMEOUT = 10.0
SECTION_TIMEOUT = 900.0
SETTLE_SECONDS = 1.0


@dataclass(frozen=True, kw_only=True)
class Mode:
    iterations: int
    warmup: int
    stream_levels: tuple[int, ...]
    subscribers: int
    runs: int
    storm_rounds: int


FULL = Mode(
    iterations=300, warmup=30, stream_levels=(1000, 5000), subscribers=200, runs=30, storm_rounds=3
)
QUICK = Mode(
    iterations=50, warmup=10, stream_levels=(200, 1000), subscribers=50, runs=10, storm_rounds=2
)


# ---- 2. idle streams -----------------------------------------------------------------------


async def rss_per_stream(
    server: servers.Server, paths: list[str], warm: list[str]
) -> tuple[float, int]:
    """(RSS bytes added per open stream, baseline RSS) for ``len(paths)`` idle streams."""
    close_all(await open_many(servers.HOST, server.port, warm))  # warm the code paths
    await asyncio.sleep(SETTLE_SECONDS)
    base = server.rss()
    streams = await open_many(servers.HOST, server.port, paths)
    try:
        await asyncio.sleep(SETTLE_SECONDS)
        server.check_alive()
        if (open_now := server.established()) < len(paths):
            raise RuntimeError(f"{server.name}: {open_now} connections for {len(paths)} streams")
        return (server.rss() - base) / len(paths), base
    finally:
        close_all(streams)


async def idle_streams(mode: Mode, workdir: Path, secret: str) -> None:
    db = workdir / "idle.db"
    started = time.perf_counter()
    with servers.hostcall(workdir, db, secret) as hc:
        async with client_for(hc) as client:
            convs = await create_conversations(client, max(mode.stream_levels))
    created = time.perf_counter() - started
    rows: list[Row] = []
    notes = [
        f"{len(convs)} conversations created in {created:.1f} s (concurrency 16); "
        "a fresh server process per measure; RSS after streams open - RSS before"
    ]
    for n in mode.stream_levels:
        # A fresh process per measure: memory freed by an earlier level would be reused.
        with servers.hostcall(workdir, db, secret) as hc:
            async with client_for(hc) as client:  # stream tickets are single use
                paths = await stream_paths(client, convs[:n] + convs[:20])
            ours, ours_base = await rss_per_stream(hc, paths[:n], paths[n:])
        with servers.floor(workdir) as fl:
            bare_paths = [f"/events?ch=idle{i}" for i in range(n)]
            bare, bare_base = await rss_per_stream(fl, bare_paths, bare_paths[:20])
        rows.append(compare(f"RSS per idle stream, {n} streams", ours, bare, kib, 1.2))
        rows.append(compare(f"RSS before the {n} streams", ours_base, bare_base, mib, None))
    print_table("2. Idle conversation streams, server memory", rows, notes)


# ---- 3. fan-out ----------------------------------------------------------------------------


async def fan_out(
    streams: list[RawStream], end_marker: bytes, runs: int, one_run: Callable[[], Awaitable[None]]
) -> tuple[float, int]:
    """(events/s delivered over all streams, events per stream) for ``runs`` timed runs."""
    tally = Tally()
    started, before = time.perf_counter(), 0
    pumps = [asyncio.create_task(s.pump(end_marker, tally)) for s in streams]
    try:
        for r in range(runs + 1):  # run 0 warms up
            if r == 1:
                started, before = time.perf_counter(), sum(s.delivered.count for s in streams)
            tally.expect(len(streams) * (r + 1))
            await one_run()
            await asyncio.wait_for(tally.reached.wait(), RUN_TIMEOUT)
        elapsed = time.perf_counter() - started
        delivered = sum(s.delivered.count for s in streams) - before
        return delivered / elapsed, delivered // len(streams)
    finally:
        for pump in pumps:
            pump.cancel()
        close_all(streams)


async def fan_out_section(mode: Mode, workdir: Path, secret: str) -> None:
    n = mode.subscribers
    with servers.hostcall(workdir, workdir / "fan.db", secret) as hc:
        async with client_for(hc) as client:
            conv = (await create_conversations(client, 1))[0]
            subs = await open_many(servers.HOST, hc.port, await stream_paths(client, [conv] * n))

            async def hostcall_run() -> None:
                expect(
                    await client.post(
                        f"/api/conversations/{conv.id}/messages",
                        json={"text": HELLO},
                        headers=conv.auth,
                    ),
                    202,
                )

            ours, per_stream = await fan_out(subs, b"event: RUN_FINISHED", mode.runs, hostcall_run)
    per_run = per_stream // mode.runs
    with servers.floor(workdir) as fl:
        async with client_for(fl) as client:
            subs = await open_many(servers.HOST, fl.port, ["/events?ch=fan"] * n)

            async def floor_run() -> None:
                expect(await client.post(f"/burst/fan?count={per_run}"), 200)

            bare, _ = await fan_out(subs, b"event: END", mode.runs, floor_run)
    print_table(
        f"3. Event fan-out, {n} subscribers on one conversation, {mode.runs} runs",
        [
            compare("events/s delivered (higher is better)", ours, bare, per_second, None),
        ],
        [
            f"hostcall: '{HELLO}' runs (no tool), {per_run} events each, next run once every "
            f"subscriber has RUN_FINISHED; floor: {per_run} events per POST, same pacing"
        ],
    )


# ---- main ----------------------------------------------------------------------------------


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def print_machine(args: argparse.Namespace) -> None:
    packages = ", ".join(
        f"{p} {version(p)}" for p in ("starlette", "sse-starlette", "uvicorn", "httpx")
    )
    print("# Hostcall server benchmark\n")
    print(f"command: {sys.executable} {' '.join(sys.argv)}")
    print(
        f"machine: nproc={os.cpu_count()}, {platform.platform()}, "
        f"python {platform.python_version()}"
    )
    print(
        f"packages: {packages}; fd limit {servers.raise_fd_limit()}; "
        f"mode: {'quick' if args.quick else 'full'}"
    )
    print(f"load average at start: {load()} (other processes share these cores)")
    sys.stdout.flush()


SECTIONS = ("round trip", "idle streams", "fan-out", "slow readers")


async def main_async(mode: Mode, only: list[str]) -> int:
    secret = secrets.token_urlsafe(32)
    failed = []
    with tempfile.TemporaryDirectory(prefix="hostcall-bench-") as tmp:
        sections: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("round trip", lambda: round_trip(mode.iterations, mode.warmup, Path(tmp), secret)),
            ("idle streams", lambda: idle_streams(mode, Path(tmp), secret)),
            ("fan-out", lambda: fan_out_section(mode, Path(tmp), secret)),
            (
                "slow readers",
                lambda: stalled_readers(mode.iterations, mode.storm_rounds, Path(tmp), secret),
            ),
        ]
        for name, section in sections:
            if name not in only:
                continue
            try:
                async with asyncio.timeout(SECTION_TIMEOUT):
                    await section()
            except Exception:
                traceback.print_exc()
                print(f"\n!! section '{name}' failed to run", flush=True)
                failed.append(name)
            print(f"  (load average after {name}: {load()})", flush=True)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and streams")
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help="run this section only (may be given more than once)",
    )
    args = parser.parse_args()
    print_machine(args)
    started = time.perf_counter()
    code = asyncio.run(main_async(QUICK if args.quick else FULL, args.only or list(SECTIONS)))
    print(
        f"\ntotal: {time.perf_counter() - started:.1f} s, load average at end: {load()}, "
        f"exit {code}"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
