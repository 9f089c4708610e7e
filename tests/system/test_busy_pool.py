"""A real Hostcall process on PostgreSQL whose connection pool is busy, not down.

The process runs with a pool of one connection and a short wait for it. A request holds
that connection, blocked on a row lock the test takes in PostgreSQL itself (as a slow
statement, or a CPU too busy to give the connection back, holds it). A run that was
accepted meanwhile needs a connection for its next step: it waits on, and finishes once
the connection comes back. Only an outage fails a run (tests/unit/test_outage.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.databases import fresh_schema
from tests.support.harness import allow_hosts, planner_definition, write_agent
from tests.support.processes import Cluster, Process
from tests.support.provider import HeldProvider

# One connection, and a wait for it far shorter than the lock is held: without waiting on,
# the step would give up after a fifth of a second.
BUSY_POOL = {"HOSTCALL_DB_POOL_SIZE": "1", "HOSTCALL_DB_POOL_WAIT_SECONDS": "0.2"}
ORIGIN = {"Origin": "http://localhost:8001"}
# What the server logs when a run fails, or when a statement waits on for a connection.
FAILED = "failed"
WAITING_ON = "waiting on"


@pytest.fixture
def model() -> Iterator[tuple[HeldProvider, int]]:
    fake = HeldProvider()
    with fake.serving() as port:
        yield fake, port


@pytest.fixture
def busy(tmp_path: Path, model: tuple[HeldProvider, int]) -> Iterator[tuple[Cluster, str]]:
    """A cluster of processes with a one-connection pool, their agent on the fake model;
    and the database's URL."""
    _, port = model
    agents = tmp_path / "agents"
    data = planner_definition()
    data["model"] = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}
    data["limits"] = {}
    write_agent(agents, data, name="planner.json")
    allow_hosts(agents, data["model"]["base_url"])
    with fresh_schema() as url:
        group = Cluster(url, tmp_path, agents=agents, environ=BUSY_POOL)
        try:
            yield group, url
        finally:
            group.close()
            print(group.output())  # shown by pytest when the test failed


def _conversation(client: httpx.Client, process: Process) -> tuple[str, dict[str, str]]:
    created = client.post(f"{process.url}/api/agents/planner/conversations", headers=ORIGIN)
    assert created.status_code == 201, created.text
    body = created.json()
    return body["conversationId"], {"Authorization": f"Bearer {body['sessionToken']}"}


def _until(condition: Callable[[], Any], what: str, *, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := condition()):
        assert time.monotonic() < deadline, f"no {what} in {timeout:g} s"
        time.sleep(0.05)
    return got


def _lock_waiters(url: str) -> int:
    """The backends waiting on a lock: the server's one connection, blocked."""
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_an_accepted_run_waits_for_a_busy_pool_and_finishes(
    busy: tuple[Cluster, str], model: tuple[HeldProvider, int]
) -> None:
    cluster, url = busy
    fake, _ = model
    process = cluster.start()
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(1) as background:
        first, first_auth = _conversation(client, process)
        other, other_auth = _conversation(client, process)
        sent = client.post(f"{process.url}/api/conversations/{first}/messages",
                           json={"text": "Hello"}, headers=first_auth)  # fmt: skip
        assert sent.status_code == 202, sent.text
        # The step streams its first words, then the model holds the rest.
        _until(lambda: fake.asked.is_set(), "model request")
        with psycopg.connect(url) as locker:
            locker.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (other,))
            # A message to the other conversation takes the pool's one connection, and its
            # statement waits for the row lock.
            blocked = background.submit(
                client.post, f"{process.url}/api/conversations/{other}/messages",
                json={"text": "Hello too"}, headers=other_auth,
            )  # fmt: skip
            _until(lambda: _lock_waiters(url) > 0, "request blocked on the lock")
            fake.go.set()  # the step goes on, and needs a connection for what it streamed
            _until(
                lambda: FAILED in (log := process.log.read_text()) or WAITING_ON in log,
                "step waiting on or failing",
            )
            # /metrics shows it: the one connection in use, the step waiting for it.
            waiting = _metrics(client, process)
            assert waiting["hostcall_db_connections_in_use"] == 1.0, waiting
            assert waiting["hostcall_db_connection_waiters"] >= 1.0, waiting
            locker.rollback()
        assert blocked.result().status_code == 202, blocked.result().text
        for conversation, auth in ((first, first_auth), (other, other_auth)):
            run = _until(
                lambda c=conversation, a=auth: (
                    r := client.get(f"{process.url}/api/conversations/{c}", headers=a)
                    .json()["run"]
                )["status"] in ("finished", "failed") and r,
                "run end",
            )  # fmt: skip
            assert run["status"] == "finished", run
        seen = _metrics(client, process)
    assert FAILED not in process.log.read_text()
    assert seen['hostcall_db_pool_waits_total{outcome="busy"}'] >= 1.0, seen
    assert seen.get('hostcall_db_pool_waits_total{outcome="outage"}', 0.0) == 0.0, seen
    assert seen["hostcall_db_connection_waiters"] == 0.0, seen


def _metrics(client: httpx.Client, process: Process) -> dict[str, float]:
    """The pool's samples in the process's /metrics (it answers loopback without a token)."""
    text = client.get(f"{process.url}/metrics").text
    samples = (line.rpartition(" ") for line in text.splitlines() if line.startswith("hostcall_db"))
    return {name: float(value) for name, _, value in samples}


