"""The SQLite store's attachments (hostcall/store/attachment_sql.py has their SQL)."""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.store import attachment_sql as SQL
from hostcall.store import rows
from hostcall.store.interfaces import Attachments
from hostcall.store.records import Attachment
from hostcall.store.sqlite.connection import Part


class AttachmentTables(Part, Attachments):
    async def add_attachment(self, attachment: Attachment, data: bytes, *, max_total: int) -> bool:
        a = attachment
        async with self.db.transaction():  # the sum and the insert see the same file
            kept = self.db.execute(
                SQL.INSERT,
                (a.id, a.conversation_id, a.name, a.type, a.size, a.sha256, a.created_at,
                 a.conversation_id, a.size, max_total),
            ).rowcount  # fmt: skip
            if kept:
                self.db.execute(SQL.INSERT_BLOB, (a.id, data))
        return bool(kept)

    async def get_attachment(self, attachment_id: str) -> Attachment | None:
        row = self.db.execute(SQL.ONE, (attachment_id,)).fetchone()
        return rows.attachment(row) if row is not None else None

    async def attachment_bytes(self, attachment_id: str) -> bytes | None:
        row = self.db.execute(SQL.BLOB, (attachment_id,)).fetchone()
        return bytes(row["bytes"]) if row is not None else None

    async def conversation_attachments(self, conversation_id: str) -> list[Attachment]:
        return [
            rows.attachment(r) for r in self.db.execute(SQL.OF_CONVERSATION, (conversation_id,))
        ]

    async def claim_attachments(
        self, conversation_id: str, ids: Sequence[str], message_id: str
    ) -> int:
        if not ids:
            return 0
        sql = SQL.claim(len(ids))
        return self.db.execute(sql, (message_id, conversation_id, *ids)).rowcount

    async def purge_unsent_attachments(self, before: float) -> int:
        async with self.db.transaction():
            self.db.execute(SQL.PURGE_BLOBS, (before,))
            return self.db.execute(SQL.PURGE, (before,)).rowcount
