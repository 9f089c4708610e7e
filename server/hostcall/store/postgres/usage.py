"""The PostgreSQL store's model usage (hostcall/store/usage_sql.py), the twin of
sqlite/usage.py."""

from __future__ import annotations

from hostcall.store import usage_sql as U
from hostcall.store.console_records import UsageRecord, UsageTotal
from hostcall.store.interfaces import ModelUsage
from hostcall.store.postgres.connections import Part
from hostcall.store.postgres.held import IF_FENCED

INSERT = U.for_postgres(U.INSERT)
INSERT_IF = U.for_postgres(U.INSERT_IF).replace("{if_fenced}", IF_FENCED)
BY_DAY = U.for_postgres(U.BY_DAY)
BY_CONVERSATION = U.for_postgres(U.BY_CONVERSATION)
OF_CONVERSATION = U.for_postgres(U.OF_CONVERSATION)
OF_RUN = U.for_postgres(U.OF_RUN)


class UsageTables(Part, ModelUsage):
    async def add_usage(self, record: UsageRecord, *, fence: tuple[str, str] | None = None) -> None:
        current = self.db.current()
        if current is None:
            await self.db.run(INSERT, U.values(record))
        elif fence is not None and fence not in current.fenced:
            # Made with the transaction's next fenced append of that lease, inside its
            # statement (a finishing step's last events): no statement of its own.
            ctes = f"{{p}}usage AS ({INSERT_IF})"
            await self.db.hold(current, "usage", ctes, U.values(record), fence=fence,
                             check="{p}usage")  # fmt: skip
        else:
            # Held: it goes out inside the transaction's next statement, or at its end
            # with the appends it defers.
            await self.db.hold(current, "usage", f"{{p}}usage AS ({INSERT})", U.values(record))

    async def usage_by_day(self, since_day: str) -> list[UsageTotal]:
        return [U.total(r) for r in await self.db.all(BY_DAY, (since_day,))]

    async def usage_by_conversation(self, since: float, limit: int) -> list[UsageTotal]:
        return [U.total(r) for r in await self.db.all(BY_CONVERSATION, (since, limit))]

    async def usage_of_conversation(self, conversation_id: str) -> UsageTotal | None:
        row = await self.db.one(OF_CONVERSATION, (conversation_id,))
        return U.total(row) if row else None

    async def usage_of_run(self, conversation_id: str, run_id: str) -> UsageTotal | None:
        row = await self.db.one(OF_RUN, (conversation_id, run_id))
        return U.total(row) if row else None
