"""Hostcall server benchmark, each measure next to a floor measured in the same run.

1. Tool round trip over loopback (Python client): call event received -> result POSTed ->
   the run's next events received; floor: SSE event -> POST echo -> SSE event, bare app.
2. Idle conversation streams: server RSS per open stream; floor: bare sse-starlette stream.
3. Event fan-out: N subscribers on one conversation, events/s delivered; floor: bare app.

Usage: .venv/bin/python bench/server_bench.py [--quick]
A measurement: exits 0 when a target is missed, 1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import httpx

import servers
from streams import RawStream, Tally, close_all, open_many, sse_events

ASK = "What should I work on next?"  # the planner's read_board_tasks rule: no approval
HELLO = "hello"  # the planner's greeting rule: a run with no tool call (fan-out)
BOARD = {"tasks": [
    {"id": "t1", "title": "Write release notes", "status": "todo", "assignee": "Ana"},
    {"id": "t2", "title": "Fix login bug", "status": "in-progress", "assignee": "Kenji"},
]}
FLOOR_TOKEN = "x" * 180  # the floor echoes a body as big as Hostcall's result body
ITERATION_TIMEOUT = 10.0
SECTION_TIMEOUT = 900.0
SETTLE_SECONDS = 1.0


@dataclass(frozen=True, kw_only=True)
class Mode:
    iterations: int
    warmup: int
    stream_levels: tuple[int, ...]
    subscribers: int
    runs: int


FULL = Mode(iterations=300, warmup=30, stream_levels=(1000, 5000), subscribers=200, runs=30)
QUICK = Mode(iterations=50, warmup=10, stream_levels=(200, 1000), subscribers=50, runs=10)

Row = tuple[str, str, str, str, str, str]
HEADER: Row = ("measure", "hostcall", "floor/bare", "ratio", "target", "verdict")


def compare(measure: str, ours: float, floor: float, fmt: Callable[[float], str],
            target: float | None) -> Row:
    ratio = ours / floor if floor else float("inf")
    verdict = "info" if target is None else ("ok" if ratio <= target else "MISSED")
    goal = "-" if target is None else f"<= {target:g}x"
    return (measure, fmt(ours), fmt(floor), f"{ratio:.2f}x", goal, verdict)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def print_table(title: str, rows: Sequence[Row], notes: Sequence[str] = ()) -> None:
    widths = [max(len(r[i]) for r in (HEADER, *rows)) for i in range(len(HEADER))]
    line = "  ".join("-" * w for w in widths)
    print(f"\n## {title}\n")
    for i, row in enumerate((HEADER, *rows)):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print(line)
    for note in notes:
        print(f"  {note}")
    sys.stdout.flush()


def expect(response: httpx.Response, status: int) -> None:
    if response.status_code != status:
        raise RuntimeError(f"{response.request.method} {response.request.url} answered "
                           f"{response.status_code}: {response.text[:300]}")


def client_for(server: servers.Server) -> httpx.AsyncClient:
    # One persistent client per server: POSTs reuse a keep-alive connection.
    return httpx.AsyncClient(base_url=server.url, timeout=ITERATION_TIMEOUT, trust_env=False,
                             limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))


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


async def create_conversations(client: httpx.AsyncClient, n: int, concurrency: int = 16) -> list[Conv]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> Conv:
        async with gate:
            r = await client.post("/api/agents/bench/conversations")
        expect(r, 201)
        body = r.json()
        return Conv(body["conversationId"], body["sessionToken"], body["streamToken"])

    return list(await asyncio.gather(*(one() for _ in range(n))))


# ---- 1. tool round trip --------------------------------------------------------------------

async def exchange(events: AsyncIterator[tuple[str, str]], trigger: str,
                   answer: Callable[[dict[str, object]], Awaitable[float]],
                   marks: tuple[str, ...], end: str) -> dict[str, float]:
    """Seconds from receiving ``trigger`` (the answer POST starts then) to each mark."""
    t0, posting, out = 0.0, None, {}
    async for kind, data in events:
        now = time.perf_counter()
        if kind == "RUN_ERROR":
            raise RuntimeError(f"the run failed: {data}")
        if posting is None:
            if kind == trigger:
                t0, posting = now, asyncio.create_task(answer(json.loads(data)))
        elif kind in marks and kind not in out:
            out[kind] = now - t0
        if posting is not None and kind == end:
            break
    if posting is None or len(out) < len(marks):
        raise RuntimeError(f"the stream ended before {trigger} and {marks}: got {sorted(out)}")
    out["POST"] = await posting - t0
    return out


async def hostcall_round_trip(client: httpx.AsyncClient) -> dict[str, float]:
    conv = (await create_conversations(client, 1))[0]
    async with client.stream("GET", conv.events_path) as response:
        expect(response, 200)
        expect(await client.post(f"/api/conversations/{conv.id}/messages", json={"text": ASK},
                                 headers=conv.auth), 202)

        async def answer(call: dict[str, object]) -> float:
            r = await client.post(f"/api/calls/{call['toolCallId']}/result",
                                  json={"token": call["resultToken"], "output": BOARD})
            expect(r, 200)
            return time.perf_counter()

        return await exchange(sse_events(response), "TOOL_CALL_DISPATCH", answer,
                              ("TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "RUN_FINISHED"),
                              "RUN_FINISHED")


async def floor_round_trip(client: httpx.AsyncClient, channel: str) -> dict[str, float]:
    async with client.stream("GET", f"/events?ch={channel}") as response:
        expect(response, 200)
        expect(await client.post(f"/kick/{channel}"), 200)

        async def answer(_: dict[str, object]) -> float:
            r = await client.post(f"/echo/{channel}", json={"token": FLOOR_TOKEN, "output": BOARD})
            expect(r, 200)
            return time.perf_counter()

        return await exchange(sse_events(response), "kick", answer, ("echo",), "echo")


def stats(samples: list[dict[str, float]], key: str) -> dict[str, float]:
    values = [s[key] for s in samples]
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": q[49], "p99": q[98], "mean": statistics.fmean(values)}


async def round_trip(mode: Mode, workdir: Path, secret: str) -> None:
    with servers.hostcall(workdir, workdir / "rt.db", secret) as hc, servers.floor(workdir) as fl:
        async with client_for(hc) as hc_client, client_for(fl) as fl_client:
            ours: list[dict[str, float]] = []
            floor: list[dict[str, float]] = []
            # Interleaved, so drift on the machine hits both sides alike.
            for i in range(mode.warmup + mode.iterations):
                async with asyncio.timeout(ITERATION_TIMEOUT):
                    h = await hostcall_round_trip(hc_client)
                    f = await floor_round_trip(fl_client, f"rt{i}")
                if i >= mode.warmup:
                    ours.append(h)
                    floor.append(f)
            hc.check_alive()
    echo, post = stats(floor, "echo"), stats(floor, "POST")
    rows: list[Row] = []
    for key, label, target in (("TOOL_CALL_RESULT", "TOOL_CALL_RESULT", 1.5),
                               ("TEXT_MESSAGE_START", "next TEXT_MESSAGE_START (resumed)", 1.5),
                               ("RUN_FINISHED", "RUN_FINISHED (whole reply)", None)):
        ours_stats = stats(ours, key)
        for stat in ("p50", "p99", "mean"):
            rows.append(compare(f"call -> result POST -> {label}, {stat}", ours_stats[stat],
                                echo[stat], ms, target))
    for stat in ("p50", "p99"):
        rows.append(compare(f"call -> result POST response, {stat}", stats(ours, "POST")[stat],
                            post[stat], ms, None))
    print_table(f"1. Tool round trip, loopback, Python client (httpx), n={mode.iterations} "
                f"after {mode.warmup} warm-up, interleaved", rows,
                ["floor: bare Starlette + sse-starlette; SSE event -> POST echo -> SSE event "
                 "(every row compares with the echo event, the POST row with the echo POST)"])


# ---- 2. idle streams -----------------------------------------------------------------------

async def rss_per_stream(server: servers.Server, paths: list[str]) -> tuple[float, int]:
    """(RSS bytes added per open stream, baseline RSS) for ``len(paths)`` idle streams."""
    close_all(await open_many(servers.HOST, server.port, paths[:20]))  # warm the code paths
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
    notes = [f"{len(convs)} conversations created in {created:.1f} s (concurrency 16); "
             "a fresh server process per measure; RSS after streams open - RSS before"]
    for n in mode.stream_levels:
        # A fresh process per measure: memory freed by an earlier level would be reused.
        with servers.hostcall(workdir, db, secret) as hc:
            ours, ours_base = await rss_per_stream(hc, [c.events_path for c in convs[:n]])
        with servers.floor(workdir) as fl:
            bare, bare_base = await rss_per_stream(fl, [f"/events?ch=idle{i}" for i in range(n)])
        rows.append(compare(f"RSS per idle stream, {n} streams", ours, bare,
                            lambda b: f"{b / 1024:.1f} KiB", 1.2))
        rows.append(compare(f"RSS before the {n} streams", ours_base, bare_base,
                            lambda b: f"{b / 2**20:.1f} MiB", None))
    print_table("2. Idle conversation streams, server memory", rows, notes)


# ---- 3. fan-out ----------------------------------------------------------------------------

async def fan_out(streams: list[RawStream], end_marker: bytes, runs: int,
                  one_run: Callable[[], Awaitable[None]]) -> tuple[float, int]:
    """(events/s delivered over all streams, events per stream) for ``runs`` timed runs."""
    tally = Tally()
    pumps = [asyncio.create_task(s.pump(end_marker, tally)) for s in streams]
    try:
        for r in range(runs + 1):  # run 0 warms up
            if r == 1:
                started, before = time.perf_counter(), sum(s.events.count for s in streams)
            tally.expect(len(streams) * (r + 1))
            await one_run()
            await asyncio.wait_for(tally.reached.wait(), ITERATION_TIMEOUT)
        elapsed = time.perf_counter() - started
        delivered = sum(s.events.count for s in streams) - before
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
            subs = await open_many(servers.HOST, hc.port, [conv.events_path] * n)

            async def hostcall_run() -> None:
                expect(await client.post(f"/api/conversations/{conv.id}/messages",
                                         json={"text": HELLO}, headers=conv.auth), 202)

            ours, per_stream = await fan_out(subs, b"event: RUN_FINISHED", mode.runs, hostcall_run)
    per_run = per_stream // mode.runs
    with servers.floor(workdir) as fl:
        async with client_for(fl) as client:
            subs = await open_many(servers.HOST, fl.port, ["/events?ch=fan"] * n)

            async def floor_run() -> None:
                expect(await client.post(f"/burst/fan?count={per_run}"), 200)

            bare, _ = await fan_out(subs, b"event: END", mode.runs, floor_run)
    print_table(f"3. Event fan-out, {n} subscribers on one conversation, {mode.runs} runs", [
        compare("events/s delivered (higher is better)", ours, bare, lambda v: f"{v:,.0f}/s", None),
    ], [f"hostcall: '{HELLO}' runs (no tool), {per_run} events each, next run once every "
        f"subscriber has RUN_FINISHED; floor: {per_run} events per POST, same pacing"])


# ---- main ----------------------------------------------------------------------------------

def print_machine(args: argparse.Namespace) -> None:
    packages = ", ".join(f"{p} {version(p)}" for p in ("starlette", "sse-starlette", "uvicorn",
                                                        "httpx"))
    print("# Hostcall server benchmark\n")
    print(f"command: {sys.executable} {' '.join(sys.argv)}")
    print(f"machine: nproc={os.cpu_count()}, {platform.platform()}, python {platform.python_version()}")
    print(f"packages: {packages}; fd limit {servers.raise_fd_limit()}; "
          f"mode: {'quick' if args.quick else 'full'}")
    sys.stdout.flush()


async def main_async(mode: Mode) -> int:
    secret = secrets.token_urlsafe(32)
    failed = []
    with tempfile.TemporaryDirectory(prefix="hostcall-bench-") as tmp:
        for name, section in (("round trip", round_trip), ("idle streams", idle_streams),
                              ("fan-out", fan_out_section)):
            try:
                async with asyncio.timeout(SECTION_TIMEOUT):
                    await section(mode, Path(tmp), secret)
            except Exception:
                traceback.print_exc()
                print(f"\n!! section '{name}' failed to run", flush=True)
                failed.append(name)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and streams")
    args = parser.parse_args()
    print_machine(args)
    started = time.perf_counter()
    code = asyncio.run(main_async(QUICK if args.quick else FULL))
    print(f"\ntotal: {time.perf_counter() - started:.1f} s, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
