"""The PostgreSQL store's surfaces and the streams open on each."""

from __future__ import annotations

from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import Surfaces
from hostcall.store.postgres.connections import Part
from hostcall.store.records import Conversation, Surface
from hostcall.store.statements import POSTGRES as SQL

# Migration 5 (postgres/schema.py): where each call is assigned, and the surfaces.
SURFACES_SCHEMA = """
ALTER TABLE calls ADD COLUMN surface_id TEXT;
ALTER TABLE calls ADD COLUMN assignment INTEGER NOT NULL DEFAULT 0;
CREATE TABLE surfaces (
    conversation_id TEXT NOT NULL, id TEXT NOT NULL, tools TEXT NOT NULL DEFAULT '[]',
    last_active DOUBLE PRECISION NOT NULL, streams INTEGER NOT NULL DEFAULT 0,
    detached_at DOUBLE PRECISION, left_page BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (conversation_id, id)
);
"""

# Migration 7: which process serves each surface's streams, so the streams of a process
# that died stop counting when its lease lapses (``drop_streams``).
SURFACE_STREAMS_SCHEMA = """
CREATE TABLE surface_streams (
    conversation_id TEXT NOT NULL, surface_id TEXT NOT NULL, owner TEXT NOT NULL,
    streams INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, surface_id, owner)
);
CREATE INDEX surface_streams_by_owner ON surface_streams (owner);
"""

_UPSERT = (
    "INSERT INTO surfaces (conversation_id, id, last_active, detached_at)"
    " VALUES (%s, %s, %s, %s) ON CONFLICT (conversation_id, id) DO NOTHING"
)
# Made if new, changed if not, in one statement each: ``_UPSERT`` and then an UPDATE of
# the same row cost two. A new surface ends as the two left it.
# One statement: the tools saved, and whether a call is there that they may take.
_SAVE_TOOLS = (
    "WITH saved AS ("
    "INSERT INTO surfaces (conversation_id, id, last_active, detached_at, tools, page_tools)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (conversation_id, id)"
    " DO UPDATE SET tools = EXCLUDED.tools, page_tools = EXCLUDED.page_tools) "
    + SQL.calls_to_rehome
)
_ATTACH = (
    "INSERT INTO surfaces (conversation_id, id, last_active, detached_at, streams)"
    " VALUES (%s, %s, %s, NULL, 1) ON CONFLICT (conversation_id, id)"
    " DO UPDATE SET streams = surfaces.streams + 1, detached_at = NULL,"
    " last_active = EXCLUDED.last_active"
)

# A message's session check and its run's page tools, one statement: the conversation, and
# its surfaces as ``SQL.surfaces`` orders them (their rows as JSON, read back by column).
_WITH_SURFACES = (
    "SELECT c.*, (SELECT coalesce(json_agg(s ORDER BY s.last_active DESC), '[]'::json)"
    " FROM surfaces s WHERE s.conversation_id = c.id) AS surfaces_found"
    " FROM conversations c WHERE c.id = %s"
)

# The next migration (schema.py): the page tools each surface holds (Surface.page_tools).
PAGE_TOOLS_SCHEMA = """
ALTER TABLE surfaces ADD COLUMN page_tools TEXT NOT NULL DEFAULT '[]';
"""


class SurfaceTables(Part, Surfaces):
    async def _ensure_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        await self.db.run(_UPSERT, (conversation_id, surface_id, now, now))

    async def save_surface_tools(
        self,
        conversation_id: str,
        surface_id: str,
        tools: tuple[str, ...],
        now: float,
        page_tools: tuple[dict[str, Any], ...] = (),
    ) -> bool:
        tools_json, page_json = rows.dump(list(tools)), rows.dump(list(page_tools))
        values = (conversation_id, surface_id, now, now, tools_json, page_json, conversation_id)
        found = await self.db.one(_SAVE_TOOLS, values, sees_appends=False)
        return bool(found and found["open"])

    async def attach_surface(
        self, conversation_id: str, surface_id: str, now: float, owner: str = ""
    ) -> None:
        await self.db.run(_ATTACH, (conversation_id, surface_id, now))
        await self.db.run(SQL.count_stream, (conversation_id, surface_id, owner))

    async def detach_surface(
        self, conversation_id: str, surface_id: str, now: float, owner: str = ""
    ) -> None:
        # Only a stream still counted for this owner: once its streams were dropped (the
        # process was taken for dead), a late detach must not count them off twice.
        mine = await self.db.count(SQL.uncount_stream, (conversation_id, surface_id, owner))
        if mine != 1:
            return
        await self.db.run(SQL.forget_streams, (conversation_id, surface_id, owner))
        await self.db.run(
            "UPDATE surfaces SET streams = GREATEST(streams - 1, 0),"
            " detached_at = CASE WHEN streams = 1 THEN %s ELSE detached_at END"
            " WHERE conversation_id = %s AND id = %s",
            (now, conversation_id, surface_id),
        )

    async def drop_streams(self, owner: str, now: float) -> int:
        counted = await self.db.all(
            "DELETE FROM surface_streams WHERE owner = %s"
            " RETURNING conversation_id, surface_id, streams",
            (owner,),
        )
        for row in counted:
            await self.db.run(
                "UPDATE surfaces SET streams = GREATEST(streams - %s, 0),"
                " detached_at = CASE WHEN streams <= %s THEN %s ELSE detached_at END"
                " WHERE conversation_id = %s AND id = %s",
                (row["streams"], row["streams"], now, row["conversation_id"], row["surface_id"]),
            )
        return len(counted)

    async def leave_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        await self._ensure_surface(conversation_id, surface_id, now)
        await self.db.run(
            "UPDATE surfaces SET left_page = TRUE, detached_at = %s"
            " WHERE conversation_id = %s AND id = %s",
            (now, conversation_id, surface_id),
        )

    async def touch_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        await self._ensure_surface(conversation_id, surface_id, now)
        await self.db.run(
            "UPDATE surfaces SET last_active = GREATEST(last_active, %s)"
            " WHERE conversation_id = %s AND id = %s",
            (now, conversation_id, surface_id),
        )

    async def get_surface(self, conversation_id: str, surface_id: str) -> Surface | None:
        row = await self.db.one(SQL.surface, (conversation_id, surface_id))
        return rows.surface(row) if row else None

    async def list_surfaces(self, conversation_id: str) -> list[Surface]:
        found = await self.db.all(SQL.surfaces, (conversation_id,), sees_appends=False)
        return [rows.surface(r) for r in found]

    async def conversation_with_surfaces(
        self, conversation_id: str
    ) -> tuple[Conversation, list[Surface]] | None:
        row = await self.db.one(_WITH_SURFACES, (conversation_id,))
        if row is None:
            return None
        return rows.conversation(row), [rows.surface(s) for s in row["surfaces_found"]]

    async def reset_surfaces(self, now: float) -> None:
        # Do not zero the counts here: other processes serve streams of this database too.
        # A process that died loses its streams when its lease lapses (``drop_streams``).
        return None
