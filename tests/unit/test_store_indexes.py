"""The PostgreSQL store's leaner indexes (migration 10): a database migrated from
version 9 keeps every row, every id stays unique, and the sweeper's partial indexes hold
exactly the rows its queries read. PostgreSQL only: SQLite's schema did not change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from hostcall.calls.transitions import OPEN_STATES
from hostcall.store import open_store
from hostcall.store.postgres import database as postgres_module
from hostcall.store.records import Call, CallState, Conversation, Run, RunStatus, StoredMessage
from tests.support.databases import fresh_schema

PLANNER = {"id": "planner", "name": "Planner", "instructions": "Plan.", "tools": []}


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as found:
        yield found


def _rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as db:
        cursor = db.execute(sql, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def _indexes(url: str) -> dict[str, str]:
    return {
        name: definition
        for name, definition in _rows(
            url,
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            " AND tablename IN ('runs', 'calls', 'messages', 'leases')",
        )
    }


def _call(call_id: str, state: CallState, deadline: float) -> Call:
    return Call(call_id, "c1", "r1", 1, "read_board", state, {}, "{}", deadline)


async def test_a_database_at_version_9_keeps_its_rows_and_order_through_the_leaner_indexes(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions = [m.version for m in postgres_module.MIGRATIONS]
    monkeypatch.setattr(postgres_module, "MIGRATIONS", postgres_module.MIGRATIONS[:9])
    old = open_store(url)
    try:
        # Conversations and runs as that schema has them: today's statements name columns
        # added since.
        _rows(url, "INSERT INTO conversations (id, agent_id, created_at) VALUES ('c1', 'p', 1.0)")
        _rows(url, "INSERT INTO agent_definitions VALUES ('d1', %s)", (json.dumps(PLANNER),))
        # Ids in the reverse of their order: the order must come from ``pos``, not the key.
        for run_id, status, step in (("r9", "finished", 2), ("r1", "waiting", 1)):
            _rows(
                url,
                "INSERT INTO runs (id, conversation_id, agent_digest, status, step, simulate)"
                " VALUES (%s, 'c1', 'd1', %s, %s, FALSE)",
                (run_id, status, step),
            )
        await old.add_call(_call("k9", CallState.ANSWERED, 5.0))
        await old.add_call(_call("k1", CallState.DISPATCHED, 6.0))
        for message_id, role, text in (("m9", "user", "first"), ("m1", "assistant", "second")):
            _rows(
                url,
                "INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls)"
                " VALUES (%s, 'c1', 'r1', %s, %s, '[]')",
                (message_id, role, text),
            )
        assert await old.take_lease("run:r1", "gone", 2.0, 1.0)
    finally:
        await old.close()
    assert "runs_by_status" in _indexes(url)
    monkeypatch.undo()

    store = open_store(url)
    try:
        assert store.schema_version == versions[-1]  # type: ignore[attr-defined]
        assert set(_indexes(url)) == {
            "runs_pkey", "runs_by_conversation", "runs_in_progress",
            "calls_pkey", "calls_by_run", "calls_open", "calls_by_conversation",
            "messages_pkey", "messages_by_conversation",
            "leases_pkey",
        }  # fmt: skip
        assert [r.id for r in await store.list_runs("c1")] == ["r9", "r1"]
        assert [c.id for c in await store.list_calls("c1")] == ["k9", "k1"]
        assert [m.text for m in await store.list_messages("c1")] == ["first", "second"]
        assert [r.id for r in await store.runs_with_status(RunStatus.WAITING)] == ["r1"]
        assert [c.id for c in await store.due_calls(10.0)] == ["k1"]
        assert [c.id for c in await store.calls_in_states([CallState.DISPATCHED])] == ["k1"]
        assert await store.expired_leases(3.0) == ["run:r1"]
        # Another process takes the expired lease: an update of its row, with no index on
        # ``until`` left to keep.
        assert await store.take_lease("run:r1", "new", 9.0, 3.0)
        assert await store.expired_leases(3.0) == []
    finally:
        await store.close()


async def test_ids_stay_unique_after_their_key_moved_from_pos(url: str) -> None:
    store = open_store(url)
    try:
        await store.create_conversation(Conversation("c1", "planner", 1.0))
        await store.create_run(Run("r1", "c1", PLANNER, RunStatus.RUNNING))
        await store.add_call(_call("k1", CallState.DISPATCHED, 6.0))
        await store.add_message(StoredMessage("m1", "c1", "r1", "user", "kept"))
        with pytest.raises(psycopg.errors.UniqueViolation):
            await store.create_run(Run("r1", "c1", PLANNER, RunStatus.WAITING))
        with pytest.raises(psycopg.errors.UniqueViolation):
            await store.add_call(_call("k1", CallState.ANSWERED, 7.0))
        with pytest.raises(psycopg.errors.UniqueViolation):
            await store.add_message(StoredMessage("m1", "c1", "r1", "user", "replaced"))
        # Nothing changed: the first of each is there, alone.
        assert [(r.id, r.status) for r in await store.list_runs("c1")] == [
            ("r1", RunStatus.RUNNING)
        ]
        assert [(c.id, c.state) for c in await store.list_calls("c1")] == [
            ("k1", CallState.DISPATCHED)
        ]
        assert [(m.id, m.text) for m in await store.list_messages("c1")] == [("m1", "kept")]
    finally:
        await store.close()


async def test_the_open_calls_index_holds_the_open_states_and_only_those(url: str) -> None:
    # The migration spells the states out (a migration never changes): this says so when
    # OPEN_STATES moves on without a new migration.
    await open_store(url).close()  # migrated as it opened
    definition = _indexes(url)["calls_open"]
    listed = definition.split("WHERE", 1)[1]
    named = {state.value for state in CallState if f"'{state.value}'" in listed}
    assert named == {state.value for state in OPEN_STATES}
    assert "'running'" in _indexes(url)["runs_in_progress"]
    assert "'waiting'" in _indexes(url)["runs_in_progress"]
