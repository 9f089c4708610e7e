"""N conversations at once, each the full tool round trip, on three backends in one run.

Every visitor starts at the same moment (bench/load_flow.py: create, capabilities, stream,
message, dispatch, delivered, result, RUN_FINISHED; a share approve a call first, a share
wait for a slow model step first). The backends, one after the other, each on a server of
its own and a fresh database:

  SQLite, one process | PostgreSQL, one process | PostgreSQL, two (`--workers 2`)

Each POST goes on a new connection (``--keep-alive``: one per visitor). With two processes,
each connection goes to whichever process accepts it: a visitor's stream and each of its
POSTs land on either, independently, so a run starts, resumes and streams across processes.

Per backend: visitors finished, failed runs (RUN_ERROR, by code), visitors lost otherwise
(their reasons), 503s met at the door (create, message) and elsewhere, the round trip (the
dispatch read -> its TOOL_CALL_RESULT read) and the turn (message POSTed -> RUN_FINISHED
read) p50/p99, the CPU the server's processes and PostgreSQL's (the local postmaster's tree)
used per finished conversation (psutil, from /proc), and the peak of connections: PostgreSQL
client backends, and HTTP connections per server process.

PostgreSQL comes from HOSTCALL_TEST_DATABASE_URL (scripts/bench runs this through
scripts/with-postgres). Usage:
  scripts/with-postgres .venv/bin/python bench/load_bench.py [--quick] [-n N]
A measurement: exits 0 when a target is missed, 1 when a backend failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import load_flow
import psutil
import psycopg
import servers
from clients import Lateness
from cluster_bench import CpuMeter, fresh_schema, postmaster, self_cpu
from report import print_table

TARGET_CPU_RATIO = 1.5  # PostgreSQL Hostcall CPU per conversation <= 1.5x SQLite's
WARMUP = 20  # conversations before the measured ones: imports, caches, prepared statements
SAMPLE_EVERY = 0.25
# HTTP connections are sampled every 4th time only: listing a process's sockets reads all of
# the machine's TCP table, in this process, beside the visitors.
HTTP_EVERY = 4


@dataclass(frozen=True)
class Backend:
    name: str
    workers: int
    postgres: bool


BACKENDS = (
    Backend("SQLite, 1 process", 1, False),
    Backend("PostgreSQL, 1 process", 1, True),
    Backend("PostgreSQL, 2 processes", 2, True),
)


@dataclass
class Result:
    backend: Backend
    tally: load_flow.Tally
    wall: float
    cpu_server: float
    cpu_postgres: float | None
    peak_pg: int | None
    peak_http: list[int]
    counted: Counter[str]  # what /metrics counted meanwhile: COUNTED's series
    cpu_generator: float  # this process: the visitors and the sampler
    reopened: int  # connections the generator came to write on too late (clients.Lateness)


# The server's own counts, read from /metrics before and after the visitors (not sampled:
# an exposition costs the server milliseconds of CPU): pool waits past the pool's wait, by
# what followed (busy: waited on; outage: failed), and requests the store failed.
COUNTED = ("hostcall_db_pool_waits_total", "hostcall_store_errors_total")


def counts(server: servers.Server) -> Counter[str]:
    text = httpx.get(f"{server.url}/metrics", timeout=30.0, trust_env=False).text
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith(COUNTED):
            series, _, value = line.rpartition(" ")
            found[series] += int(float(value))
    return found


def serving(server: servers.Server) -> list[psutil.Process]:
    """The processes that serve requests: the server, or with workers its worker processes
    (not the supervisor, nor multiprocessing's resource tracker)."""
    root = psutil.Process(server.proc.pid)
    workers = []
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if not any("resource_tracker" in part for part in child.cmdline()):
                workers.append(child)
    return workers or [root]


class Peaks:
    """Connections sampled in a thread while the visitors run: PostgreSQL client backends
    (the server's, since only it and this sampler are connected) and each server process's
    established TCP connections."""

    def __init__(self, server: servers.Server, url: str | None) -> None:
        self.server, self.url = server, url
        self.pg: int | None = None
        self.http: dict[int, int] = {}
        self.cpu = 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _processes(self) -> list[psutil.Process]:
        return serving(self.server)

    def _run(self) -> None:
        try:
            self._sample()
        finally:
            self.cpu = time.thread_time()  # this thread's: not the load generator's

    def _sample(self) -> None:
        with contextlib.ExitStack() as stack:
            pg = None
            if self.url is not None:
                pg = stack.enter_context(psycopg.connect(self.url, autocommit=True))
                self.pg = 0
            tick = 0
            while not self.done.wait(SAMPLE_EVERY):
                tick += 1
                if pg is not None:
                    row = pg.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                        "'client backend' AND pid <> pg_backend_pid()"
                    ).fetchone()
                    self.pg = max(self.pg or 0, int(row[0]) if row else 0)
                for process in self._processes() if tick % HTTP_EVERY == 1 else ():
                    with contextlib.suppress(psutil.Error):
                        conns = process.net_connections(kind="tcp")
                        n = sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED)
                        self.http[process.pid] = max(self.http.get(process.pid, 0), n)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        self.thread.start()
        try:
            yield
        finally:
            self.done.set()
            self.thread.join(10)


