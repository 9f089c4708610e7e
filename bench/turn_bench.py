"""What one turn costs as a conversation grows (docs/agents.md ``history_turns``): a message
to a conversation that already holds 1,000 turns, next to the same message to one that holds
one (the baseline, on the same server, in the same minutes), on SQLite and on PostgreSQL.

A turn is the person's message and the agent's reply: ``POST …/messages``, then the event
stream read from the last event seen until the run's ``RUN_FINISHED``. The demo planner
answers "hello" with one step and no tool, so what grows with the conversation is only what
the server reads of it. The two conversations take turns, so load on the machine hits both
alike. The server is a real ``hostcall serve`` subprocess; the client a keep-alive httpx
client on loopback.

Usage: .venv/bin/python bench/turn_bench.py [--quick] [--baseline CHECKOUT]
``--baseline``: also run the server of another checkout (e.g. a worktree of an older commit)
on the same data, for a before/after table. PostgreSQL comes from HOSTCALL_TEST_DATABASE_URL
(scripts/bench sets it); without it, SQLite only. A measurement: prints a table and exits 0;
1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
import traceback
from pathlib import Path

import httpx
import servers
from cluster_bench import fresh_schema
from report import ms, print_table, summary

from hostcall.store import open_store
from hostcall.store.records import Conversation, StoredMessage
from hostcall.tokens import Claims, Purpose, Tokens

AGENT = "bench"
LONG = 1000  # turns already in the long conversation
SAY = "hello"  # the planner's greeting rule: one step, no tool


async def populate(target: str | Path, tag: str) -> dict[str, str]:
    """The long and the short conversation, each turn a question and its answer."""
    store = open_store(target, serving=False)
    ids = {"long": f"c_turns_long_{tag}", "short": f"c_turns_short_{tag}"}
    try:
        async with store.transaction():
            for case, turns in (("long", LONG), ("short", 1)):
                cid = ids[case]
                await store.create_conversation(Conversation(cid, AGENT, time.time(), "en"))
                for n in range(turns):
                    run = f"r_{cid}_{n}"
                    await store.add_message(
                        StoredMessage(f"m_{cid}_{n}_q", cid, run, "user", f"Question {n}?")
                    )
                    await store.add_message(
                        StoredMessage(f"m_{cid}_{n}_a", cid, run, "assistant",
                                      f"Answer {n}: " + "words " * 20)
                    )  # fmt: skip
    finally:
        await store.close()
    return ids


def one_turn(client: httpx.Client, cid: str, auth: dict[str, str], after: str) -> str:
    """Send the message and read the stream until its run has finished; the last event id."""
    r = client.post(f"/api/conversations/{cid}/messages", json={"text": SAY}, headers=auth)
    if r.status_code != 202:
        raise RuntimeError(f"message: {r.status_code} {r.text[:300]}")
    run_id = r.json()["runId"]
    token = client.post(f"/api/conversations/{cid}/stream-token", headers=auth).json()
    params = {"token": token["streamToken"], **({"after": after} if after else {})}
    last = after
    with client.stream("GET", f"/api/conversations/{cid}/events", params=params) as stream:
        for line in stream.iter_lines():
            if line.startswith("id:"):
                last = line[3:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:])
                if data.get("runId") == run_id and data.get("type") == "RUN_FINISHED":
                    return last
                if data.get("type") == "RUN_ERROR":
                    raise RuntimeError(f"run failed: {data}")
    raise RuntimeError("the stream ended before the run finished")


def measure(url: str, tokens: Tokens, ids: dict[str, str], rounds: int) -> dict[str, list[float]]:
    auth = {
        case: {"Authorization": "Bearer " + tokens.sign(Purpose.SESSION, Claims(cid, generation=0))}
        for case, cid in ids.items()
    }
    after = {case: "" for case in ids}
    times: dict[str, list[float]] = {case: [] for case in ids}
    with httpx.Client(base_url=url, timeout=60, trust_env=False) as client:
        for i in range(rounds + rounds // 10):
            order = ("long", "short") if i % 2 else ("short", "long")
            for case in order:
                t = time.perf_counter()
                after[case] = one_turn(client, ids[case], auth[case], after[case])
                if i >= rounds // 10:  # a tenth of warm-up
                    times[case].append(time.perf_counter() - t)
    return times


def run_case(
    name: str, target: str | Path, workdir: Path, rounds: int, roots: dict[str, Path]
) -> list[tuple[str, ...]]:
    rows = []
    for label, root in roots.items():
        secret = secrets.token_hex(32)
        ids = asyncio.run(populate(target, label))
        tokens = Tokens((secret,), {Purpose.SESSION: 3600})
        db = target if isinstance(target, str) else Path(target)
        with servers.hostcall(workdir, db, secret, root=root) as hc:  # type: ignore[arg-type]
            times = measure(hc.url, tokens, ids, rounds)
        short, long = summary(times["short"]), summary(times["long"])
        rows.append((name, label, f"{LONG:,} turns", ms(long["p50"]), ms(long["p99"]),
                     ms(short["p50"]), ms(short["p99"]), f"{long['p50'] / short['p50']:.2f}x",
                     f"{long['p99'] / short['p99']:.2f}x"))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns")
    parser.add_argument("--baseline", type=Path, help="another checkout's server, for before")
    args, _ = parser.parse_known_args()
    rounds = 30 if args.quick else 150
    roots = {"this checkout": servers.ROOT}
    if args.baseline is not None:
        roots = {"baseline": args.baseline.resolve(), **roots}
    rows: list[tuple[str, ...]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="hostcall-turn-bench-") as tmp:
            workdir = Path(tmp)
            rows += run_case("SQLite", workdir / "bench.db", workdir, rounds, roots)
            url = os.environ.get("HOSTCALL_TEST_DATABASE_URL")
            if url:
                with contextlib.ExitStack() as stack:
                    pg = stack.enter_context(fresh_schema(url))
                    rows += run_case("PostgreSQL", pg, workdir, rounds, roots)
    except Exception:
        traceback.print_exc()
        return 1
    print_table(
        f"One turn (message to RUN_FINISHED on the stream), {rounds} each after a tenth as many "
        "of warm-up, the two conversations interleaved",
        rows,
        ["the baseline is the same turn in a conversation of one turn, same server, same "
         "minutes; the ratio is long / short",
         "the model is sent the last history_turns turns (20) either way; what grows with the "
         "conversation is what the server reads of it",
         *([] if os.environ.get("HOSTCALL_TEST_DATABASE_URL") else
           ["PostgreSQL skipped: HOSTCALL_TEST_DATABASE_URL is not set (scripts/bench sets it)"])],
        header=("store", "server", "long", "p50", "p99", "short p50", "short p99", "p50 ratio",
                "p99 ratio"),
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
