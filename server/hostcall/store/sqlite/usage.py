"""The SQLite store's model usage (hostcall/store/usage_sql.py)."""

from __future__ import annotations

from hostcall.store import usage_sql as U
from hostcall.store.console_records import UsageRecord, UsageTotal
from hostcall.store.interfaces import ModelUsage
from hostcall.store.sqlite.connection import Part


class UsageTables(Part, ModelUsage):
    async def add_usage(self, record: UsageRecord, *, fence: tuple[str, str] | None = None) -> None:
        # The fence: one process, whose transaction holds the file (see database.py).
        self.db.execute(U.INSERT, U.values(record))

    async def usage_by_day(self, since_day: str) -> list[UsageTotal]:
        return [U.total(r) for r in self.db.execute(U.BY_DAY, (since_day,))]

    async def usage_by_conversation(self, since: float, limit: int) -> list[UsageTotal]:
        return [U.total(r) for r in self.db.execute(U.BY_CONVERSATION, (since, limit))]

    async def usage_of_conversation(self, conversation_id: str) -> UsageTotal | None:
        row = self.db.execute(U.OF_CONVERSATION, (conversation_id,)).fetchone()
        return U.total(row) if row else None

    async def usage_of_run(self, conversation_id: str, run_id: str) -> UsageTotal | None:
        row = self.db.execute(U.OF_RUN, (conversation_id, run_id)).fetchone()
        return U.total(row) if row else None
