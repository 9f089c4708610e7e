"""Stored, numbered events and their SSE framing, and the event ids of ``Last-Event-ID``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sse_starlette import ServerSentEvent

from hostcall import strictjson
from hostcall.errors import BadRequest
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.events import CustomName
from hostcall.protocol.numbers import parsed
from hostcall.protocol.wire import dumps


@dataclass(frozen=True, slots=True)
class Event:
    """One event of a conversation's log, as stored and as sent.

    ``encoded`` is the JSON written once when the event was appended; every stream that
    sends the event, live or replayed, sends these same bytes.
    """

    conversation_id: str
    seq: int
    name: str  # the SSE ``event:`` line: the type, or a CUSTOM event's name
    encoded: str

    @property
    def id(self) -> str:
        return event_id(self.conversation_id, self.seq)

    @property
    def data(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.encoded)
        return value


def event_id(conversation_id: str, seq: int) -> str:
    return f"{conversation_id}:{seq}"


def parse_event_id(
    raw: str, conversation_id: str, last_seq: int, *, source: str = "Last-Event-ID"
) -> int:
    """The sequence number a reconnecting client has seen, checked against this stream.

    ``source`` names where the id came from (the header, or the ``after`` query parameter),
    so the error says what the client actually sent.
    """
    owner, sep, number = raw.strip().rpartition(":")
    seq = parsed(number)
    if not sep or seq is None or not owner:
        raise BadRequest(f"{source} {raw[:80]!r} is not an event id", code=ErrorCode.BAD_EVENT_ID)
    if owner != conversation_id:
        raise BadRequest(
            f"{source} {raw[:80]!r} belongs to another conversation",
            code=ErrorCode.FOREIGN_EVENT_ID,
        )
    if seq > last_seq:
        raise BadRequest(
            f"{source} {raw[:80]!r} is ahead of this conversation's last event "
            f"({event_id(conversation_id, last_seq)})",
            code=ErrorCode.BAD_EVENT_ID,
        )
    return seq


def to_sse(event: Event) -> ServerSentEvent:
    return ServerSentEvent(data=event.encoded, event=event.name, id=event.id)


def sse_frame(event: Event) -> bytes:
    """The event's SSE frame, byte for byte what ``to_sse(event).encode()`` gives, in one
    format: sse-starlette's encoder splits every field on line breaks with a regex, a tenth
    of a replay's time. Only text with a line break (none that Hostcall writes: its JSON is
    compact) takes that way."""
    fields = f"{event.conversation_id}{event.name}{event.encoded}"
    if "\n" in fields or "\r" in fields:
        return to_sse(event).encode()
    return (
        f"id: {event.conversation_id}:{event.seq}\r\nevent: {event.name}\r\n"
        f"data: {event.encoded}\r\n\r\n"
    ).encode()


# Older event JSON had no ``type`` and Hostcall's own events were top-level types.
_LEGACY_CUSTOM = {
    "TOOL_CALL_APPROVAL_REQUESTED": CustomName.TOOL_CALL_APPROVAL_REQUESTED,
    "TOOL_CALL_DISPATCH": CustomName.TOOL_CALL_DISPATCH,
    "TOOL_CALL_STATE": CustomName.TOOL_CALL_STATE,
    "TOOL_CALL_GUARDRAIL": CustomName.TOOL_CALL_GUARDRAIL,
}


def stored_event(conversation_id: str, seq: int, name: str, encoded: str) -> Event:
    """An event read back from the store; rows written before events carried ``type`` are
    brought to today's shape, so an old conversation replays as valid AG-UI."""
    if "NaN" in encoded or "Infinity" in encoded:
        encoded = _displayable(encoded)
    if not encoded.startswith('{"type":'):
        data = json.loads(encoded)
        custom = _LEGACY_CUSTOM.get(name)
        if custom is not None:
            name = custom.value
            encoded = dumps({"type": "CUSTOM", "name": name, "value": data})
        else:
            encoded = dumps({"type": name, **data})
    return Event(conversation_id, seq, name, encoded)


def _displayable(encoded: str) -> str:
    """Stored text that is not strict JSON (written by older versions) as strict JSON, its
    non-finite numbers as null: the stream stays JSON whatever the store holds."""
    try:
        strictjson.loads(encoded)
        return encoded  # the words were inside strings
    except strictjson.StrictJSONError:
        return strictjson.dumps_displayable(strictjson.loads_stored(encoded) or {})
