"""A message's files as the wire shows them, and the events that write a visitor's message:
written once for the engine (a message that starts a run) and the handoff (one kept for the
person of the team who holds the conversation)."""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.protocol.events import (
    ProtocolEvent,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
)
from hostcall.protocol.responses import MessageAttachment
from hostcall.store.records import AttachmentRef


def attachment_url(conversation_id: str, attachment_id: str) -> str:
    """The path of a file's bytes (``GET``), under the API's base as every route is."""
    return f"/api/conversations/{conversation_id}/attachments/{attachment_id}"


def shown(conversation_id: str, ref: AttachmentRef) -> MessageAttachment:
    url = attachment_url(conversation_id, ref.id)
    return MessageAttachment(ref.id, ref.name, ref.type, ref.size, url)


def shown_all(
    conversation_id: str, refs: Sequence[AttachmentRef]
) -> tuple[MessageAttachment, ...] | None:
    """Every file of a message, or None (the field left out) when it has none."""
    return tuple(shown(conversation_id, r) for r in refs) or None


def user_message(
    conversation_id: str, message_id: str, text: str, refs: Sequence[AttachmentRef] = ()
) -> list[ProtocolEvent]:
    """A visitor's message as events: its start (with its files), its text, its end. A
    message of files alone has no content event: AG-UI refuses an empty delta."""
    start = TextMessageStart(message_id, "user", shown_all(conversation_id, refs))
    content: list[ProtocolEvent] = [TextMessageContent(message_id, text)] if text else []
    return [start, *content, TextMessageEnd(message_id)]
