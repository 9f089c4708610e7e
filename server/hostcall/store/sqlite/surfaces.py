"""The SQLite store's surfaces and the streams open on each."""

from __future__ import annotations

from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import Surfaces
from hostcall.store.records import Conversation, Surface
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL

# Migration 6 (sqlite/schema.py): where each call is assigned, and the surfaces.
SURFACES_SCHEMA = """
ALTER TABLE calls ADD COLUMN surface_id TEXT;
ALTER TABLE calls ADD COLUMN assignment INTEGER NOT NULL DEFAULT 0;
CREATE TABLE surfaces (
    conversation_id TEXT NOT NULL, id TEXT NOT NULL, tools TEXT NOT NULL DEFAULT '[]',
    last_active REAL NOT NULL, streams INTEGER NOT NULL DEFAULT 0, detached_at REAL,
    left_page INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation_id, id)
) WITHOUT ROWID;
"""

# Migration 8: which process serves each surface's streams, so the streams of a process
# that died stop counting when its lease lapses (``drop_streams``).
SURFACE_STREAMS_SCHEMA = """
CREATE TABLE surface_streams (
    conversation_id TEXT NOT NULL, surface_id TEXT NOT NULL, owner TEXT NOT NULL,
    streams INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, surface_id, owner)
) WITHOUT ROWID;
CREATE INDEX surface_streams_by_owner ON surface_streams (owner);
"""

# The next migration (schema.py): the page tools each surface holds (Surface.page_tools).
PAGE_TOOLS_SCHEMA = """
ALTER TABLE surfaces ADD COLUMN page_tools TEXT NOT NULL DEFAULT '[]';
"""


class SurfaceTables(Part, Surfaces):
    def _ensure_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        # A new surface starts detached "now": present for the grace period until its
        # stream attaches (the widget says what it handles before it opens the stream).
        self.db.execute(
            "INSERT OR IGNORE INTO surfaces (conversation_id, id, last_active, detached_at)"
            " VALUES (?, ?, ?, ?)",
            (conversation_id, surface_id, now, now),
        )

    async def save_surface_tools(
        self,
        conversation_id: str,
        surface_id: str,
        tools: tuple[str, ...],
        now: float,
        page_tools: tuple[dict[str, Any], ...] = (),
    ) -> bool:
        async with self.db.transaction():
            self._ensure_surface(conversation_id, surface_id, now)
            self.db.execute(
                SQL.save_surface_tools,
                (rows.dump(list(tools)), rows.dump(list(page_tools)), conversation_id, surface_id),
            )
            found = self.db.execute(SQL.calls_to_rehome, (conversation_id,)).fetchone()
            return bool(found["open"])

    async def attach_surface(
        self, conversation_id: str, surface_id: str, now: float, owner: str = ""
    ) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self.db.execute(SQL.attach_surface, (now, conversation_id, surface_id))
        self.db.execute(SQL.count_stream, (conversation_id, surface_id, owner))

    async def detach_surface(
        self, conversation_id: str, surface_id: str, now: float, owner: str = ""
    ) -> None:
        # Only a stream still counted for this owner: once its streams were dropped (the
        # process was taken for dead), a late detach must not count them off twice.
        mine = self.db.execute(SQL.uncount_stream, (conversation_id, surface_id, owner))
        if mine.rowcount != 1:
            return
        self.db.execute(SQL.forget_streams, (conversation_id, surface_id, owner))
        self.db.execute(
            "UPDATE surfaces SET streams = MAX(streams - 1, 0),"
            " detached_at = CASE WHEN streams = 1 THEN ? ELSE detached_at END"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    async def drop_streams(self, owner: str, now: float) -> int:
        counted = self.db.execute(
            "SELECT conversation_id, surface_id, streams FROM surface_streams WHERE owner = ?",
            (owner,),
        ).fetchall()
        for cid, sid, streams in counted:
            self.db.execute(
                "UPDATE surfaces SET streams = MAX(streams - ?, 0),"
                " detached_at = CASE WHEN streams <= ? THEN ? ELSE detached_at END"
                " WHERE conversation_id = ? AND id = ?",
                (streams, streams, now, cid, sid),
            )
        self.db.execute("DELETE FROM surface_streams WHERE owner = ?", (owner,))
        return len(counted)

    async def leave_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self.db.execute(
            "UPDATE surfaces SET left_page = 1, detached_at = ?"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    async def touch_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self.db.execute(
            "UPDATE surfaces SET last_active = MAX(last_active, ?)"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    async def get_surface(self, conversation_id: str, surface_id: str) -> Surface | None:
        row = self.db.execute(SQL.surface, (conversation_id, surface_id)).fetchone()
        return rows.surface(row) if row else None

    async def conversation_with_surfaces(
        self, conversation_id: str
    ) -> tuple[Conversation, list[Surface]] | None:
        row = self.db.execute(SQL.conversation, (conversation_id,)).fetchone()
        if row is None:
            return None
        return rows.conversation(row), await self.list_surfaces(conversation_id)

    async def list_surfaces(self, conversation_id: str) -> list[Surface]:
        return [rows.surface(r) for r in self.db.execute(SQL.surfaces, (conversation_id,))]

    async def reset_surfaces(self, now: float) -> None:
        # One process per SQLite file: at start, every stream it counted is gone.
        self.db.execute(
            "UPDATE surfaces SET streams = 0, detached_at = ? WHERE streams > 0", (now,)
        )
        self.db.execute("DELETE FROM surface_streams")
