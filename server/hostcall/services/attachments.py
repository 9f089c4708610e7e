"""A visitor's files as use cases: an upload checked and kept (docs/protocol.md ``POST
/api/conversations/{id}/attachments``), its bytes read back by the conversation's session,
and the files a message may send."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from hostcall.attachments.admission import decide
from hostcall.attachments.policy import MB, AttachmentPolicy
from hostcall.errors import NotFound, Unprocessable
from hostcall.ledger import new_id
from hostcall.protocol.codes import ErrorCode
from hostcall.store.interfaces import Attachments
from hostcall.store.records import Attachment, AttachmentRef, Conversation


class AttachmentService:
    def __init__(self, store: Attachments, *, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    async def upload(
        self, conversation: Conversation, policy: AttachmentPolicy, name: str, data: bytes
    ) -> Attachment:
        """Keep the file if its content is one of the agent's types, within its size and
        the conversation's total; else refuse it, keeping nothing."""
        kind = decide(policy, name, data)
        attachment = Attachment(
            id=new_id("f"),
            conversation_id=conversation.id,
            name=name,
            type=kind,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            created_at=self.clock(),
        )
        if not await self.store.add_attachment(attachment, data, max_total=policy.max_total_bytes):
            raise Unprocessable(
                f"this conversation's files would weigh more than "
                f"{policy.max_total_bytes // MB} MB, the most its agent keeps; start a new "
                "conversation to send more",
                code=ErrorCode.ATTACHMENT_QUOTA,
                limit=policy.max_total_bytes,
            )
        return attachment

    async def read(
        self, conversation: Conversation, attachment_id: str
    ) -> tuple[Attachment, bytes]:
        """A file of this conversation and its bytes; another conversation's is not found."""
        found = await self.store.get_attachment(attachment_id)
        data = await self.store.attachment_bytes(attachment_id) if found else None
        if found is None or found.conversation_id != conversation.id or data is None:
            raise NotFound(
                f"no attachment {attachment_id[:80]!r} in this conversation",
                code=ErrorCode.UNKNOWN_ATTACHMENT,
            )
        return found, data

    async def sendable(
        self, conversation_id: str, policy: AttachmentPolicy | None, ids: Sequence[str]
    ) -> tuple[AttachmentRef, ...]:
        """The files a message may send: at most the agent's ``max_files``, each uploaded to
        this conversation and not sent yet (a message's unit takes them for good)."""
        if not ids:
            return ()
        if policy is None:
            raise Unprocessable(
                "this agent takes no attachments (its file has no attachments block)",
                code=ErrorCode.ATTACHMENTS_NOT_ALLOWED,
            )
        if len(ids) > policy.max_files:
            raise _bad(f"a message may carry {policy.max_files} files at most; this has {len(ids)}")
        if len(set(ids)) != len(ids):
            raise _bad("the same attachment is given twice")
        refs: list[AttachmentRef] = []
        for attachment_id in ids:
            found = await self.store.get_attachment(attachment_id)
            if found is None or found.conversation_id != conversation_id:
                raise _bad(f"no attachment {attachment_id[:80]!r} in this conversation",
                           attachment=attachment_id[:80])  # fmt: skip
            if found.message_id is not None:
                raise _bad(f"attachment {attachment_id} was sent already; upload it again",
                           attachment=attachment_id)  # fmt: skip
            refs.append(found.ref())
        return tuple(refs)

    async def of_conversation(self, conversation_id: str) -> list[Attachment]:
        return await self.store.conversation_attachments(conversation_id)


def _bad(message: str, **details: str) -> Unprocessable:
    return Unprocessable(message, code=ErrorCode.BAD_ATTACHMENT, **details)
