"""Conversations per second on one and two processes, measured in one run.

Each conversation is one tool round trip, as a widget does it: create the conversation,
open its stream, send "What should I work on next?", answer the read_board_tasks call the
stream delivers, and read the stream to RUN_FINISHED. 200 conversations run at once, each
worker starting a new one when its last finishes, until a fixed number is done (a fixed
time would be dominated by the first wave: at 200 at once, one takes many seconds on a
small machine). Three servers, all started before the first is measured:

  SQLite, one process | PostgreSQL, one process | PostgreSQL, two (`--workers 2`, one port)

They take turns in a mirrored order, each server's conversations in chunks (A B C C B A with
the default one round), so the machine's speed drifting during the run weighs on each alike.
The table gives each server's rate with the CPU time each part used per conversation: the
Hostcall processes, PostgreSQL (the postmaster's tree, when the cluster is local), and this
load generator.
They all share the machine's cores: on 2 cores, two Hostcall processes compete with the
load generator and PostgreSQL, and the table says how much each took.

PostgreSQL comes from HOSTCALL_TEST_DATABASE_URL (scripts/bench runs this bench through
scripts/with-postgres, which starts a throwaway cluster); each server gets a fresh schema.

Usage: scripts/with-postgres .venv/bin/python bench/cluster_bench.py [--quick] [--rounds N]
A measurement: exits 0 when a target is missed, 1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import secrets
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import psutil
import psycopg
import servers
from clients import RawHttp
from report import print_table
from streams import RawStream

ASK = "What should I work on next?"
BOARD = {"tasks": [{"id": "t1", "title": "Fix login bug", "status": "todo", "assignee": "Ana"}]}
DISPATCH = "hostcall.tool_call_dispatch"
CONCURRENCY = 200


def _url_with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    extra = urlencode({"options": f"-csearch_path={schema}"})
    return urlunsplit(parts._replace(query="&".join(q for q in (parts.query, extra) if q)))


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _url_with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def postmaster(url: str) -> psutil.Process | None:
    """The local cluster's postmaster, found through the socket directory in the URL."""
    hosts = parse_qs(urlsplit(url).query).get("host", [])
    for host in hosts:
        pid_file = Path(host) / "data" / "postmaster.pid"
        if pid_file.exists():
            return psutil.Process(int(pid_file.read_text().split()[0]))
    return None


class CpuMeter:
    """CPU seconds (user + system) used by process trees between start() and stop()."""

    def __init__(self, roots: list[psutil.Process]) -> None:
        self.roots = roots
        self.before: dict[int, float] = {}

    def _sample(self) -> dict[int, float]:
        seen: dict[int, float] = {}
        for root in self.roots:
            with contextlib.suppress(psutil.Error):
                for p in (root, *root.children(recursive=True)):
                    with contextlib.suppress(psutil.Error):
                        t = p.cpu_times()
                        seen[p.pid] = t.user + t.system
        return seen

    def start(self) -> None:
        self.before = self._sample()

    def stop(self) -> float:
        after = self._sample()
        return sum(v - self.before.get(pid, 0.0) for pid, v in after.items())


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def converse(http: RawHttp, origin: str) -> None:
    # The widget's own fetches carry Hostcall's origin; creating refuses a request without
    # one.
    body = json.loads(
        await http.post(
            "/api/agents/bench/conversations", {}, status=201, headers={"Origin": origin}
        )
    )
    cid, auth = body["conversationId"], {"Authorization": f"Bearer {body['sessionToken']}"}
    stream = await RawStream.open(
        servers.HOST, http.port, f"/api/conversations/{cid}/events?token={body['streamToken']}"
    )
    try:
        await http.post(
            f"/api/conversations/{cid}/messages", {"text": ASK}, status=202, headers=auth
        )
        async for event, data in stream.events():
            if event == DISPATCH:
                call = json.loads(data)["value"]  # an AG-UI CUSTOM event: the call
                await http.post(
                    f"/api/calls/{call['toolCallId']}/result",
                    {"token": call["resultToken"], "output": BOARD},
                )
            elif event == "RUN_FINISHED":
                return
    finally:
        stream.close()
    raise RuntimeError(f"stream of {cid} ended before RUN_FINISHED")


async def warm_up(server: servers.Server) -> None:
    """Conversations before any is counted (imports, caches, prepared statements), on 20
    connections at once: with ``--workers 2`` the kernel spreads connections over the
    processes, and a process's first conversations must not land in a measured chunk."""

    async def one() -> None:
        http = await RawHttp.open(server.port)
        try:
            for _ in range(3):
                await converse(http, server.url.rstrip("/"))
        finally:
            http.close()

    await asyncio.gather(*(one() for _ in range(20)))


async def measure(server: servers.Server, total: int, cpu: dict[str, CpuMeter]) -> dict[str, float]:
    """``total`` conversations, CONCURRENCY at a time.

    The load generator speaks HTTP/1.1 on raw keep-alive connections (bench/clients.py,
    bench/streams.py): httpx spent about 80 ms of CPU per conversation at 200 at once, more
    than any server, so it, not the servers, set the rate."""
    port, origin = server.port, server.url.rstrip("/")
    left, done, errors = total, 0, 0

    async def worker() -> None:
        nonlocal left, done, errors
        http: RawHttp | None = None
        while left > 0:
            left -= 1
            try:
                if http is None:
                    http = await RawHttp.open(port)
                await converse(http, origin)
            except (OSError, asyncio.IncompleteReadError, ValueError, RuntimeError) as exc:
                errors += 1
                if errors <= 3:
                    print(f"  {server.name}: a conversation failed: {exc!r}", file=sys.stderr)
                if http is not None:  # its state is unknown: start a new connection
                    http.close()
                    http = None
            else:
                done += 1
        if http is not None:
            http.close()

    for meter in cpu.values():
        meter.start()
    generator_before = self_cpu()
    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    elapsed = time.monotonic() - started
    used = {name: meter.stop() for name, meter in cpu.items()}
    used["load generator"] = self_cpu() - generator_before
    return {"done": done, "errors": errors, "elapsed": elapsed, **used}


