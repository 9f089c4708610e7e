"""The console's audit log as the console's routes reach it: an action recorded
(hostcall/console/audit.py says which), a page of the log read."""

from __future__ import annotations

from hostcall.store.console_records import AuditEntry
from hostcall.store.interfaces import Audit


class AuditService:
    def __init__(self, store: Audit) -> None:
        self.store = store

    async def add_audit(self, entry: AuditEntry) -> AuditEntry:
        """The entry, stored with its new id."""
        return await self.store.add_audit(entry)

    async def page(self, *, limit: int, before: int | None) -> list[AuditEntry]:
        """The log newest first, ids below ``before``."""
        return await self.store.list_audit(limit=limit, before=before)
