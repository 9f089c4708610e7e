"""A message takes its files: in the unit that stores it, so a file is sent by one message
at most, and a message whose file was taken meanwhile (by another tab's message) is not
stored at all."""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.errors import Unprocessable
from hostcall.protocol.codes import ErrorCode
from hostcall.store.interfaces import Attachments
from hostcall.store.records import AttachmentRef


async def take_attachments(
    store: Attachments, conversation_id: str, refs: Sequence[AttachmentRef], message_id: str
) -> None:
    """Each of ``refs`` becomes ``message_id``'s, or ``bad_attachment`` is raised (and the
    caller's unit rolls back, the message with it)."""
    if not refs:
        return
    taken = await store.claim_attachments(conversation_id, [r.id for r in refs], message_id)
    if taken != len(refs):
        raise Unprocessable(
            "an attachment of this message was sent with another message meanwhile; "
            "upload it again",
            code=ErrorCode.BAD_ATTACHMENT,
        )
