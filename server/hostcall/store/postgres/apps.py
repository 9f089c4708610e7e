"""The PostgreSQL store's MCP App views of calls (the twin of sqlite/apps.py)."""

from __future__ import annotations

from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import CallApps
from hostcall.store.postgres.connections import Part
from hostcall.store.records import CallApp

APPS_SCHEMA = """
CREATE TABLE call_apps (
    call_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, server TEXT NOT NULL,
    resource_uri TEXT NOT NULL, html TEXT, meta TEXT NOT NULL, failed TEXT, context TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX call_apps_by_conversation ON call_apps (conversation_id, created_at);
"""


class AppTables(Part, CallApps):
    async def add_call_app(self, app: CallApp) -> None:
        await self.db.count(
            "INSERT INTO call_apps (call_id, conversation_id, server, resource_uri, html, meta,"
            " failed, context, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (call_id) DO NOTHING",
            rows.call_app_values(app),
        )

    async def get_call_app(self, call_id: str) -> CallApp | None:
        row = await self.db.one("SELECT * FROM call_apps WHERE call_id = %s", (call_id,))
        return rows.call_app(row) if row else None

    async def set_app_context(self, call_id: str, context: dict[str, Any]) -> bool:
        changed = await self.db.count(
            "UPDATE call_apps SET context = %s WHERE call_id = %s AND failed IS NULL",
            (rows.dump(context), call_id),
        )
        return changed > 0

    async def app_contexts(self, conversation_id: str) -> list[CallApp]:
        found = await self.db.all(
            "SELECT * FROM call_apps WHERE conversation_id = %s AND context IS NOT NULL"
            " ORDER BY created_at, call_id",
            (conversation_id,),
        )
        return [rows.call_app(r) for r in found]
