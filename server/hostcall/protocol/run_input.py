"""AG-UI's ``RunAgentInput`` (the body of ``POST /agui/{agentId}``), decoded into typed objects.

Only what Hostcall acts on is kept: the thread and run ids, the messages (the last user
message starts a run; tool messages answer the calls this client ran), and the names of the
tools the client declares it runs. ``state``, ``context`` and ``forwardedProps`` are accepted
and ignored (docs/protocol.md, "AG-UI endpoint").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hostcall import strictjson
from hostcall.errors import BadRequest
from hostcall.protocol.reading import refuse_unstorable

ROLES = ("developer", "system", "assistant", "user", "tool", "activity", "reasoning")


@dataclass(frozen=True, slots=True)
class InputMessage:
    id: str
    role: str
    text: str  # string content, or the text parts of a list content, joined
    tool_call_id: str | None = None
    error: str | None = None  # a tool message's error: the client's tool failed


@dataclass(frozen=True, slots=True)
class RunAgentInput:
    thread_id: str
    run_id: str
    messages: tuple[InputMessage, ...]
    tools: tuple[str, ...]  # the names of the tools the client runs itself

    @classmethod
    def decode(cls, body: dict[str, Any]) -> RunAgentInput:
        thread_id, run_id = _text(body, "threadId"), _text(body, "runId")
        raw_messages = body.get("messages", [])
        if not isinstance(raw_messages, list):
            raise BadRequest("field 'messages' must be a list", field="messages")
        raw_tools = body.get("tools", [])
        if not isinstance(raw_tools, list):
            raise BadRequest("field 'tools' must be a list", field="tools")
        messages = tuple(_message(m, f"messages[{i}]") for i, m in enumerate(raw_messages))
        tools = tuple(_tool_name(t, f"tools[{i}]") for i, t in enumerate(raw_tools))
        return cls(thread_id, run_id, messages, tools)


def _text(body: dict[str, Any], name: str, where: str = "") -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        field = f"{where}.{name}" if where else name
        raise BadRequest(f"field {field!r} must be a non-empty string", field=field)
    return value


def _message(raw: Any, where: str) -> InputMessage:
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be a JSON object", field=where)
    role = raw.get("role")
    if role not in ROLES:
        raise BadRequest(f"{where}.role must be one of {', '.join(ROLES)}", field=f"{where}.role")
    content = raw.get("content")
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        text = "".join(p for p in parts if isinstance(p, str))
    elif isinstance(content, str) or content is None:
        text = content or ""
    else:
        raise BadRequest(f"{where}.content must be a string or a list", field=f"{where}.content")
    tool_call_id = _text(raw, "toolCallId", where) if role == "tool" else None
    if tool_call_id is not None and "\\u" in text:
        _refuse_unstorable_result(text, f"{where}.content")
    error = raw.get("error")
    if error is not None and not isinstance(error, str):
        raise BadRequest(f"{where}.error must be a string", field=f"{where}.error")
    return InputMessage(_text(raw, "id", where), role, text, tool_call_id, error)


def _refuse_unstorable_result(text: str, where: str) -> None:
    """A tool message's content is the call's output as JSON text (hostcall/agui.py): an
    escape in it can still decode to a NUL or a lone surrogate. Refused before any call of
    the request is answered."""
    try:
        value = strictjson.loads(text)
    except strictjson.StrictJSONError:
        return  # plain text: stored as it is, and the request body held no bad character
    refuse_unstorable(value, "a tool message's content", where)


def _tool_name(raw: Any, where: str) -> str:
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be a JSON object", field=where)
    return _text(raw, "name", where)
