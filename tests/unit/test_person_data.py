"""hostcall/visitors/personal_data.py and hostcall/retention.py: a person's data exported and erased
whole, leaving no row in any table of either store, audited; an agent's retention deletes
conversations idle past it, on the sweeper's turn, and nothing younger."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hostcall.visitors.personal_data import erase_person, export_person
from tests.support.databases import store_url
from tests.support.harness import Conv, Harness, planner_definition, write_agent
from tests.unit.test_bad_input import CREATE, READ

TASKS = {"tasks": [{"id": "t1", "title": "Write the report", "status": "todo"}]}


@pytest.fixture(params=["sqlite", "postgres"])
def h(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    with store_url(request.param) as url:
        harness = Harness(tmp_path, agents_dir, database_url=url)
        yield harness
        harness.stop()


def every_row(h: Harness) -> dict[str, list[str]]:
    """Every row of every table of the store, each as one string of all its values."""
    url = h.settings.database_url
    if url is None:
        db = sqlite3.connect(h.settings.db_path)
        try:
            tables = [
                r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            return {t: [repr(r) for r in db.execute(f'SELECT * FROM "{t}"')] for t in tables}
        finally:
            db.close()
    with psycopg.connect(url) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            )
        ]
        return {t: [repr(r) for r in db.execute(f'SELECT * FROM "{t}"')] for t in tables}


def traces(h: Harness, conv: Conv) -> set[str]:
    """The ids a conversation leaves in rows: its own, its runs', calls' and messages'."""
    store = h.runtime.store
    runs = h.call(store.list_runs, conv.id)
    calls = h.call(store.list_calls, conv.id)
    messages = h.call(store.list_messages, conv.id)
    return {conv.id, *(r.id for r in runs), *(c.id for c in calls), *(m.id for m in messages)}


def rows_naming(h: Harness, ids: set[str]) -> dict[str, list[str]]:
    return {
        table: hits
        for table, found in every_row(h).items()
        if (hits := [row for row in found if any(i in row for i in ids)])
    }


def make_persons(h: Harness, conv: Conv, person: str) -> None:
    """The conversation becomes ``person``'s (as adoption does), and ``conv`` holds a session
    token issued to them (one issued before names nobody, and is refused from then on)."""
    store = h.runtime.store
    assert h.call(store.set_person, conv.id, person)
    conversation = h.call(store.get_conversation, conv.id)
    assert conversation is not None
    conv.session = h.runtime.sessions.token(conversation)


def busy_conversation(h: Harness, person: str | None) -> Conv:
    """A conversation that touched every table a conversation can: an answered read, an
    approved write with a grant for the conversation, a surface, audit entries, counters."""
    conv = h.conversation()
    if person is not None:
        make_persons(h, conv, person)
    r = h.http.post(
        f"/api/conversations/{conv.id}/capabilities",
        json={"surfaceId": "s_surface_1", "tools": []},
        headers=conv.auth,
    )
    assert r.status_code == 200, r.text
    h.say(conv, READ)
    assert h.answer(h.open_call(conv, "dispatched"), TASKS).status_code == 200
    h.finish(conv)
    h.say(conv, CREATE)
    call = h.open_call(conv, "awaiting_confirmation")
    assert h.decide(call, "approve", scope="conversation").status_code == 200
    h.settle(conv)
    return conv


def test_erasing_a_person_leaves_no_row_of_theirs_in_any_table(h: Harness) -> None:
    first = busy_conversation(h, "user-42")
    second = busy_conversation(h, "user-42")
    kept = busy_conversation(h, "user-7")
    theirs = traces(h, first) | traces(h, second)
    assert set(rows_naming(h, theirs)) >= {"conversations", "messages", "runs", "calls",
                                            "events", "grants", "surfaces", "audit"}  # fmt: skip
    kept_before = rows_naming(h, traces(h, kept))
    usage_before = len(every_row(h)["model_usage"])
    assert "model_usage" in rows_naming(h, theirs)

    erased = h.call(erase_person, h.runtime.store, "planner", "user-42", actor="admin")

    assert erased.conversations == 2
    assert rows_naming(h, theirs) == {}
    # Model usage stays, detached from them: the agent's tokens and costs add up as before.
    assert len(every_row(h)["model_usage"]) == usage_before
    # Another person's data is untouched, row for row.
    assert rows_naming(h, traces(h, kept)) == kept_before
    # The erasure is audited: who, for whom, how much; nothing of what was erased.
    entry = h.call(h.runtime.store.list_audit)[0]
    assert (entry.actor, entry.action, entry.agent_id) == ("admin", "person.erase", "planner")
    assert entry.details["person"] == "user-42" and entry.details["conversations"] == 2
    assert entry.details["rows"]["messages"] > 0 and entry.conversation_id is None


