"""The PostgreSQL store's attachments (hostcall/store/attachment_sql.py has their SQL)."""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.store import attachment_sql, rows
from hostcall.store.interfaces import Attachments
from hostcall.store.postgres.connections import Part
from hostcall.store.records import Attachment

_pg = attachment_sql.for_postgres
_INSERT = _pg(attachment_sql.INSERT)
_INSERT_BLOB = _pg(attachment_sql.INSERT_BLOB)
_ONE = _pg(attachment_sql.ONE)
_BLOB = _pg(attachment_sql.BLOB)
_OF_CONVERSATION = _pg(attachment_sql.OF_CONVERSATION)
_PURGE_BLOBS = _pg(attachment_sql.PURGE_BLOBS)
_PURGE = _pg(attachment_sql.PURGE)
# Two uploads to one conversation at once must not both fit under its total: the second
# waits on the conversation's row for the first's commit, then sums what it kept.
_LOCK = "SELECT 1 FROM conversations WHERE id = %s FOR UPDATE"


class AttachmentTables(Part, Attachments):
    async def add_attachment(self, attachment: Attachment, data: bytes, *, max_total: int) -> bool:
        a = attachment
        async with self.db.transaction():
            await self.db.one(_LOCK, (a.conversation_id,))
            kept = await self.db.count(
                _INSERT,
                (a.id, a.conversation_id, a.name, a.type, a.size, a.sha256, a.created_at,
                 a.conversation_id, a.size, max_total),
            )  # fmt: skip
            if kept:
                await self.db.run(_INSERT_BLOB, (a.id, data))
        return bool(kept)

    async def get_attachment(self, attachment_id: str) -> Attachment | None:
        row = await self.db.one(_ONE, (attachment_id,))
        return rows.attachment(row) if row is not None else None

    async def attachment_bytes(self, attachment_id: str) -> bytes | None:
        row = await self.db.one(_BLOB, (attachment_id,))
        return bytes(row["bytes"]) if row is not None else None

    async def conversation_attachments(self, conversation_id: str) -> list[Attachment]:
        return [rows.attachment(r) for r in await self.db.all(_OF_CONVERSATION, (conversation_id,))]

    async def claim_attachments(
        self, conversation_id: str, ids: Sequence[str], message_id: str
    ) -> int:
        if not ids:
            return 0
        sql = attachment_sql.claim(len(ids), "%s")
        return await self.db.count(sql, (message_id, conversation_id, *ids))

    async def purge_unsent_attachments(self, before: float) -> int:
        async with self.db.transaction():
            await self.db.run(_PURGE_BLOBS, (before,))
            return await self.db.count(_PURGE, (before,))
