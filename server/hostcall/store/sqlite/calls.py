"""The SQLite store's calls and grants."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import Calls
from hostcall.store.records import OPEN_STATES, Call, CallState
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL


class CallTables(Part, Calls):
    async def add_call(self, call: Call) -> None:
        self.db.execute(SQL.insert_call, rows.call_values(call))

    async def get_call(self, call_id: str) -> Call | None:
        row = self.db.execute(SQL.call, (call_id,)).fetchone()
        return rows.call(row) if row else None

    async def list_calls(self, conversation_id: str) -> list[Call]:
        return [rows.call(r) for r in self.db.execute(SQL.calls, (conversation_id,))]

    async def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        return [rows.call(r) for r in self.db.execute(SQL.calls_of_step, (run_id, step))]

    async def due_calls(self, now: float) -> list[Call]:
        marks = ",".join("?" * len(OPEN_STATES))
        found = self.db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) AND deadline <= ? ORDER BY deadline",
            (*OPEN_STATES, now),
        )
        return [rows.call(r) for r in found]

    async def count_calls(self, run_id: str, tool_name: str) -> int:
        row = self.db.execute(SQL.count_calls, (run_id, tool_name)).fetchone()
        return int(row[0])

    async def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        wanted = list(states)
        marks = ",".join("?" * len(wanted))
        found = self.db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) ORDER BY pos", wanted
        )
        return [rows.call(r) for r in found]

    async def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO grants (conversation_id, tool_name, call_id) VALUES (?, ?, ?)",
            (conversation_id, tool_name, call_id),
        )

    async def has_grant(self, conversation_id: str, tool_name: str) -> bool:
        row = self.db.execute(SQL.has_grant, (conversation_id, tool_name)).fetchone()
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
        cursor = self.db.execute(
            f"UPDATE calls SET state = ?{assignments} WHERE id = ? AND state IN ({marks})"
            + condition,
            (to_state, *encoded.values(), call_id, *states, *extra_args),
        )
        if cursor.rowcount != 1:
            return None
        # Read back, not RETURNING: SQLite's RETURNING costs more than this read by key
        # (the settling UPDATE is on the result's round trip). Nothing can write in
        # between: one connection, and no await.
        return await self.get_call(call_id)
