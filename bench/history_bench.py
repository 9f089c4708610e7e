"""What listing a visitor's history costs (docs/protocol.md "History"): a person with 1,000
conversations, next to a person with one (the baseline, in the same minutes, on the same
server), on SQLite and on PostgreSQL.

The store holds 1,000 conversations of the person, 1,000 of one anonymous browser, 1,000 of
other people and one of the baseline person, each with a first message; the server is a real
``hostcall serve`` subprocess; the client a keep-alive httpx client on loopback. Requests for
the big history and the baseline alternate, so load on the machine hits both alike.

Usage: .venv/bin/python bench/history_bench.py [--quick]
PostgreSQL comes from HOSTCALL_TEST_DATABASE_URL (scripts/bench sets it); without it, SQLite
only. A measurement: prints a table and exits 0; 1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
MANY = 1000
PERSON, SOLO, BROWSER = "person-many", "person-one", "b" * 32
# The first page (50 lines) p99, at most this many times the one-conversation baseline's.
TARGET = 2.0


async def populate(target: str | Path) -> dict[str, str]:
    """The store's conversations; the holder conversation (whose token asks) of each case."""
    store = open_store(target, serving=False)
    holders: dict[str, str] = {}
    start = time.time() - 86400
    try:
        async with store.transaction():
            n = 0
            for owner, count, browser in ((PERSON, MANY, None), (None, MANY, BROWSER),
                                          ("other", MANY, None), (SOLO, 1, None)):  # fmt: skip
                for i in range(count):
                    n += 1
                    person = f"other-{i}" if owner == "other" else owner
                    cid = f"c_bench{n:06d}"
                    at = start + n
                    await store.create_conversation(
                        Conversation(cid, AGENT, at, "en", person=person, browser=browser)
                    )
                    await store.add_message(
                        StoredMessage(f"m_bench{n:06d}", cid, f"r_bench{n:06d}", "user",
                                      f"Conversation {i}: what should I work on next?")
                    )  # fmt: skip
                    key = owner if owner != "other" else None
                    if key is None and browser:
                        key = "browser"
                    if key:
                        holders[key] = cid
    finally:
        await store.close()
    return holders


def measure(
    url: str, tokens: Tokens, holders: dict[str, str], rounds: int
) -> dict[str, list[float]]:
    def auth(case: str) -> dict[str, str]:
        # A person's conversation takes a session token issued to them
        # (hostcall/visitors/sessions.py).
        person = case if case in (PERSON, SOLO) else None
        token = tokens.sign(Purpose.SESSION, Claims(holders[case], generation=0, person=person))
        return {"Authorization": f"Bearer {token}"}

    heads = {case: auth(case) for case in (PERSON, SOLO, "browser")}
    times: dict[str, list[float]] = {"one": [], "first": [], "browser": [], "all": []}
    with httpx.Client(base_url=url, timeout=30, trust_env=False) as client:

        def get(case: str, before: str | None = None) -> dict[str, object]:
            params = {"before": before} if before else None
            r = client.get(f"/api/conversations/{holders[case]}/history", params=params,
                           headers=heads[case])  # fmt: skip
            if r.status_code != 200:
                raise RuntimeError(f"history: {r.status_code} {r.text[:300]}")
            body: dict[str, object] = r.json()
            return body

        for i in range(rounds + rounds // 10):
            warm = i < rounds // 10
            for label, case in (("one", SOLO), ("first", PERSON), ("browser", "browser")):
                t = time.perf_counter()
                page = get(case)
                if not warm:
                    times[label].append(time.perf_counter() - t)
                expected = 1 if case == SOLO else 50
                if len(page["conversations"]) != expected:  # type: ignore[arg-type]
                    raise RuntimeError(f"{case}: {len(page['conversations'])} lines")  # type: ignore[arg-type]
            if i % 10 == 0:  # every page of the 1,000, now and then
                t = time.perf_counter()
                seen, before = 0, None
                while True:
                    page = get(PERSON, before)
                    seen += len(page["conversations"])  # type: ignore[arg-type]
                    before = page.get("next")  # type: ignore[assignment]
                    if not before:
                        break
                if seen != MANY:
                    raise RuntimeError(f"walked {seen} conversations, not {MANY}")
                if not warm:
                    times["all"].append(time.perf_counter() - t)
    return times


def run_case(
    name: str, target: str | Path, db_arg: str, workdir: Path, rounds: int
) -> list[tuple[str, ...]]:
    secret = secrets.token_hex(32)
    holders = asyncio.run(populate(target))
    tokens = Tokens((secret,), {Purpose.SESSION: 3600})
    with servers.hostcall(workdir, Path(db_arg) if "://" not in db_arg else db_arg, secret) as hc:  # type: ignore[arg-type]
        times = measure(hc.url, tokens, holders, rounds)
    one = summary(times["one"])
    rows = []
    for label, what in (("first", f"person, first page (50 of {MANY:,})"),
                        ("browser", f"browser, first page (50 of {MANY:,})")):  # fmt: skip
        s = summary(times[label])
        ratio = s["p99"] / one["p99"]
        rows.append((name, what, ms(s["p50"]), ms(s["p99"]), ms(one["p99"]), f"{ratio:.2f}x",
                     f"<= {TARGET:g}x", "ok" if ratio <= TARGET else "MISSED"))  # fmt: skip
    walks = times["all"] * (2 if len(times["all"]) == 1 else 1)  # quantiles need two
    walk = summary(walks)
    rows.append((name, f"person, all {MANY:,} ({MANY // 50} pages)", ms(walk["p50"]),
                 ms(walk["p99"]), "-", "-", "-", "info"))  # fmt: skip
    rows.append((name, "baseline: person with 1", ms(one["p50"]), ms(one["p99"]), "-", "-", "-",
                 "baseline"))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    args, _ = parser.parse_known_args()
    rounds = 100 if args.quick else 500
    rows: list[tuple[str, ...]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="hostcall-history-bench-") as tmp:
            workdir = Path(tmp)
            db = workdir / "bench.db"
            rows += run_case("SQLite", db, str(db), workdir, rounds)
            url = os.environ.get("HOSTCALL_TEST_DATABASE_URL")
            if url:
                with contextlib.ExitStack() as stack:
                    pg = stack.enter_context(fresh_schema(url))
                    rows += run_case("PostgreSQL", pg, pg, workdir, rounds)
    except Exception:
        traceback.print_exc()
        return 1
    print_table(
        f"A visitor's history: GET /api/conversations/{{id}}/history, {rounds} requests each "
        "after a tenth as many of warm-up, interleaved",
        rows,
        ["the baseline is the same request for a person with one conversation, same server, "
         "same minutes; the target is on p99",
         f"the store holds {3 * MANY + 1:,} conversations of the agent (the person's, one "
         "browser's, other people's), each with a first message; loopback, keep-alive httpx",
         *([] if os.environ.get("HOSTCALL_TEST_DATABASE_URL") else
           ["PostgreSQL skipped: HOSTCALL_TEST_DATABASE_URL is not set (scripts/bench sets it)"])],
        header=("store", "listing", "p50", "p99", "baseline p99", "ratio", "target", "verdict"),
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