@contextlib.contextmanager
def burners(count: int) -> Iterator[None]:
    """``count`` busy loops beside the servers while the visitors run: a machine busy with
    other work, where an event loop holds what it borrowed longer."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


def write_agent(workdir: Path) -> Path:
    directory = servers.bench_agents(workdir)
    planner = json.loads((directory / "planner.json").read_text())
    limits = json.loads((directory / "bench.json").read_text())["limits"]  # all off
    agent = load_flow.agent_file(planner, limits)
    (directory / f"{load_flow.AGENT}.json").write_text(json.dumps(agent, indent=2))
    return directory


async def crowd(port: int, n: int, args: argparse.Namespace, tally: load_flow.Tally) -> None:
    kinds = [load_flow.kind_of(i, args.approvals, args.slow) for i in range(n)]
    room = asyncio.Semaphore(getattr(args, "at_once", 0) or n)

    async def visit(kind: str) -> None:
        async with room:
            await load_flow.visit(port, kind, tally, args.timeout, args.keep_alive)

    await asyncio.gather(*(visit(k) for k in kinds))


def warm_up(server: servers.Server, name: str, workers: int, args: argparse.Namespace) -> None:
    """Wait for every worker (one answered /healthz), then send the warm-up's visitors."""
    deadline = time.monotonic() + servers.START_TIMEOUT
    while workers > 1 and len(serving(server)) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: workers did not start")
        time.sleep(0.1)
    warm = load_flow.Tally()
    asyncio.run(crowd(server.port, WARMUP, args, warm))
    if warm.finished != WARMUP:
        raise RuntimeError(f"{name}: warm-up failed: {warm}\n{server.log_tail()}")


