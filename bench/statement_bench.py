"""Statements and round trips per operation of a conversation, per backend: what the load
bench's CPU per conversation is made of, counted rather than timed (a count does not move
with the machine's load).

The load bench's flow (bench/load_flow.py) on its agent, against the real app under uvicorn
in this process (tests/support/live.py), counted where the statements leave it
(tests/support/wire.py): SQLite, PostgreSQL with the stream on the same process, and
PostgreSQL with the stream on a second server (as with ``--workers 2``: the events reach it
through NOTIFY). The first conversation of each warms up (a process's first run writes its
agent definition); the figures are the mean of the next ones.

Usage:
  scripts/with-postgres .venv/bin/python bench/statement_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the live server and the counter

import load_bench  # noqa: E402
from report import print_table  # noqa: E402

from hostcall.settings import Settings  # noqa: E402
from tests.support.harness import SECRET  # noqa: E402
from tests.support.live import Live, live_server  # noqa: E402
from tests.support.wire import OPERATIONS, Counted, Tally, count_sqlite, counting, turn  # noqa: E402

URL = "HOSTCALL_TEST_DATABASE_URL"


def settings(workdir: Path, url: str | None, name: str) -> Settings:
    # No sweeper pass during a count: it reads on its own clock, not the conversation's.
    return Settings(
        agents_dir=workdir / "agents",
        db_path=workdir / f"{name}.db",
        secret_keys=SECRET,
        sweep_seconds=3600,
        environ={},
        database_url=url,
    )


@contextmanager
def schema(url: str) -> Iterator[str]:
    from cluster_bench import fresh_schema

    with fresh_schema(url) as scoped:
        yield scoped


def mean(runs: list[dict[str, Counted]], name: str) -> tuple[float, float, float]:
    """Statements, round trips, transactions (SQLite's BEGINs) of ``name``, per conversation."""
    n = len(runs)
    return (
        sum(r[name].statements for r in runs) / n,
        sum(r[name].round_trips for r in runs) / n,
        sum(r[name].transactions for r in runs) / n,
    )


def measure(workdir: Path, url: str, conversations: int) -> dict[str, list[dict[str, Counted]]]:
    found: dict[str, list[dict[str, Counted]]] = {}
    with pytest.MonkeyPatch.context() as patch, counting(patch) as tally:
        with live_server(settings(workdir, None, "sqlite")) as live:
            count_sqlite(live, tally)
            found["sqlite"] = runs(live, tally, conversations)
        with schema(url) as scoped, live_server(settings(workdir, scoped, "pg")) as live:
            found["pg"] = runs(live, tally, conversations)
        with ExitStack() as stack:
            scoped = stack.enter_context(schema(url))
            one = stack.enter_context(live_server(settings(workdir, scoped, "pg1")))
            two = stack.enter_context(live_server(settings(workdir, scoped, "pg2")))
            found["pg2"] = runs(one, tally, conversations, two)
    return found


def runs(
    live: Live, tally: Tally, conversations: int, streamed: Live | None = None
) -> list[dict[str, Counted]]:
    turn(live, tally, streamed)  # warm-up
    return [turn(live, tally, streamed) for _ in range(conversations)]


def report(found: dict[str, list[dict[str, Counted]]]) -> None:
    def cell(backend: str, name: str, *, sqlite: bool = False) -> str:
        statements, trips, transactions = mean(found[backend], name)
        if sqlite:
            return f"{statements:g} ({transactions:g})"
        return f"{statements:g} / {trips:g}"

    rows = []
    for name in (*OPERATIONS, "conversation (all but the replay)"):
        if name.startswith("conversation"):
            for runs_ in found.values():
                for r in runs_:
                    r[name] = _sum([c for k, c in r.items() if not k.startswith("stream replay")])
        rows.append((name, cell("sqlite", name, sqlite=True), cell("pg", name), cell("pg2", name)))
    header = ("operation", "SQLite stmts (txns)", "PG stmts / round trips",
              "PG, stream on another process")  # fmt: skip
    notes = [
        "per conversation, mean of the conversations after one of warm-up; the load bench's "
        "flow and agent (bench/load_flow.py); counted by tests/support/wire.py",
        "SQLite: statements without BEGIN/COMMIT, (transactions); PostgreSQL: statements "
        "(no BEGIN/COMMIT: a pipeline's Sync ends a transaction) / waits for an answer",
        "stream on another process: both servers' statements (the NOTIFY's reads included)",
    ]
    print_table("Statements per operation", rows, notes, header)
    for backend in found:
        total = [r["conversation (all but the replay)"] for r in found[backend]]
        words = _sum(total).by_word
        kinds = ", ".join(f"{w} {c / len(total):g}" for w, c in words.most_common())
        print(f"  {backend}: by first word, per conversation (all but the replay): {kinds}")


def show(found: dict[str, list[dict[str, Counted]]]) -> None:
    """Each operation's statements in the last conversation of each backend ("*": the
    sender waited for an answer)."""
    for backend, runs_ in found.items():
        for name in OPERATIONS:
            print(f"\n### {backend}: {name}")
            for line in runs_[-1][name].sent:
                print(f"  {line[:300]}")


def _sum(counted: list[Counted]) -> Counted:
    from collections import Counter

    words: Counter[str] = Counter()
    for c in counted:
        words.update(c.by_word)
    return Counted(words, sum(c.round_trips for c in counted))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 conversations, not 10")
    parser.add_argument(
        "--show", action="store_true", help="print the statements of each operation, once"
    )
    args = parser.parse_args()
    url = os.environ.get(URL)
    if not url:
        print(f"statement_bench: {URL} is not set; run it through scripts/with-postgres",
              file=sys.stderr)  # fmt: skip
        return 1
    os.environ.setdefault("HOSTCALL_SECRET_KEYS", secrets.token_urlsafe(32))
    with tempfile.TemporaryDirectory(prefix="hostcall-statement-bench-") as tmp:
        workdir = Path(tmp)
        load_bench.write_agent(workdir)
        found = measure(workdir, url, 3 if args.quick else 10)
        report(found)
        if args.show:
            show(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