def test_erasing_drops_the_counters_that_name_the_conversations(h: Harness) -> None:
    conv = busy_conversation(h, "user-42")
    store = h.runtime.store
    key = f"LIMITER/msg-conv/planner/{conv.id}/10/1/minute/60"
    person_key = "LIMITER/msg-person/planner/user-42/10/1/minute/60"
    other_key = "LIMITER/msg-person/planner/user-420/10/1/minute/60"

    async def count() -> None:
        async with store.transaction():
            for k in (key, person_key, other_key):
                assert await store.add_to_counter(k, time.time() // 60 * 60, 1)

    h.call(count)
    h.call(erase_person, store, "planner", "user-42", actor="admin")
    left = every_row(h)["quota_counters"]
    assert not [r for r in left if conv.id in r or "/user-42/" in r]
    assert [r for r in left if "/user-420/" in r]


def test_export_holds_every_conversation_of_the_person_and_is_audited(h: Harness) -> None:
    mine = busy_conversation(h, "user-42")
    busy_conversation(h, "user-7")
    document = h.call(export_person, h.runtime.store, "planner", "user-42", actor="admin")
    json.dumps(document)  # JSON as it is
    assert document["subject"] == "user-42" and document["agentId"] == "planner"
    [conversation] = document["conversations"]
    assert conversation["id"] == mine.id
    texts = [m["text"] for m in conversation["messages"] if m["role"] == "user"]
    assert texts == [READ, CREATE]
    assert {c["toolName"] for c in conversation["calls"]} == {"read_board_tasks", "create_task"}
    seqs = [e["seq"] for e in conversation["events"]]
    assert seqs == list(range(1, len(seqs) + 1))
    entry = h.call(h.runtime.store.list_audit)[0]
    assert (entry.action, entry.details) == ("person.export", {"person": "user-42",
                                                               "conversations": 1})  # fmt: skip


def test_erasing_a_person_with_no_data_erases_nothing_and_says_so(h: Harness) -> None:
    kept = busy_conversation(h, "user-7")
    before = rows_naming(h, traces(h, kept))
    erased = h.call(erase_person, h.runtime.store, "planner", "nobody", actor="admin")
    assert erased.conversations == 0
    assert rows_naming(h, traces(h, kept)) == before


# ---- retention --------------------------------------------------------------------------------


def retained(tmp_path: Path, agents_dir: Path, days: int | None, **db: Any) -> Harness:
    definition = planner_definition()
    if days is not None:
        definition["retention_days"] = days
    write_agent(agents_dir, definition, "planner.json")
    return Harness(tmp_path, agents_dir, **db)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    with store_url(request.param) as url:
        yield {"database_url": url}


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the sweeper did not get there"
        time.sleep(0.02)


def test_the_sweeper_deletes_conversations_idle_past_the_retention_and_no_younger(
    tmp_path: Path, agents_dir: Path, database: dict[str, Any]
) -> None:
    h = retained(tmp_path, agents_dir, 30, **database)
    try:
        old = busy_conversation(h, None)
        old_ids = traces(h, old)
        h.clock.advance(20 * 86400)
        recent = h.conversation()
        h.say(recent, "Hello")
        h.settle(recent)
        h.clock.advance(11 * 86400)  # old: 31 days idle; recent: 11
        wait_for(lambda: h.call(h.runtime.store.get_conversation, old.id) is None)
        assert rows_naming(h, old_ids) == {}
        assert h.call(h.runtime.store.get_conversation, recent.id) is not None
        audit = [a for a in h.call(h.runtime.store.list_audit) if a.actor == "retention"]
        assert [(a.action, a.details["conversations"], a.details["retentionDays"])
                for a in audit] == [("conversations.expire", 1, 30)]  # fmt: skip
    finally:
        h.stop()


def test_a_conversation_written_in_lately_is_kept_however_old(
    tmp_path: Path, agents_dir: Path
) -> None:
    h = retained(tmp_path, agents_dir, 30)
    try:
        conv = h.conversation()
        h.say(conv, "Hello")
        h.settle(conv)
        h.clock.advance(29 * 86400)
        h.say(conv, "Still here")  # a run started in it moves its last activity
        h.settle(conv)
        h.clock.advance(29 * 86400)
        time.sleep(0.3)  # several sweeps at 0.05 s
        assert h.call(h.runtime.store.get_conversation, conv.id) is not None
    finally:
        h.stop()


def test_without_retention_nothing_is_deleted(tmp_path: Path, agents_dir: Path) -> None:
    h = retained(tmp_path, agents_dir, None)
    try:
        conv = h.conversation()
        h.clock.advance(10 * 365 * 86400)
        time.sleep(0.3)
        assert h.call(h.runtime.store.get_conversation, conv.id) is not None
    finally:
        h.stop()


def test_a_bad_retention_is_refused_when_the_agent_is_loaded(tmp_path: Path) -> None:
    from hostcall.agents import parse_agent

    for bad in (0, -1, 1.5, "30", True, 36501):
        definition = {**planner_definition(), "retention_days": bad}
        agent, problems = parse_agent(definition, "planner.json", {})
        assert agent is None
        assert any("'retention_days' must be a whole number" in p for p in problems), problems
