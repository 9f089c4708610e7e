"""PostgreSQL going away under a live server, and coming back.

The database sits behind a TCP proxy on loopback (tests/support/proxy.py) that the test
cuts (every connection dropped, new ones refused, as a stopped PostgreSQL does) and
restores. While it is cut, requests fail fast with ``503 store_unavailable`` and a
``Retry-After`` (not a 500, not a 30 s wait for the pool), and ``/healthz`` answers 503
within a second. Once it is back, what was committed goes on: a call waiting for a
decision is decided and its run resumes, and new messages run, without anything sent twice.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg_pool import PoolTimeout

from hostcall.errors import is_store_failure
from hostcall.settings import Settings
from hostcall.store.health import refusal
from tests.support.databases import fresh_schema
from tests.support.harness import SECRET, allow_hosts, planner_definition, write_agent
from tests.support.live import live_server, settings_for
from tests.support.provider import HeldProvider
from tests.support.proxy import CuttableProxy, proxied
from tests.unit.test_bad_input import CREATE
from tests.unit.test_write_failures import LONG, unended

# Slow enough to see a request hang (the pool's default wait was 30 s).
PATIENT = httpx.Timeout(45.0)


@pytest.fixture
def database() -> Iterator[tuple[CuttableProxy, str, str]]:
    """The proxy, the URL through it, and the URL past it."""
    with fresh_schema() as url, proxied(url) as (proxy, through):
        yield proxy, through, url


def timed(
    client: httpx.Client, method: str, url: str, **kwargs: Any
) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = client.request(method, url, timeout=PATIENT, **kwargs)
    return response, time.monotonic() - started


def assert_unavailable(response: httpx.Response, elapsed: float, *, within: float) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "store_unavailable"
    assert int(response.headers["Retry-After"]) > 0
    assert elapsed < within, f"{response.request.url.path} took {elapsed:.1f} s"


def eventually(attempt: Any, *, timeout: float = 20.0) -> Any:
    """``attempt()`` until it returns something true (the database is coming back)."""
    deadline = time.monotonic() + timeout
    while True:
        got = attempt()
        if got:
            return got
        assert time.monotonic() < deadline, f"the server did not recover: {got}"
        time.sleep(0.2)


def test_an_outage_answers_503_fast_and_what_was_committed_goes_on_after(
    tmp_path: Path, database: tuple[CuttableProxy, str, str]
) -> None:
    proxy, url, _ = database
    with live_server(settings_for(tmp_path, database_url=url)) as server:
        assert server.client.get("/healthz").status_code == 200
        conv = server.conversation()
        server.say(conv, CREATE)
        call = next(c for c in server.settle(conv)["calls"] if c.get("decisionToken"))
        decision = f"/api/calls/{call['toolCallId']}/decision"
        messages = f"/api/conversations/{conv.id}/messages"

        proxy.cut()
        health, elapsed = timed(server.client, "GET", "/healthz")
        assert_unavailable(health, elapsed, within=1.0)
        assert health.json()["error"]["details"]["reason"]
        # Every request, not just the first on a dropped connection: then the pool has none
        # to give, and says so in seconds.
        sent, elapsed = timed(
            server.client, "POST", messages, json={"text": "Hello?"}, headers=conv.auth
        )
        assert_unavailable(sent, elapsed, within=5.0)
        decided, elapsed = timed(
            server.client, "POST", decision,
            json={"token": call["decisionToken"], "decision": "approve"},
        )  # fmt: skip
        assert_unavailable(decided, elapsed, within=5.0)
        snap, elapsed = timed(server.client, "GET", f"/api/conversations/{conv.id}",
                              headers=conv.auth)  # fmt: skip
        assert_unavailable(snap, elapsed, within=5.0)
        health, elapsed = timed(server.client, "GET", "/healthz")
        assert_unavailable(health, elapsed, within=1.0)

        proxy.restore()
        eventually(lambda: server.client.get("/healthz").status_code == 200)
        # The decision refused during the outage was not taken: it goes through now, once,
        # and the run it waited on goes on from its committed state.
        reject = {"token": call["decisionToken"], "decision": "reject"}
        decided = eventually(
            lambda: r if (r := server.client.post(decision, json=reject)).status_code != 503
            else None
        )  # fmt: skip
        assert decided.status_code == 200, decided.text
        assert server.client.post(decision, json=reject).status_code == 409
        snap = eventually(lambda: (s := server.snapshot(conv))["run"]["status"] == "finished" and s)
        decided_call = next(c for c in snap["calls"] if c["toolCallId"] == call["toolCallId"])
        assert decided_call["state"] == "rejected"
        # Nothing of the outage got in: one user message (the one sent before), and the
        # messages sent while it lasted, refused with 503, were never stored.
        users = [m["text"] for m in snap["messages"] if m["role"] == "user"]
        assert users == [CREATE], users
        server.say(conv, "What should I work on next?")  # 202: it runs (it reads the board)
        assert server.settle(conv)["run"]["error"] is None


@pytest.fixture
def mid_text() -> Iterator[tuple[HeldProvider, int]]:
    fake = HeldProvider(rest=LONG, hold=10)
    with fake.serving() as port:
        yield fake, port


def test_a_step_cut_off_by_an_outage_ends_with_store_unavailable_once_it_is_back(
    tmp_path: Path,
    database: tuple[CuttableProxy, str, str],
    mid_text: tuple[HeldProvider, int],
) -> None:
    """The step's next append meets the outage (a dropped connection, then the pool's
    PoolTimeout): the run ends with store_unavailable, not internal_error, once the
    database takes the write, and its cut-off message is discarded and ended first."""
    proxy, url, direct = database
    fake, port = mid_text
    data = planner_definition()
    data["model"] = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}
    write_agent(tmp_path / "agents", data, name="planner.json")
    allow_hosts(tmp_path / "agents", data["model"]["base_url"])
    settings = Settings(
        agents_dir=tmp_path / "agents",
        db_path=tmp_path / "hostcall.db",
        secret_keys=SECRET,
        sweep_seconds=0.05,
        environ={},
        database_url=url,
    )
    with live_server(settings) as server:
        conv = server.conversation()
        server.say(conv, "Hello")
        eventually(lambda: _streamed(direct, conv))
        proxy.cut()
        # Requests find the pool's connections dead, and then none: each answers 503 fast.
        snapshot = f"/api/conversations/{conv.id}"
        with ThreadPoolExecutor(8) as requests:
            drained = list(
                requests.map(
                    lambda _: timed(server.client, "GET", snapshot, headers=conv.auth), range(8)
                )
            )
        for response, elapsed in drained:
            assert_unavailable(response, elapsed, within=5.0)
        fake.go.set()
        time.sleep(4.0)  # the step's next append waits for a connection, and gives up
        proxy.restore()

        def failed() -> Any:
            r = server.client.get(f"/api/conversations/{conv.id}", headers=conv.auth)
            return r.status_code == 200 and r.json()["run"]["status"] == "failed" and r.json()

        snap = eventually(failed)
        assert snap["run"]["error"]["code"] == "store_unavailable", snap["run"]
        events = _events(direct, conv)
        names = [name for name, _ in events]
        assert names.count("RUN_ERROR") == 1, names
        assert unended(events) == [], names
        assert LONG not in json.dumps(events)
        fake.go.set()
        server.say(conv, "Hello again")
        assert server.settle(conv)["run"]["status"] == "finished"


def _events(direct: str, conv: Any) -> list[tuple[str, dict[str, Any]]]:
    """The conversation's stored events, read past the proxy (a snapshot's lastEventId
    stops before a message still streaming)."""
    with psycopg.connect(direct) as db:
        rows = db.execute(
            "SELECT data FROM events WHERE conversation_id = %s ORDER BY seq", (conv.id,)
        ).fetchall()
    events = [json.loads(data) for (data,) in rows]
    return [(e["name"], e["value"]) if e["type"] == "CUSTOM" else (e["type"], e) for e in events]


def _streamed(direct: str, conv: Any) -> bool:
    return any(
        name == "TEXT_MESSAGE_CONTENT" and data.get("delta") == "Let me think"
        for name, data in _events(direct, conv)
    )


def test_what_counts_as_the_store_failing() -> None:
    """The pool giving up waiting for a connection is the database failing (503, and a run
    it cuts off ends with store_unavailable), as a dropped connection or a full disk is; a
    bug of ours is not. Only a refusal for want of space or permission marks the store
    unwritable for /healthz."""
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    for exc in (
        PoolTimeout("couldn't get a connection after 3.00 sec"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.errors.DiskFull("could not extend file"),
        full,
    ):
        assert is_store_failure(exc), exc
    for exc in (ValueError("x"), KeyError("y"), AssertionError()):
        assert not is_store_failure(exc), exc
    assert refusal(full) == "database or disk is full"
    assert refusal(psycopg.errors.DiskFull("could not extend file")) == "could not extend file"
    assert refusal(psycopg.errors.ReadOnlySqlTransaction("read-only")) == "read-only"
    assert refusal(PoolTimeout("no connection")) is None
    assert refusal(psycopg.errors.DeadlockDetected("deadlock")) is None
    assert refusal(sqlite3.IntegrityError("UNIQUE constraint failed")) is None