def run_backend(
    backend: Backend, args: argparse.Namespace, workdir: Path, secret: str, url: str | None
) -> Result:
    with contextlib.ExitStack() as stack:
        db = stack.enter_context(fresh_schema(url)) if url else str(workdir / "load.db")
        argv = servers.serve_argv(workdir, db)
        if backend.workers > 1:
            argv += ["--workers", str(backend.workers)]
        env = dict(os.environ, HOSTCALL_SECRET_KEYS=secret)
        server = stack.enter_context(servers.running(backend.name, argv, workdir, env))
        warm_up(server, backend.name, backend.workers, args)
        cluster = postmaster(url) if url else None
        meters = {"server": CpuMeter([psutil.Process(server.proc.pid)])}
        if cluster is not None:
            meters["postgres"] = CpuMeter([cluster])
        peaks = Peaks(server, db if url else None)
        tally = load_flow.Tally()
        before = counts(server)
        generator = self_cpu()
        for meter in meters.values():
            meter.start()
        started = time.monotonic()
        Lateness.reopened = 0
        with burners(args.burners), peaks.sampling():
            asyncio.run(crowd(server.port, args.n, args, tally))
        wall = time.monotonic() - started
        used = {name: meter.stop() for name, meter in meters.items()}
        used["generator"] = self_cpu() - generator - peaks.cpu
        server.check_alive()
        counted = counts(server) - before
        if tally.errors or tally.failed_runs:
            # What went wrong, past the pool's waits (many, and said in the table already).
            lines = server.log_path.read_text(errors="replace").splitlines()
            said = [line for line in lines if "for a PostgreSQL connection" not in line]
            waits = len(lines) - len(said)
            tail = "\n".join(said[-30:])
            print(f"  {backend.name}: server log ({waits} pool-wait lines left out):\n{tail}",
                  file=sys.stderr)  # fmt: skip
        return Result(
            backend,
            tally,
            wall,
            used["server"],
            used.get("postgres"),
            peaks.pg,
            sorted(peaks.http.values(), reverse=True),
            counted,
            used["generator"],
            Lateness.reopened,
        )


def _ms(values: list[float], q: int) -> str:
    if len(values) < 2:
        return "-"
    return f"{1000 * statistics.quantiles(values, n=100, method='inclusive')[q - 1]:.0f} ms"


def _per_conversation(seconds: float | None, result: Result) -> str:
    if seconds is None or not result.tally.finished:
        return "-"
    return f"{1000 * seconds / result.tally.finished:.1f} ms"


def pool_waits(result: Result) -> str:
    if not result.backend.postgres:
        return "-"
    waits = [
        sum(n for series, n in result.counted.items() if f'outcome="{outcome}"' in series)
        for outcome in ("busy", "outage")
    ]
    return "/".join(str(n) for n in waits)


