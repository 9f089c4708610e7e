"""The load bench's crowd in rounds, on several servers at once, taking turns.

One run of ``load_bench.py`` moves by ±1 ms of CPU a conversation with the machine, more than
a change worth 5%. Here every server is started once (each on a fresh database), then each
round sends the same crowd of visitors (``load_flow.py``) to each server in turn, the order
rotating, and reads the CPU each server used for it. Per server: the CPU per finished
conversation of every round and their median; for each PostgreSQL server, its ratio to the
SQLite servers' CPU in the same rounds (its own checkout's, if one is run: a change may make
SQLite cheaper too), which is the load bench's target.

A server is ``BACKEND=CHECKOUT[,NAME=VALUE...]``: ``sqlite`` or ``pg`` (one process; ``pg2``
for ``--workers 2``), a checkout whose ``server/`` goes first on ``PYTHONPATH`` (this Python
environment and this checkout's load agent), and environment settings for it.

Usage:
  scripts/with-postgres .venv/bin/python bench/load_ab.py [-n 200] [--rounds 6] \\
      sqlite=. pg=/tmp/main pg=.
A measurement: prints a table and exits 0; 1 when a server could not be driven.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import load_flow
import psutil
import servers
from cluster_bench import CpuMeter, fresh_schema
from load_bench import crowd, warm_up, write_agent
from report import print_table

WORKERS = {"sqlite": 1, "pg": 1, "pg2": 2}


@dataclass
class Spec:
    backend: str
    checkout: Path
    env: dict[str, str]
    label: str
    cpu: list[float] = field(default_factory=list)  # per round, per finished conversation

    @classmethod
    def parse(cls, text: str, n: int) -> Spec:
        backend, _, rest = text.partition("=")
        if backend not in WORKERS or not rest:
            raise SystemExit(f"load_ab: {text!r}: want BACKEND=CHECKOUT[,NAME=VALUE...]")
        checkout, *settings = rest.split(",")
        env = dict(s.split("=", 1) for s in settings)
        return cls(backend, Path(checkout).resolve(), env, f"{n}:{text}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="+", help="BACKEND=CHECKOUT[,NAME=VALUE...]")
    parser.add_argument("-n", type=int, default=200, help="visitors a round (default 200)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--at-once", type=int, default=0, help="visitors in flight (default all)")
    parser.add_argument("--approvals", type=float, default=0.2)
    parser.add_argument("--slow", type=float, default=0.1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--keep-alive", action="store_true")
    args = parser.parse_args()
    specs = [Spec.parse(text, n) for n, text in enumerate(args.servers, 1)]
    url = os.environ.get("HOSTCALL_TEST_DATABASE_URL")
    if any(s.backend != "sqlite" for s in specs) and not url:
        print("load_ab: PostgreSQL needs HOSTCALL_TEST_DATABASE_URL (scripts/with-postgres)")
        return 1
    servers.raise_fd_limit()
    secret = secrets.token_urlsafe(32)
    with (
        tempfile.TemporaryDirectory(prefix="hostcall-load-ab-") as tmp,
        contextlib.ExitStack() as st,
    ):
        workdir = Path(tmp)
        write_agent(workdir)
        started: list[tuple[Spec, servers.Server]] = []
        for spec in specs:
            db = st.enter_context(fresh_schema(url)) if spec.backend != "sqlite" else None
            db = db or str(workdir / f"{spec.label.split(':')[0]}.db")
            argv = servers.serve_argv(workdir, db)
            if WORKERS[spec.backend] > 1:
                argv += ["--workers", str(WORKERS[spec.backend])]
            # The spec's settings last: they may set anything, PYTHONPATH included.
            env = {**os.environ, "HOSTCALL_SECRET_KEYS": secret,
                   "PYTHONPATH": str(spec.checkout / "server"), **spec.env}  # fmt: skip
            name = f"ab{spec.label.split(':')[0]}"
            server = st.enter_context(servers.running(name, argv, workdir, env, spec.checkout))
            warm_up(server, spec.label, WORKERS[spec.backend], args)
            started.append((spec, server))
        for r in range(args.rounds):
            order = started[r % len(started) :] + started[: r % len(started)]
            for spec, server in order:
                tally = load_flow.Tally()
                meter = CpuMeter([psutil.Process(server.proc.pid)])
                meter.start()
                asyncio.run(crowd(server.port, args.n, args, tally))
                used = meter.stop()
                server.check_alive()
                if tally.finished != args.n:
                    print(f"load_ab: {spec.label}: round {r + 1}: {tally}")
                    return 1
                spec.cpu.append(used / tally.finished * 1000)
            print(f"  round {r + 1}: " + ", ".join(f"{s.label} {s.cpu[-1]:.1f} ms" for s in specs),
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    report(specs, args)
    return 0


def report(specs: list[Spec], args: argparse.Namespace) -> None:
    def baseline(spec: Spec) -> list[float]:
        """The SQLite servers' CPU each round: those of the spec's own checkout if any (a
        change may make SQLite cheaper too), else all."""
        own = [s for s in specs if s.backend == "sqlite" and s.checkout == spec.checkout]
        sqlite = own or [s for s in specs if s.backend == "sqlite"]
        return [statistics.mean(r) for r in zip(*(s.cpu for s in sqlite), strict=True)]

    rows = []
    for spec in specs:
        base = baseline(spec)
        ratios = [c / b for c, b in zip(spec.cpu, base, strict=True)] if base else []
        rows.append([
            spec.label,
            " ".join(f"{c:.1f}" for c in spec.cpu),
            f"{statistics.median(spec.cpu):.2f} ms",
            f"{statistics.median(ratios):.2f}x" if ratios else "-",
            " ".join(f"{x:.2f}" for x in ratios) if ratios else "-",
        ])  # fmt: skip
    header = ["server", "cpu per conversation, each round (ms)", "median",
              "ratio to SQLite (median)", "each round"]  # fmt: skip
    notes = [f"{args.n} visitors a round ({args.at_once or 'all'} at once), {args.rounds} rounds,"
             f" in turns; {os.cpu_count()} cores, load average at end"
             f" {' '.join(f'{x:.2f}' for x in os.getloadavg())}"]  # fmt: skip
    print_table("Server CPU per finished conversation", rows, notes, header)


if __name__ == "__main__":
    sys.exit(main())
