"""The PostgreSQL store's erasure: conversations deleted whole (hostcall/store/erasure.py)."""

from __future__ import annotations

from hostcall.store import erasure
from hostcall.store.interfaces import Erasure
from hostcall.store.postgres.connections import Part

_ERASE = erasure.statements("%s")
_STALE = erasure.stale_conversations("%s")
_FORGET = erasure.forget_counters("%s")


class ErasureTables(Part, Erasure):
    async def erase_conversation(self, conversation_id: str) -> dict[str, int]:
        deleted: dict[str, int] = {}
        async with self.db.transaction():
            for table, sql, times in _ERASE:
                params = erasure.parameters(table, conversation_id, times)
                deleted[table] = await self.db.count(sql, params)
        return deleted

    async def forget_counters(self, name: str) -> int:
        return await self.db.count(_FORGET, (erasure.counter_pattern(name),))

    async def stale_conversations(self, agent_id: str, before: float, limit: int) -> list[str]:
        return [r["id"] for r in await self.db.all(_STALE, (agent_id, before, limit))]