def report(results: list[Result], args: argparse.Namespace) -> None:
    rows = []
    for r in results:
        t = r.tally
        door = sum(t.busy[w] for w in ("create", "message"))
        rows.append(
            (
                r.backend.name,
                f"{t.finished}/{args.n}",
                str(sum(t.failed_runs.values())),
                str(sum(t.errors.values())),
                str(door),
                str(sum(t.busy.values()) - door),
                _ms(t.round_trips, 50),
                _ms(t.round_trips, 99),
                _ms(t.turns, 50),
                _ms(t.turns, 99),
                _per_conversation(r.cpu_server, r),
                _per_conversation(r.cpu_postgres, r),
                "-" if r.peak_pg is None else str(r.peak_pg),
                "/".join(str(n) for n in r.peak_http),
                pool_waits(r),
                f"{r.wall:.1f} s",
            )
        )
    header = (
        "backend",
        "finished",
        "failed runs",
        "lost",
        "503 door",
        "503 other",
        "rt p50",
        "rt p99",
        "turn p50",
        "turn p99",
        "cpu server",
        "cpu pg",
        "peak pg conns",
        "peak http conns",
        "pool waits",
        "wall",
    )
    notes = [
        f"{args.n} visitors "
        + (f"{args.at_once} at a time" if args.at_once else "at once")
        + f" per backend ({args.approvals:.0%} approve a call first, "
        f"{args.slow:.0%} wait for a {load_flow.SLOW_SECONDS:.0f} s model step first), after "
        f"{WARMUP} of warm-up; POSTs on "
        + ("a connection per visitor" if args.keep_alive else "a new connection each")
        + (f"; {args.burners} busy loops beside" if args.burners else "")
        + "; rt: dispatch read -> TOOL_CALL_RESULT read (with /delivered); "
        "turn: message POSTed -> RUN_FINISHED read; cpu: per finished conversation",
        "lost: visitors stopped by anything but a failed run; 503 door: create and message "
        "answered 503 (retried after Retry-After); peak http conns: per server process; "
        "pool waits: past the pool's wait, busy (waited on) / outage (failed), from /metrics; "
        "calls timed: " + ", ".join(str(len(r.tally.round_trips)) for r in results),
        "load generator's CPU per conversation (this process but its sampler, on the same "
        "cores): " + ", ".join(_per_conversation(r.cpu_generator, r) for r in results),
        "connections the generator opened and came to write on too late (past "
        "clients.FRESH, so replaced unwritten; the server closes one silent 10 s): "
        + ", ".join(str(r.reopened) for r in results)
        + "; longest wait through 503s for one request: "
        + ", ".join(f"{r.tally.longest_503_wait:.0f} s" for r in results),
        f"{os.cpu_count()} cores, {platform.platform()}, load average at end "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]
    for r in results:
        t = r.tally
        failed_requests = {
            series.partition("{")[2].rstrip("}"): n
            for series, n in r.counted.items()
            if series.startswith("hostcall_store_errors")
        }
        if failed_requests:
            notes.append(f"{r.backend.name}: requests the store failed {failed_requests}")
        if t.failed_runs or t.errors or t.busy or t.cuts:
            notes.append(
                f"{r.backend.name}: failed runs {dict(t.failed_runs)}, lost "
                f"{dict(t.errors)}, 503s {dict(t.busy)}, streams cut {t.cuts}"
            )
    sqlite = next((r for r in results if not r.backend.postgres), None)
    if sqlite is not None and sqlite.tally.finished:
        base = sqlite.cpu_server / sqlite.tally.finished
        for r in results:
            if r.backend.postgres and r.tally.finished:
                ratio = r.cpu_server / r.tally.finished / base
                verdict = "ok" if ratio <= TARGET_CPU_RATIO else "MISSED"
                notes.append(
                    f"{r.backend.name}: server CPU per conversation {ratio:.2f}x "
                    f"SQLite's (target <= {TARGET_CPU_RATIO:g}x): {verdict}"
                )
    failed = sum(sum(r.tally.failed_runs.values()) + sum(r.tally.errors.values()) for r in results)
    notes.append(
        f"target: 0 failed runs and 0 lost on every backend: {'ok' if not failed else 'MISSED'}"
    )
    print_table(f"Load: {args.n} conversations at once, full tool round trip", rows, notes, header)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 visitors, not 1,000")
    parser.add_argument("-n", type=int, default=None, help="visitors per backend")
    parser.add_argument("--approvals", type=float, default=0.2, help="share (default 0.2)")
    parser.add_argument("--slow", type=float, default=0.1, help="share (default 0.1)")
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="one connection per visitor for its POSTs (default: a new one for each)",
    )
    parser.add_argument(
        "--burners", type=int, default=0, help="busy loops beside the servers (default 0)"
    )
    parser.add_argument(
        "--at-once",
        type=int,
        default=0,
        help="visitors in flight at a time (default: all of them): a steady load, not a crowd",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per visitor, seconds")
    parser.add_argument(
        "--backend", action="append", choices=[b.name for b in BACKENDS], help="only these"
    )
    args = parser.parse_args()
    args.n = args.n or (200 if args.quick else 1000)
    url = os.environ.get("HOSTCALL_TEST_DATABASE_URL")
    if not url:
        print(
            "load_bench: HOSTCALL_TEST_DATABASE_URL is not set; run it through "
            "scripts/with-postgres (scripts/bench does)",
            file=sys.stderr,
        )
        return 1
    servers.raise_fd_limit()
    secret = secrets.token_urlsafe(32)
    results, code = [], 0
    with tempfile.TemporaryDirectory(prefix="hostcall-load-bench-") as tmp:
        workdir = Path(tmp)
        write_agent(workdir)
        for backend in BACKENDS:
            if args.backend and backend.name not in args.backend:
                continue
            print(f"  {backend.name}: {args.n} visitors ...", file=sys.stderr)
            try:
                results.append(
                    run_backend(backend, args, workdir, secret, url if backend.postgres else None)
                )
            except Exception:
                traceback.print_exc()
                code = 1
    report(results, args)
    return code


if __name__ == "__main__":
    sys.exit(main())
