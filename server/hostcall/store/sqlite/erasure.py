"""The SQLite store's erasure: conversations deleted whole (hostcall/store/erasure.py)."""

from __future__ import annotations

from hostcall.store import erasure
from hostcall.store.interfaces import Erasure
from hostcall.store.sqlite.connection import Part

_ERASE = erasure.statements("?")
_STALE = erasure.stale_conversations("?")
_FORGET = erasure.forget_counters("?")


class ErasureTables(Part, Erasure):
    async def erase_conversation(self, conversation_id: str) -> dict[str, int]:
        deleted: dict[str, int] = {}
        async with self.db.transaction():
            for table, sql, times in _ERASE:
                params = erasure.parameters(table, conversation_id, times)
                deleted[table] = self.db.execute(sql, params).rowcount
        return deleted

    async def forget_counters(self, name: str) -> int:
        return self.db.execute(_FORGET, (erasure.counter_pattern(name),)).rowcount

    async def stale_conversations(self, agent_id: str, before: float, limit: int) -> list[str]:
        return [r["id"] for r in self.db.execute(_STALE, (agent_id, before, limit))]
