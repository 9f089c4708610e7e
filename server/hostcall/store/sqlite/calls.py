"""The SQLite store's calls and grants (the interface is in hostcall/store/__init__.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from hostcall.store import rows
from hostcall.store.records import OPEN_STATES, Call, CallState


class CallTables:
    _db: sqlite3.Connection

    async def add_call(self, call: Call) -> None:
        self._db.execute(
            "INSERT INTO calls (id, conversation_id, run_id, step, tool_name, state, input,"
            " arguments, deadline, route, outcome, delivered, extra, surface_id, assignment)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.call_values(call),
        )

    async def get_call(self, call_id: str) -> Call | None:
        row = self._db.execute("SELECT * FROM calls WHERE id = ?", (call_id,)).fetchone()
        return rows.call(row) if row else None

    async def list_calls(self, conversation_id: str) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return [rows.call(r) for r in found]

    async def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE run_id = ? AND step = ? ORDER BY pos", (run_id, step)
        )
        return [rows.call(r) for r in found]

    async def due_calls(self, now: float) -> list[Call]:
        marks = ",".join("?" * len(OPEN_STATES))
        found = self._db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) AND deadline <= ? ORDER BY deadline",
            (*OPEN_STATES, now),
        )
        return [rows.call(r) for r in found]

    async def count_calls(self, run_id: str, tool_name: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM calls WHERE run_id = ? AND tool_name = ?", (run_id, tool_name)
        ).fetchone()
        return int(row[0])

    async def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        wanted = list(states)
        marks = ",".join("?" * len(wanted))
        found = self._db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) ORDER BY pos", wanted
        )
        return [rows.call(r) for r in found]

    async def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO grants (conversation_id, tool_name, call_id) VALUES (?, ?, ?)",
            (conversation_id, tool_name, call_id),
        )

    async def has_grant(self, conversation_id: str, tool_name: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM grants WHERE conversation_id = ? AND tool_name = ?",
            (conversation_id, tool_name),
        ).fetchone()
        return row is not None

    async def transition_call(
        self,
        call_id: str,
        from_states: Iterable[CallState],
        to_state: CallState,
        *,
        assigned: tuple[str | None, int] | None = None,
        **changes: Any,
    ) -> Call | None:
        encoded = rows.call_changes(changes)
        states = list(from_states)
        marks = ",".join("?" * len(states))
        assignments = "".join(f", {k} = ?" for k in encoded)
        condition, extra_args = "", []
        if assigned is not None:
            condition, extra_args = " AND surface_id IS ? AND assignment = ?", list(assigned)
        cursor = self._db.execute(
            f"UPDATE calls SET state = ?{assignments} WHERE id = ? AND state IN ({marks})"
            + condition,
            (to_state, *encoded.values(), call_id, *states, *extra_args),
        )
        if cursor.rowcount != 1:
            return None
        # Read back, not RETURNING: SQLite's RETURNING costs more than this read by key
        # (issue 9: the settling UPDATE is on the result's round trip). Nothing can write in
        # between: one connection, and no await.
        return await self.get_call(call_id)
