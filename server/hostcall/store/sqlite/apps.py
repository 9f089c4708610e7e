"""The SQLite store's MCP App views of calls (records.CallApp)."""

from __future__ import annotations

from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import CallApps
from hostcall.store.records import CallApp
from hostcall.store.sqlite.connection import Part

# A view's HTML (capped at hostcall/apps/resources.py's MAX_VIEW_BYTES) and its _meta.ui,
# one row per call; ``context`` is the view's last update of the model's context.
APPS_SCHEMA = """
CREATE TABLE call_apps (
    call_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, server TEXT NOT NULL,
    resource_uri TEXT NOT NULL, html TEXT, meta TEXT NOT NULL, failed TEXT, context TEXT,
    created_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX call_apps_by_conversation ON call_apps (conversation_id, created_at);
"""


class AppTables(Part, CallApps):
    async def add_call_app(self, app: CallApp) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO call_apps (call_id, conversation_id, server, resource_uri,"
            " html, meta, failed, context, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.call_app_values(app),
        )

    async def get_call_app(self, call_id: str) -> CallApp | None:
        row = self.db.execute("SELECT * FROM call_apps WHERE call_id = ?", (call_id,)).fetchone()
        return rows.call_app(row) if row else None

    async def set_app_context(self, call_id: str, context: dict[str, Any]) -> bool:
        changed = self.db.execute(
            "UPDATE call_apps SET context = ? WHERE call_id = ? AND failed IS NULL",
            (rows.dump(context), call_id),
        )
        return changed.rowcount > 0

    async def app_contexts(self, conversation_id: str) -> list[CallApp]:
        found = self.db.execute(
            "SELECT * FROM call_apps WHERE conversation_id = ? AND context IS NOT NULL"
            " ORDER BY created_at, call_id",
            (conversation_id,),
        )
        return [rows.call_app(r) for r in found]