class Case:
    """One server under test, running for the whole bench, and what its chunks add up to."""

    def __init__(self, name: str, server: servers.Server, meters: dict[str, CpuMeter]) -> None:
        self.name, self.server, self.meters = name, server, meters
        self.totals: dict[str, float] = {}

    def add(self, chunk: dict[str, float]) -> None:
        for key, value in chunk.items():
            self.totals[key] = self.totals.get(key, 0.0) + value

    @property
    def rate(self) -> float:
        elapsed = self.totals.get("elapsed", 0.0)
        return self.totals["done"] / elapsed if elapsed else 0.0

    def per_conversation(self, key: str) -> str:
        done = self.totals.get("done", 0.0)
        return f"{1000 * self.totals[key] / done:.1f} ms" if key in self.totals and done else "n/a"


def start_case(
    stack: contextlib.ExitStack,
    name: str,
    db: str,
    workers: int,
    workdir: Path,
    secret: str,
    cluster: psutil.Process | None,
) -> Case:
    argv = servers.serve_argv(workdir, db)
    if workers > 1:
        argv += ["--workers", str(workers)]
    env = dict(os.environ, HOSTCALL_SECRET_KEYS=secret)
    server = stack.enter_context(servers.running(name, argv, workdir, env))
    if workers > 1:
        time.sleep(2)  # /healthz answered by one worker; let the others finish starting
    meters = {"hostcall": CpuMeter([psutil.Process(server.proc.pid)])}
    if cluster is not None:
        meters["postgresql"] = CpuMeter([cluster])
    asyncio.run(warm_up(server))
    return Case(name, server, meters)


def run_interleaved(cases: list[Case], total: int, rounds: int) -> None:
    """Each server's ``total`` conversations in ``2 * rounds`` chunks, the servers taking turns
    in a mirrored order (A B C C B A ...). This machine's speed drifts by up to 1.6x within an
    hour; run one after the other, the servers met different machines. Mirrored, a drift that
    is linear in time weighs on each alike."""
    chunks = 2 * rounds
    for i, case in enumerate([*cases, *reversed(cases)] * rounds):
        size = total // chunks + (1 if i // len(cases) < total % chunks else 0)
        case.server.check_alive()
        chunk = asyncio.run(measure(case.server, size, case.meters))
        case.add(chunk)
        print(
            f"  {case.name}: {chunk['done'] / chunk['elapsed']:.1f}/s over "
            f"{int(chunk['done'])} conversations",
            file=sys.stderr,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer conversations per server")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="mirrored rounds (A B C C B A) each server's conversations are split over (default 1)",
    )
    args = parser.parse_args()
    args.total = 400 if args.quick else 1000
    url = os.environ.get("HOSTCALL_TEST_DATABASE_URL")
    if not url:
        print(
            "cluster_bench: HOSTCALL_TEST_DATABASE_URL is not set; run it through "
            "scripts/with-postgres (scripts/bench does)",
            file=sys.stderr,
        )
        return 1
    servers.raise_fd_limit()
    cluster = postmaster(url)
    secret = secrets.token_urlsafe(32)
    cases: list[Case] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="hostcall-cluster-bench-") as tmp,
            contextlib.ExitStack() as stack,
        ):
            workdir = Path(tmp)
            cases.append(
                start_case(
                    stack, "SQLite, 1 process", str(workdir / "bench.db"), 1, workdir, secret, None
                )
            )
            for name, workers in (("PostgreSQL, 1 process", 1), ("PostgreSQL, 2 processes", 2)):
                db = stack.enter_context(fresh_schema(url))
                cases.append(start_case(stack, name, db, workers, workdir, secret, cluster))
            run_interleaved(cases, args.total, args.rounds)
    except Exception:
        traceback.print_exc()
        return 1
    sqlite, pg1 = cases[0].rate, cases[1].rate
    targets = {
        "PostgreSQL, 1 process": (sqlite, 0.7, "SQLite"),
        "PostgreSQL, 2 processes": (pg1, 1.4, "PostgreSQL 1 process"),
    }
    rows = []
    for case in cases:
        ratio, verdict, goal = "-", "baseline", "-"
        if case.name in targets:
            base, want, of = targets[case.name]
            value = case.rate / base if base else 0.0
            ratio, goal = f"{value:.2f}x {of}", f">= {want:g}x"
            verdict = "ok" if value >= want else "MISSED"
        cpus = [case.per_conversation(key) for key in ("hostcall", "postgresql", "load generator")]
        rows.append(
            (
                case.name,
                f"{case.rate:.1f}/s",
                f"{int(case.totals['errors'])}",
                f"{case.totals['elapsed']:.1f} s",
                *cpus,
                ratio,
                goal,
                verdict,
            )
        )
    header = (
        "server",
        "conversations",
        "errors",
        "wall",
        "cpu hostcall",
        "cpu postgresql",
        "cpu load gen",
        "ratio",
        "target",
        "verdict",
    )
    print_table(
        f"Conversations with one tool round trip: {args.total} per server, {CONCURRENCY} at "
        f"once, in {2 * args.rounds} mirrored chunks",
        rows,
        notes=[
            f"{os.cpu_count()} cores, {platform.platform()}; CPU is user+system time per "
            "completed conversation, shared by every part on this machine; the servers take "
            "turns (A B C C B A) so the machine's drift weighs on each alike; errors are "
            "conversations that failed (not counted in the rate)"
        ],
        header=header,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
