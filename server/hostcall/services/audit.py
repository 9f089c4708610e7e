"""The console's audit log as the console's routes reach it: an action recorded
(hostcall/console/audit.py says which), a page of the log read."""

from __future__ import annotations

from hostcall.engine import Engine
from hostcall.store.interfaces import Audit
from hostcall.store.records import AuditEntry


class AuditService:
    def __init__(self, engine: Engine) -> None:
        self.store: Audit = engine.journal.store

    async def add_audit(self, entry: AuditEntry) -> AuditEntry:
        """The entry, stored with its new id."""
        return await self.store.add_audit(entry)

    async def page(self, *, limit: int, before: int | None) -> list[AuditEntry]:
        """The log newest first, ids below ``before``."""
        return await self.store.list_audit(limit=limit, before=before)
