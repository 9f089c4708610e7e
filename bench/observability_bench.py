"""What traces and metrics cost per request, off against on in the same run.

1. A visitor's message to its run's end (``RUN_FINISHED`` on the event stream), the planner's
   greeting rule (one model step, no tool): a server with tracing off against one sending
   every span over OTLP/HTTP to a sink on loopback, iterations interleaved; with
   ``--baseline DIR`` (a checkout from before metrics and traces, e.g. ``git archive main``
   unpacked), that checkout's server too: what metrics and tracing-off cost together.
2. The metric updates one such message makes (two request timings, a run started and
   finished, a model step's latency and tokens), timed in this process; and a scrape of
   ``/metrics``.

Usage: .venv/bin/python bench/observability_bench.py [--quick] [--baseline CHECKOUT]
A measurement: exits 0 when a target is missed, 1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import httpx
import servers
from clients import client_for, expect
from report import compare, ms, print_table, summary
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hostcall import metrics
from hostcall.qa.servers import serve_in_thread

HELLO = "hello"
TIMEOUT = 10.0


class Sink:
    """An OTLP/HTTP receiver that counts what it is sent and answers at once."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.lock = threading.Lock()

    async def traces(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.requests += 1
            self.bytes += len(body)
        return Response(b"", media_type="application/x-protobuf")


async def message_to_end(client: httpx.AsyncClient) -> float:
    """Seconds from a message's POST to its run's RUN_FINISHED, on a fresh conversation."""
    created = await client.post("/api/agents/bench/conversations")
    expect(created, 201)
    body = created.json()
    cid = body["conversationId"]
    auth = {"Authorization": f"Bearer {body['sessionToken']}"}
    path = f"/api/conversations/{cid}/events?token={body['streamToken']}"
    async with client.stream("GET", path) as stream:
        lines = stream.aiter_lines()
        started = time.perf_counter()
        sent = await client.post(
            f"/api/conversations/{cid}/messages", json={"text": HELLO}, headers=auth
        )
        expect(sent, 202)
        async for line in lines:
            if line.startswith("event: RUN_FINISHED"):
                return time.perf_counter() - started
    raise RuntimeError(f"the stream of {cid} ended before RUN_FINISHED")


async def traced_runs(
    iterations: int, warmup: int, workdir: Path, secret: str, baseline: Path | None
) -> None:
    sink = Sink()
    app = Starlette(routes=[Route("/v1/traces", sink.traces, methods=["POST"])])
    with serve_in_thread(app) as port:
        on_env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            # Batches go out every 200 ms rather than 5 s, so the run sees them sent.
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
        with contextlib.ExitStack() as started:
            running = {
                "off": started.enter_context(servers.hostcall(workdir, workdir / "off.db", secret)),
                "on": started.enter_context(
                    servers.hostcall(workdir, workdir / "on.db", secret, extra_env=on_env)
                ),
            }
            if baseline is not None:
                before = workdir / "baseline"
                before.mkdir()
                running["before"] = started.enter_context(
                    servers.hostcall(before, before / "before.db", secret, root=baseline)
                )
            times: dict[str, list[float]] = {name: [] for name in running}
            async with contextlib.AsyncExitStack() as open_clients:
                clients = [
                    (name, await open_clients.enter_async_context(client_for(server)))
                    for name, server in running.items()
                ]
                for i in range(warmup + iterations):
                    turn = i % len(clients)  # who goes first rotates
                    for name, client in clients[turn:] + clients[:turn]:
                        took = await asyncio.wait_for(message_to_end(client), TIMEOUT)
                        if i >= warmup:
                            times[name].append(took)
            await asyncio.sleep(1.0)  # the last batch
    off_s, on_s = summary(times["off"]), summary(times["on"])
    rows = [
        compare(f"message -> RUN_FINISHED {q}, traced vs not", on_s[q], off_s[q], ms, None)
        for q in ("p50", "p99")
    ]
    if "before" in times:
        before_s = summary(times["before"])
        rows += [
            compare(
                f"message -> RUN_FINISHED {q}, tracing off vs before",
                off_s[q],
                before_s[q],
                ms,
                1.05,
            )
            for q in ("p50", "p99")
        ]
    notes = [
        f"{iterations} runs each after {warmup} of warm-up, interleaved; the sink got "
        f"{sink.requests} OTLP requests, {sink.bytes / 1024:.1f} KiB "
        "(a run's spans: the run, its step, the model call)",
        f"difference at p50: {(on_s['p50'] - off_s['p50']) * 1e6:.0f} µs per run",
    ]
    print_table("1. Tracing off and on, one run a message", rows, notes)


def metric_updates(rounds: int) -> None:
    """The metric calls one greeting message makes, timed here."""
    route = "/api/conversations/{conversation_id}/messages"

    def one_message() -> None:
        metrics.HTTP_SECONDS.labels("POST", route, "2xx").observe(0.002)
        metrics.HTTP_SECONDS.labels("POST", "/api/agents/{agent_id}/conversations", "2xx").observe(
            0.002
        )
        metrics.RUNS.labels("bench", "started").inc()
        metrics.MODEL_SECONDS.labels("scripted", "ok").observe(0.001)
        metrics.MODEL_TOKENS.labels("scripted", "input", "estimate").inc(40)
        metrics.MODEL_TOKENS.labels("scripted", "output", "estimate").inc(12)
        metrics.RUNS.labels("bench", "finished").inc()
        metrics.OPEN_STREAMS.inc()
        metrics.OPEN_STREAMS.dec()

    for _ in range(1000):
        one_message()
    started = time.perf_counter()
    for _ in range(rounds):
        one_message()
    per = (time.perf_counter() - started) / rounds
    scrapes = []
    for _ in range(50):
        began = time.perf_counter()
        metrics.collect()
        scrapes.append(time.perf_counter() - began)
    rows = [
        ("metric updates of one message", f"{per * 1e6:.1f} µs", "-", "-", "-", "info"),
        (
            "a /metrics exposition (this process)",
            ms(summary(scrapes)["p50"]),
            "-",
            "-",
            "-",
            "info",
        ),
    ]
    print_table(
        "2. Metrics, per message",
        rows,
        [
            f"{rounds} messages' worth of updates, single process (multiprocess mode "
            "writes the same values to memory-mapped files)"
        ],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="a checkout from before metrics and traces, run beside them",
    )
    args = parser.parse_args()
    iterations, warmup = (50, 10) if args.quick else (300, 30)
    failed = False
    with tempfile.TemporaryDirectory(prefix="hostcall-obs-bench-") as tmp:
        try:
            asyncio.run(
                traced_runs(iterations, warmup, Path(tmp), secrets.token_urlsafe(32), args.baseline)
            )
        except Exception:
            traceback.print_exc()
            failed = True
    try:
        metric_updates(20_000 if args.quick else 100_000)
    except Exception:
        traceback.print_exc()
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
