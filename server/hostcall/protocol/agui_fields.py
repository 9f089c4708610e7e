"""An event as the AG-UI endpoint sends it: the fields AG-UI defines for its type, and ours
under ``metadata`` (AG-UI's place for a framework's own data).

The widget's stream carries a few fields of ours beside AG-UI's (a result's ``state`` and
``outcome``, ``RUN_ERROR``'s ``runId``, …: docs/protocol.md marks them *ours*). AG-UI 1.0
drops undeclared properties, and ``@ag-ui/client`` strips them with "[ag-ui][enforce] Removed
unrecognised material" warnings; under ``metadata.hostcall`` it keeps them whole.
"""

from __future__ import annotations

from typing import Any

from hostcall import strictjson
from hostcall.protocol.events import ProtocolEvent, encode
from hostcall.protocol.wire import dumps

METADATA_KEY = "hostcall"

_BASE = frozenset({"type", "timestamp", "rawEvent", "metadata"})
# The fields of each event type, as @ag-ui/core 1.0 declares them (its schemas).
FIELDS: dict[str, frozenset[str]] = {
    name: _BASE | frozenset(fields)
    for name, fields in {
        "RUN_STARTED": {"threadId", "runId", "parentRunId", "input", "protocolVersion"},
        "RUN_FINISHED": {"threadId", "runId", "result", "outcome", "usage"},
        "RUN_ERROR": {"message", "code", "usage"},
        "TEXT_MESSAGE_START": {"messageId", "role", "name"},
        "TEXT_MESSAGE_CONTENT": {"messageId", "delta"},
        "TEXT_MESSAGE_END": {"messageId"},
        "TOOL_CALL_START": {"toolCallId", "toolCallName", "parentMessageId"},
        "TOOL_CALL_ARGS": {"toolCallId", "delta"},
        "TOOL_CALL_END": {"toolCallId"},
        "TOOL_CALL_RESULT": {"messageId", "toolCallId", "content", "role"},
        "CUSTOM": {"name", "value"},
    }.items()
}


def agui_event(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the fields AG-UI does not define for its type moved under
    ``metadata.hostcall``."""
    known = FIELDS.get(data["type"])
    if known is None:
        return data
    ours = {k: v for k, v in data.items() if k not in known}
    if not ours:
        return data
    kept = {k: v for k, v in data.items() if k in known}
    metadata = dict(kept.get("metadata") or {})
    metadata[METADATA_KEY] = {**metadata.get(METADATA_KEY, {}), **ours}
    return {**kept, "metadata": metadata}


def encode_agui(event: ProtocolEvent) -> tuple[str, str]:
    """``events.encode``, in the AG-UI endpoint's shape."""
    name, data = encode(event)
    shaped = agui_event(strictjson.loads(data))
    return name, dumps(shaped)
