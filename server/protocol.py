"""The wire: event types, SSE framing, event ids, and parsing of client JSON.

This is the only module that encodes stream events or decodes request bodies; the rest of
the server passes typed objects. Event names follow AG-UI where the meaning is the same
(https://docs.ag-ui.com/concepts/events); the ``TOOL_CALL_*`` names AG-UI has no
word for are ours and documented in docs/protocol.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request

from server import strictjson
from server.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType


class EventType(StrEnum):
    RUN_STARTED = "RUN_STARTED"
    RUN_FINISHED = "RUN_FINISHED"
    RUN_ERROR = "RUN_ERROR"
    TEXT_MESSAGE_START = "TEXT_MESSAGE_START"
    TEXT_MESSAGE_CONTENT = "TEXT_MESSAGE_CONTENT"
    TEXT_MESSAGE_END = "TEXT_MESSAGE_END"
    TOOL_CALL_START = "TOOL_CALL_START"
    TOOL_CALL_ARGS = "TOOL_CALL_ARGS"
    TOOL_CALL_END = "TOOL_CALL_END"
    TOOL_CALL_RESULT = "TOOL_CALL_RESULT"
    # Ours (AG-UI has no event for a call that waits on a person or a surface):
    TOOL_CALL_APPROVAL_REQUESTED = "TOOL_CALL_APPROVAL_REQUESTED"
    TOOL_CALL_DISPATCH = "TOOL_CALL_DISPATCH"
    TOOL_CALL_STATE = "TOOL_CALL_STATE"
    TOOL_CALL_GUARDRAIL = "TOOL_CALL_GUARDRAIL"


@dataclass(frozen=True)
class Event:
    conversation_id: str
    seq: int
    type: EventType
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return event_id(self.conversation_id, self.seq)

    @functools.cached_property
    def encoded(self) -> str:
        """The JSON of ``data``, computed once however many streams send the event."""
        return encode_data(self.data)


def event_id(conversation_id: str, seq: int) -> str:
    return f"{conversation_id}:{seq}"


def parse_event_id(raw: str, conversation_id: str, last_seq: int) -> int:
    """The sequence number a reconnecting client has seen, checked against this stream."""
    owner, sep, number = raw.strip().rpartition(":")
    if not sep or not (number.isascii() and number.isdigit()) or not owner:
        raise BadRequest(f"Last-Event-ID {raw[:80]!r} is not an event id", code="bad_event_id")
    if owner != conversation_id:
        raise BadRequest(
            f"Last-Event-ID {raw[:80]!r} belongs to another conversation",
            code="foreign_event_id",
        )
    seq = int(number)
    if seq > last_seq:
        raise BadRequest(
            f"Last-Event-ID {raw[:80]!r} is ahead of this conversation's last event "
            f"({event_id(conversation_id, last_seq)})",
            code="bad_event_id",
        )
    return seq


def encode_data(data: dict[str, Any]) -> str:
    # Displayable, not strict: an event stored before strict parsing may hold NaN, and the
    # stream must stay JSON whatever the store holds (issue 7).
    return strictjson.dumps_displayable(data)


def to_sse(event: Event) -> ServerSentEvent:
    return ServerSentEvent(data=event.encoded, event=event.type.value, id=event.id)


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request body as a strict JSON object, refusing more than ``max_bytes`` before
    parsing, and any body not declared ``application/json`` (a cross-origin ``text/plain``
    POST is a "simple request" a foreign page can send without a CORS preflight)."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type and media_type != "application/json":
        raise UnsupportedMediaType(
            f"request body must be application/json, not {media_type[:60]!r}"
        )
    declared = request.headers.get("content-length")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body is {declared} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        return {}
    if not media_type:
        raise UnsupportedMediaType("a request body needs Content-Type: application/json")
    try:
        value = strictjson.loads(body)
    except strictjson.StrictJSONError as exc:
        raise BadRequest(
            f"request body is not valid JSON: {exc.message}",
            code="malformed_json",
            reason=exc.reason,
        ) from None
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object", code="malformed_json")
    return value


def field_str(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"field {name!r} must be a string", field=name)
    return value


def field_object(
    body: dict[str, Any], name: str, *, required: bool = True
) -> dict[str, Any] | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"field {name!r} must be a JSON object", field=name)
    return value
