"""A run's agent definition, stored by reference (hostcall/store/definitions.py), on SQLite and
on PostgreSQL alike (conftest's ``store`` fixture)."""

from __future__ import annotations

import importlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hostcall.agents import definition_digest
from hostcall.store import Store, open_store
from hostcall.store.records import Conversation, Run, RunStatus
from hostcall.store.sqlite import SQLiteStore

PLANNER = {"id": "planner", "name": "Planner", "instructions": "Plan. " * 500, "tools": []}
EDITED = {**PLANNER, "instructions": "Plan carefully."}


def _rows(target: str | Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A statement on the store's database from outside the store (``?`` placeholders)."""
    if isinstance(target, Path):
        with sqlite3.connect(target) as db:
            return db.execute(sql, params).fetchall()
    with psycopg.connect(target, autocommit=True) as db:
        cursor = db.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


async def test_runs_of_one_definition_share_one_stored_copy_and_keep_it_after_an_edit(
    store: Store, store_target: str | Path
) -> None:
    await store.create_conversation(Conversation("c1", "planner", 1.0))
    await store.create_run(Run("r1", "c1", PLANNER, RunStatus.RUNNING))
    await store.create_run(
        Run("r2", "c1", PLANNER, RunStatus.RUNNING, agent_digest=definition_digest(PLANNER))
    )
    await store.create_run(Run("r3", "c1", EDITED, RunStatus.WAITING, step=2))
    # Two distinct definitions, two rows: a run stores the digest, not a copy.
    assert _rows(store_target, "SELECT COUNT(*) FROM agent_definitions") == [(2,)]
    assert _rows(store_target, "SELECT agent_digest FROM runs ORDER BY pos") == [
        (definition_digest(PLANNER),),
        (definition_digest(PLANNER),),
        (definition_digest(EDITED),),
    ]
    await store.close()
    # Another process (nothing remembered) reads each run with the definition it started with.
    again = open_store(store_target)
    try:
        runs = await again.list_runs("c1")
        assert [(r.id, r.agent) for r in runs] == [("r1", PLANNER), ("r2", PLANNER), ("r3", EDITED)]
        assert runs[2] == Run("r3", "c1", EDITED, RunStatus.WAITING, step=2)
        assert runs[0].agent_digest == definition_digest(PLANNER)
        # It writes a run of a known definition without a second copy.
        await again.create_run(Run("r4", "c1", EDITED, RunStatus.RUNNING))
        assert _rows(store_target, "SELECT COUNT(*) FROM agent_definitions") == [(2,)]
        assert (await again.get_run("r4")).agent == EDITED  # type: ignore[union-attr]
    finally:
        await again.close()


async def test_a_rolled_back_run_does_not_leave_its_definition_forgotten(
    store: Store, store_target: str | Path
) -> None:
    await store.create_conversation(Conversation("c1", "planner", 1.0))
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.create_run(Run("r1", "c1", PLANNER, RunStatus.RUNNING))
            raise RuntimeError
    assert await store.get_run("r1") is None
    assert _rows(store_target, "SELECT COUNT(*) FROM agent_definitions") == [(0,)]
    # The store must not skip writing it next time on the strength of the rolled-back one.
    await store.create_run(Run("r2", "c1", PLANNER, RunStatus.RUNNING))
    assert _rows(store_target, "SELECT COUNT(*) FROM agent_definitions") == [(1,)]
    await store.close()
    again = open_store(store_target)
    try:
        assert (await again.get_run("r2")).agent == PLANNER  # type: ignore[union-attr]
    finally:
        await again.close()


async def test_runs_stored_with_a_copy_of_their_definition_keep_it_through_the_migration(
    store_target: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(
        "hostcall.store.sqlite.database"
        if isinstance(store_target, Path)
        else "hostcall.store.postgres.database"
    )
    names = [m.name for m in module.MIGRATIONS]
    # A database as the Hostcall before this migration left it: each run holds a copy.
    monkeypatch.setattr(module, "MIGRATIONS", module.MIGRATIONS[: names.index("agent definitions")])
    old = open_store(store_target)
    await old.close()
    # Written as that schema has it: today's statements name columns added since.
    _rows(
        store_target,
        "INSERT INTO conversations (id, agent_id, created_at) VALUES ('c1', 'planner', 1.0)",
    )
    for run_id, agent, status in [
        ("r1", PLANNER, "finished"),
        ("r2", EDITED, "waiting"),
        ("r3", PLANNER, "running"),
    ]:
        _rows(
            store_target,
            "INSERT INTO runs (id, conversation_id, agent, status, step, simulate)"
            " VALUES (?, 'c1', ?, ?, 1, ?)",
            (run_id, json.dumps(agent), status, False),
        )
    monkeypatch.undo()

    store = open_store(store_target)
    try:
        runs = await store.list_runs("c1")
        assert [(r.id, r.agent, r.status, r.step) for r in runs] == [
            ("r1", PLANNER, RunStatus.FINISHED, 1),
            ("r2", EDITED, RunStatus.WAITING, 1),
            ("r3", PLANNER, RunStatus.RUNNING, 1),
        ]
        # One row per distinct copy, and the copies are gone from the runs.
        assert _rows(store_target, "SELECT digest FROM agent_definitions ORDER BY digest") == [
            ("migrated:r1",),
            ("migrated:r2",),
        ]
        columns = (
            [r[1] for r in _rows(store_target, "PRAGMA table_info(runs)")]
            if isinstance(store, SQLiteStore)
            else [
                r[0]
                for r in _rows(
                    store_target,
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_name = 'runs' AND table_schema = current_schema()",
                )
            ]
        )
        assert "agent" not in columns and "agent_digest" in columns
        # A new run of a migrated definition gets its digest (a row of its own), and runs on.
        await store.create_run(Run("r4", "c1", PLANNER, RunStatus.RUNNING))
        assert (await store.get_run("r4")).agent == PLANNER  # type: ignore[union-attr]
    finally:
        await store.close()
