"""Back-pressure at the door (hostcall/door.py), on the real app and a real SQLite file: while
the process has as many steps in flight as its capacity, new conversations, messages,
retries and AG-UI runs are refused with 503 overloaded and Retry-After before anything is
stored; once a step ends, the same requests are taken."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from hostcall.door import DB_WAITERS, SPREAD_MAX, Door
from hostcall.errors import Overloaded, StoreError
from hostcall.settings import Capacity
from tests.support.harness import ORIGIN, Harness, allow_hosts, write_agent
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text

HELLO = {"threadId": "t-1", "runId": "r1", "tools": [],
         "messages": [{"id": "m1", "role": "user", "content": "hello"}]}  # fmt: skip


def _counts(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as con:
        conversations = con.execute("SELECT count(*) FROM conversations").fetchone()[0]
        messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    return conversations, messages


def _until_no_steps(h: Harness, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(h.runtime.engine.tasks):
        assert time.monotonic() < deadline, "the stopped step did not end"
        time.sleep(0.02)


def test_a_full_process_refuses_new_work_before_storing_it_and_takes_it_after(
    tmp_path: Path, agents_dir: Path, provider: FakeProvider
) -> None:
    write_agent(agents_dir, {
        "id": "talker", "name": "Talker",
        "model": {"kind": "openai", "base_url": provider.base_url, "model": "m"},
        "tools": [],
    })  # fmt: skip
    allow_hosts(agents_dir, provider.base_url)
    # The first reply's words come, then the model holds the rest: its step stays in flight.
    provider.replies.append(Reply([text("Let me see"), text("..."), DONE], stall=60))
    provider.replies.append(Reply([text("Hello!"), chunk({}, "stop"), DONE]))
    h = Harness(tmp_path, agents_dir, capacity=Capacity(max_steps_in_flight=1, retry_after=3))
    try:
        busy, waiting = h.conversation("talker"), h.conversation("talker")
        run = h.say(busy, "tell me a story")
        assert len(h.runtime.engine.tasks) == 1
        before = _counts(tmp_path / "hostcall.db")

        refused = [
            h.http.post("/api/agents/talker/conversations", headers=ORIGIN),
            h.http.post(
                f"/api/conversations/{waiting.id}/messages",
                json={"text": "hi"},
                headers=waiting.auth,
            ),
            h.http.post(f"/api/conversations/{waiting.id}/retry", json={}, headers=waiting.auth),
            # The door comes before the message is looked up: any id meets it.
            h.http.post(
                f"/api/conversations/{waiting.id}/messages/m_0/edit",
                json={"text": "hi again"},
                headers=waiting.auth,
            ),
            h.http.post(
                f"/api/conversations/{waiting.id}/messages/m_0/regenerate",
                json={},
                headers=waiting.auth,
            ),
            h.http.post("/agui/talker", json={**HELLO}),
        ]
        for answer in refused:
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            assert error["code"] == "overloaded", error
            assert error["details"]["reason"] == "steps_in_flight", error
            # The bound is 1: the first is told 3 s, the next ones a second later each.
            pause = error["details"]["retryAfter"]
            assert 3 <= pause <= 3 * SPREAD_MAX, error
            assert answer.headers["Retry-After"] == str(pause)
        assert refused[0].json()["error"]["details"]["retryAfter"] == 3
        # Nothing was stored: no conversation, no message, no thread.
        assert _counts(tmp_path / "hostcall.db") == before
        # Work already accepted goes on: the busy conversation still reads and stops.
        assert h.snapshot(busy)["run"]["status"] == "running"
        stopped = h.http.post(f"/api/conversations/{busy.id}/runs/{run}/stop", headers=busy.auth)
        assert stopped.status_code == 200, stopped.text
        _until_no_steps(h)

        h.say(waiting, "hi")
        assert h.finish(waiting)["run"]["status"] == "finished"
        assert h.assistant_texts(waiting) == ["Hello!"]
    finally:
        h.stop()


def test_a_capacity_of_zero_refuses_every_new_conversation(
    tmp_path: Path, agents_dir: Path
) -> None:
    h = Harness(tmp_path, agents_dir, environ={"HOSTCALL_MAX_STEPS_IN_FLIGHT": "0"})
    try:
        answer = h.http.post("/api/agents/planner/conversations", headers=ORIGIN)
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "overloaded"
        assert answer.headers["Retry-After"] == "2"
        assert _counts(tmp_path / "hostcall.db") == (0, 0)
    finally:
        h.stop()


@pytest.mark.parametrize(
    ("name", "raw"),
    [("HOSTCALL_MAX_STEPS_IN_FLIGHT", "-1"), ("HOSTCALL_MAX_DB_WAITERS", "lots"),
     ("HOSTCALL_BUSY_RETRY_AFTER_SECONDS", "0")],
)  # fmt: skip
def test_an_unusable_capacity_setting_is_refused_quoting_it(name: str, raw: str) -> None:
    with pytest.raises(StoreError, match=f"{name}='{raw}'"):
        Capacity.from_environ({name: raw})


def test_capacity_settings_are_read_from_the_environment() -> None:
    read = Capacity.from_environ({
        "HOSTCALL_MAX_STEPS_IN_FLIGHT": "10", "HOSTCALL_MAX_DB_WAITERS": "4",
        "HOSTCALL_BUSY_RETRY_AFTER_SECONDS": "7",
    })  # fmt: skip
    assert read == Capacity(max_steps_in_flight=10, max_db_waiters=4, retry_after=7)
    assert Capacity.from_environ({}) == Capacity()


def _told(door: Door, times: int) -> list[int]:
    pauses = []
    for _ in range(times):
        with pytest.raises(Overloaded) as refused:
            door.admit()
        assert refused.value.reason == DB_WAITERS
        pauses.append(refused.value.retry_after)
    return pauses


def test_a_crowd_refused_together_is_told_to_come_back_a_bound_a_second() -> None:
    """Told the same pause, a crowd comes back together and is refused again, each refusal a
    request paid for: as many as the bound lets in come back each second after it."""
    now = [1000.0]
    door = Door(
        Capacity(max_db_waiters=3, retry_after=2),
        steps=lambda: 0,
        db_waiters=lambda: 3,
        clock=lambda: now[0],
    )
    assert _told(door, 8) == [2, 2, 2, 3, 3, 3, 4, 4]
    now[0] += 0.5  # half a second later: the latest second's last place, then the next
    assert _told(door, 2) == [4, 5]
    # Far past the bound, the pause stops growing at SPREAD_MAX times Retry-After.
    assert _told(door, 30)[-1] == 2 * SPREAD_MAX
    # Once those told have come back, a refusal is told Retry-After again.
    now[0] += 2 * SPREAD_MAX
    assert _told(door, 1) == [2]
