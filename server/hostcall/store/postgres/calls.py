"""The PostgreSQL store's calls and grants."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import Calls
from hostcall.store.postgres.connections import Part
from hostcall.store.records import OPEN_STATES, Call, CallState
from hostcall.store.statements import POSTGRES as SQL

_OPEN = rows.states_sql(OPEN_STATES)


class CallTables(Part, Calls):
    async def add_call(self, call: Call) -> None:
        values = rows.call_values(call)
        current = self.db.current()
        if current is not None:
            # Held: it goes out inside the transaction's next statement (a step's: its
            # flush at COMMIT, with the step's events and the run's end).
            await self.db.hold(current, "calls", f"{{p}}call AS ({SQL.insert_call})", values)
            return
        await self.db.run(SQL.insert_call, values)

    async def get_call(self, call_id: str) -> Call | None:
        row = await self.db.one(SQL.call, (call_id,))
        return rows.call(row) if row else None

    async def list_calls(self, conversation_id: str) -> list[Call]:
        return [rows.call(r) for r in await self.db.all(SQL.calls, (conversation_id,))]

    async def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        return [rows.call(r) for r in await self.db.all(SQL.calls_of_step, (run_id, step))]

    async def due_calls(self, now: float) -> list[Call]:
        found = await self.db.all(
            f"SELECT * FROM calls WHERE state IN {_OPEN} AND deadline <= %s ORDER BY deadline",
            (now,),
        )
        return [rows.call(r) for r in found]

    async def count_calls(self, run_id: str, tool_name: str) -> int:
        row = await self.db.one(SQL.count_calls, (run_id, tool_name))
        return int(row["n"]) if row else 0

    async def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        found = await self.db.all(
            f"SELECT * FROM calls WHERE state IN {rows.states_sql(states)} ORDER BY pos"
        )
        return [rows.call(r) for r in found]

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
        assignments = "".join(f", {k} = %s" for k in encoded)
        condition, extra_args = "", []
        if assigned is not None:
            condition = " AND surface_id IS NOT DISTINCT FROM %s AND assignment = %s"
            extra_args = list(assigned)
        row = await self.db.one(
            f"UPDATE calls SET state = %s{assignments} WHERE id = %s"
            f" AND state IN {rows.states_sql(from_states)}" + condition + " RETURNING *",
            (to_state, *encoded.values(), call_id, *extra_args),
            sees_appends=False,
        )
        return rows.call(row) if row else None

    # ---- grants --------------------------------------------------------------------------

    async def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None:
        await self.db.run(
            "INSERT INTO grants (conversation_id, tool_name, call_id) VALUES (%s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (conversation_id, tool_name, call_id),
        )

    async def has_grant(self, conversation_id: str, tool_name: str) -> bool:
        row = await self.db.one(SQL.has_grant, (conversation_id, tool_name), sees_appends=False)
        return row is not None
