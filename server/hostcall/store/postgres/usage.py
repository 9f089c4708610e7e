"""The PostgreSQL store's model usage (hostcall/store/usage_sql.py), the twin of
sqlite/usage.py."""

from __future__ import annotations

from hostcall.store import usage_sql as U
from hostcall.store.interfaces import ModelUsage
from hostcall.store.postgres.connections import PostgresConnections
from hostcall.store.records import UsageRecord, UsageTotal

INSERT = U.for_postgres(U.INSERT)
BY_DAY = U.for_postgres(U.BY_DAY)
BY_CONVERSATION = U.for_postgres(U.BY_CONVERSATION)
OF_CONVERSATION = U.for_postgres(U.OF_CONVERSATION)
OF_RUN = U.for_postgres(U.OF_RUN)


class UsageTables(PostgresConnections, ModelUsage):
    async def add_usage(self, record: UsageRecord) -> None:
        current = self._current()
        if current is not None:
            # In the step's unit: held, it goes out inside the unit's next statement and
            # costs no round trip of its own.
            await self._hold(current, "usage", f"{{p}}usage AS ({INSERT})", U.values(record))
            return
        await self._run(INSERT, U.values(record))

    async def usage_by_day(self, since_day: str) -> list[UsageTotal]:
        return [U.total(r) for r in await self._all(BY_DAY, (since_day,))]

    async def usage_by_conversation(self, since: float, limit: int) -> list[UsageTotal]:
        return [U.total(r) for r in await self._all(BY_CONVERSATION, (since, limit))]

    async def usage_of_conversation(self, conversation_id: str) -> UsageTotal | None:
        row = await self._one(OF_CONVERSATION, (conversation_id,))
        return U.total(row) if row else None

    async def usage_of_run(self, conversation_id: str, run_id: str) -> UsageTotal | None:
        row = await self._one(OF_RUN, (conversation_id, run_id))
        return U.total(row) if row else None