def test_requests_cancelled_at_shutdown_answer_json_not_plain_text(
    busy: tuple[Cluster, str],
) -> None:
    """SIGTERM while requests wait: one holds the pool's connection (blocked on a row lock
    past the graceful shutdown), others wait for it. The server cancels them as it stops;
    each answers the JSON error shape (503, Retry-After), none a plain-text 500."""
    cluster, url = busy
    process = cluster.start()
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(6) as background:
        conversations = [_conversation(client, process) for _ in range(5)]
        blocked, blocked_auth = conversations[0]
        with psycopg.connect(url) as locker:
            locker.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (blocked,))
            sent = background.submit(
                client.post, f"{process.url}/api/conversations/{blocked}/messages",
                json={"text": "Hello"}, headers=blocked_auth,
            )  # fmt: skip
            _until(lambda: _lock_waiters(url) > 0, "request blocked on the lock")
            queued = [
                background.submit(
                    client.get, f"{process.url}/api/conversations/{cid}", headers=auth
                )
                for cid, auth in conversations[1:]
            ]
            _until(
                lambda: WAITING_ON in process.log.read_text() or any(q.done() for q in queued),
                "requests waiting for the connection",
            )
            cluster.stop(process)
            answers = [sent.result(), *(q.result() for q in queued)]
            locker.rollback()
    for answer in answers:
        assert answer.headers["content-type"].startswith("application/json"), (
            answer.status_code,
            answer.text,
        )
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "store_unavailable", answer.text
        assert int(answer.headers["Retry-After"]) > 0
    # The message cancelled at shutdown was not stored: sending it again is safe.
    with psycopg.connect(url) as db:
        row = db.execute("SELECT count(*) FROM messages WHERE conversation_id = %s", (blocked,))
        assert row.fetchone() == (0,)


def test_new_work_is_refused_at_the_door_while_statements_queue_for_the_pool(
    busy: tuple[Cluster, str], model: tuple[HeldProvider, int]
) -> None:
    """With one statement queued for the pool's one connection (its bound here), a new
    conversation and a new message are refused 503 overloaded with Retry-After, and nothing
    is stored; the message accepted before, waiting for the connection, runs to its end;
    and once the queue is gone the same requests are taken."""
    cluster, url = busy
    fake, _ = model
    fake.go.set()  # the model answers at once: only the pool holds anything up
    cluster.environ.update({"HOSTCALL_MAX_DB_WAITERS": "1",
                            "HOSTCALL_BUSY_RETRY_AFTER_SECONDS": "4"})  # fmt: skip
    process = cluster.start()
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(2) as background:
        (held, held_auth), (other, other_auth) = (_conversation(client, process) for _ in "ab")
        with psycopg.connect(url) as locker:
            locker.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (held,))
            # Accepted work: the message takes the one connection and waits on the lock...
            sent = background.submit(
                client.post, f"{process.url}/api/conversations/{held}/messages",
                json={"text": "Hello"}, headers=held_auth,
            )  # fmt: skip
            _until(lambda: _lock_waiters(url) > 0, "request blocked on the lock")
            # ...and a read queues for it behind.
            read = background.submit(
                client.get, f"{process.url}/api/conversations/{other}", headers=other_auth
            )
            _until(
                lambda: _metrics(client, process)["hostcall_db_connection_waiters"] >= 1,
                "a statement queued for the pool",
            )
            stored = _stored(url)
            refused = [
                client.post(f"{process.url}/api/agents/planner/conversations", headers=ORIGIN),
                client.post(
                    f"{process.url}/api/conversations/{other}/messages",
                    json={"text": "Me too"},
                    headers=other_auth,
                ),
            ]
            for answer in refused:
                assert answer.status_code == 503, answer.text
                error = answer.json()["error"]
                assert error["code"] == "overloaded", error
                assert error["details"]["reason"] == "db_waiters", error
                assert answer.headers["Retry-After"] == str(error["details"]["retryAfter"])
            # The bound is 1: the first is told 4 s, the next a second more (4 again if a
            # second went by between them).
            pauses = [int(answer.headers["Retry-After"]) for answer in refused]
            assert pauses[0] == 4 and pauses[1] in (4, 5), pauses
            assert _stored(url) == stored
            locker.rollback()
        assert sent.result().status_code == 202, sent.result().text
        assert read.result().status_code == 200, read.result().text
        run = _until(
            lambda: (
                r := client.get(f"{process.url}/api/conversations/{held}", headers=held_auth)
                .json()["run"]
            )["status"] in ("finished", "failed") and r,
            "run end",
        )  # fmt: skip
        assert run["status"] == "finished", run
        # The queue is gone: the same requests are taken.
        _conversation(client, process)
        again = client.post(f"{process.url}/api/conversations/{other}/messages",
                            json={"text": "Me too"}, headers=other_auth)  # fmt: skip
        assert again.status_code == 202, again.text
    assert FAILED not in process.log.read_text()


def _stored(url: str) -> tuple[int, int]:
    """Conversations and messages in the database."""
    with psycopg.connect(url) as db:
        row = db.execute(
            "SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
