"""What models cost, as the console's usage pages read it (written by hostcall/runs/usage.py
with each step)."""

from __future__ import annotations

from hostcall.store.console_records import UsageTotal
from hostcall.store.interfaces import ModelUsage


class UsageService:
    def __init__(self, store: ModelUsage) -> None:
        self.store = store

    async def by_day(self, since_day: str) -> list[UsageTotal]:
        """Totals per (day, agent) from ``since_day`` (YYYY-MM-DD, UTC), newest day first."""
        return await self.store.usage_by_day(since_day)

    async def by_conversation(self, since: float, limit: int) -> list[UsageTotal]:
        """The costliest conversations' totals since ``since``."""
        return await self.store.usage_by_conversation(since, limit)

    async def of_conversation(self, conversation_id: str) -> UsageTotal | None:
        return await self.store.usage_of_conversation(conversation_id)
