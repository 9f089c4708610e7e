"""AG-UI's ``RunAgentInput`` (the body of ``POST /agui/{agentId}``), decoded into typed objects.

Only what Hostcall acts on is kept: the thread and run ids, the messages (the last user
message starts a run; tool messages answer the calls this client ran), and the names of the
tools the client declares it runs, and its ``context`` entries (``{description, value}``:
the page's context, admitted by the agent as the widget's is: hostcall/page_context.py).
A user message's content may be a list of AG-UI ``InputContent`` parts: its ``text`` parts
make its text, its ``image``, ``audio``, ``video`` and ``document`` parts (and the older
``binary``) its files (``InputFile``), decoded here and admitted as an upload is
(hostcall/agui_files.py). ``resume`` answers the interrupts a run ended with (AG-UI's
interrupt-aware lifecycle: hostcall/interrupts.py). ``state`` and ``forwardedProps`` are
accepted and ignored (docs/protocol.md, "AG-UI endpoint").

Text no store can hold (a NUL, a lone surrogate) refuses the whole request, before anything
is done, except in a tool message's content or error: that is the client's tool answering a
call the run waits for, and refusing the request would leave the call waiting (the thread
answering ``409`` until its deadline) for a client that will not send it again. The message
says so instead (``InputMessage.unstorable``), and the call fails with it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from hostcall import strictjson
from hostcall.errors import BadRequest
from hostcall.protocol.page_tool import PageTool
from hostcall.protocol.reading import refuse_unstorable, unstorable_what

ROLES = ("developer", "system", "assistant", "user", "tool", "activity", "reasoning")
# AG-UI's InputContent parts that carry a file (``source``), and the older one that may.
FILE_PARTS = ("image", "audio", "video", "document")
BINARY_PART = "binary"


@dataclass(frozen=True, slots=True)
class InputFile:
    """A file part of a user message: its bytes (a ``data`` source, decoded), or where it
    says they are (a ``url`` source, or a binary part's ``url`` or ``id``), which is never
    fetched. ``mime_type`` is the client's word, which decides nothing."""

    kind: str  # the part's type: image, audio, video, document or binary
    where: str  # "messages[3].content[1]", for a refusal
    mime_type: str = ""
    data: bytes | None = None
    url: str | None = None
    id: str | None = None
    name: str | None = None  # a binary part's ``filename``, or its metadata's


@dataclass(frozen=True, slots=True)
class InputMessage:
    id: str
    role: str
    text: str  # string content, or the text parts of a list content, joined
    tool_call_id: str | None = None
    error: str | None = None  # a tool message's error: the client's tool failed
    # What a tool message's content or error holds that cannot be stored ("a NUL character
    # (in messages[2].content)"; then text and error are empty): the call it answers fails.
    unstorable: str | None = None
    # A user message's file parts, in order.
    files: tuple[InputFile, ...] = ()


class ResumeStatus(StrEnum):
    """AG-UI's ``resume[].status``."""

    RESOLVED = "resolved"
    CANCELLED = "cancelled"  # the person dismissed it without an answer


RESUME_STATUSES = tuple(s.value for s in ResumeStatus)


@dataclass(frozen=True, slots=True)
class ResumeEntry:
    """One answer of ``resume``: to the interrupt ``interrupt_id``, ``resolved`` with its
    ``payload`` or ``cancelled``. ``metadata`` is the envelope (a decision token)."""

    interrupt_id: str
    status: ResumeStatus
    payload: Any = None
    metadata: dict[str, Any] | None = None
    where: str = "resume"


@dataclass(frozen=True, slots=True)
class RunAgentInput:
    thread_id: str
    run_id: str
    messages: tuple[InputMessage, ...]
    tools: tuple[str, ...]  # the names of the tools the client runs itself
    # Its ``context``: (description, value) pairs, in order, as sent.
    context: tuple[tuple[str, Any], ...] = ()
    # Its tools as page tools (``{name, description, parameters}``): those the agent file
    # does not define are admitted by its ``page_tools`` block (hostcall/page_tools.py).
    definitions: tuple[PageTool, ...] = ()
    resume: tuple[ResumeEntry, ...] = ()

    @classmethod
    def decode(cls, body: dict[str, Any]) -> RunAgentInput:
        thread_id, run_id = _text(body, "threadId"), _text(body, "runId")
        raw_messages = body.get("messages", [])
        if not isinstance(raw_messages, list):
            raise BadRequest("field 'messages' must be a list", field="messages")
        raw_tools = body.get("tools", [])
        if not isinstance(raw_tools, list):
            raise BadRequest("field 'tools' must be a list", field="tools")
        refuse_unstorable(_without_tool_results(body, raw_messages), "request body")
        messages = tuple(_message(m, f"messages[{i}]") for i, m in enumerate(raw_messages))
        definitions = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(raw_tools))
        tools = tuple(t.name for t in definitions)
        raw_context = body.get("context", [])
        if not isinstance(raw_context, list):
            raise BadRequest("field 'context' must be a list", field="context")
        context = tuple(_context(c, f"context[{i}]") for i, c in enumerate(raw_context))
        raw_resume = body.get("resume", [])
        if not isinstance(raw_resume, list):
            raise BadRequest("field 'resume' must be a list", field="resume")
        resume = tuple(_resume(r, f"resume[{i}]") for i, r in enumerate(raw_resume))
        ids = [r.interrupt_id for r in resume]
        if len(set(ids)) != len(ids):
            raise BadRequest("field 'resume' answers one interrupt twice", field="resume")
        return cls(thread_id, run_id, messages, tools, context, definitions, resume)


def _text(body: dict[str, Any], name: str, where: str = "") -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        field = f"{where}.{name}" if where else name
        raise BadRequest(f"field {field!r} must be a non-empty string", field=field)
    return value


def _context(raw: Any, where: str) -> tuple[str, Any]:
    if not isinstance(raw, dict) or "value" not in raw:
        raise BadRequest(f"{where} must be an object with a description and a value", field=where)
    return _text(raw, "description", where), raw["value"]


def _resume(raw: Any, where: str) -> ResumeEntry:
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be a JSON object", field=where)
    status = raw.get("status")
    if status not in RESUME_STATUSES:
        field = f"{where}.status"
        raise BadRequest(f"{field} must be one of {', '.join(RESUME_STATUSES)}", field=field)
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRequest(f"{where}.metadata must be an object", field=f"{where}.metadata")
    interrupt_id = _text(raw, "interruptId", where)
    return ResumeEntry(interrupt_id, ResumeStatus(status), raw.get("payload"), metadata, where)


def _message(raw: Any, where: str) -> InputMessage:
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be a JSON object", field=where)
    role = raw.get("role")
    if role not in ROLES:
        raise BadRequest(f"{where}.role must be one of {', '.join(ROLES)}", field=f"{where}.role")
    content = raw.get("content")
    files: tuple[InputFile, ...] = ()
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        text = "".join(p for p in parts if isinstance(p, str))
        if role == "user":
            files = tuple(
                _file(p, f"{where}.content[{i}]")
                for i, p in enumerate(content)
                if isinstance(p, dict) and p.get("type") in (*FILE_PARTS, BINARY_PART)
            )
    elif isinstance(content, str) or content is None:
        text = content or ""
    else:
        raise BadRequest(f"{where}.content must be a string or a list", field=f"{where}.content")
    tool_call_id = _text(raw, "toolCallId", where) if role == "tool" else None
    error = raw.get("error")
    if error is not None and not isinstance(error, str):
        raise BadRequest(f"{where}.error must be a string", field=f"{where}.error")
    message = InputMessage(_text(raw, "id", where), role, text, tool_call_id, error, files=files)
    if tool_call_id is None:
        return message
    unstorable = _unstorable_result(text, error, where)
    if unstorable is None:
        return message
    return InputMessage(message.id, role, "", tool_call_id, None, unstorable)


def _file(raw: dict[str, Any], where: str) -> InputFile:
    """One file part: ``{type, source: {type: "data"|"url", value, mimeType}, metadata}``, or
    the older ``{type: "binary", mimeType, data|url|id, filename}``."""
    kind = raw["type"]
    metadata = raw.get("metadata")
    named = metadata.get("filename") or metadata.get("name") if isinstance(metadata, dict) else None
    if kind == BINARY_PART:
        mime = raw.get("mimeType")
        data, url, ident = raw.get("data"), raw.get("url"), raw.get("id")
        name = raw.get("filename") or named
        if not isinstance(mime, str) or not any(
            isinstance(v, str) and v for v in (data, url, ident)
        ):
            raise BadRequest(
                f"{where}: a binary part needs its mimeType and one of data, url or id",
                field=where,
            )
        return InputFile(kind, where, mime, _decoded(data, f"{where}.data") if data else None,
                         url if isinstance(url, str) and url else None,
                         ident if isinstance(ident, str) and ident else None,
                         name if isinstance(name, str) else None)  # fmt: skip
    source = raw.get("source")
    if not isinstance(source, dict) or source.get("type") not in ("data", "url"):
        raise BadRequest(f"{where}.source must be a data or a url source", field=f"{where}.source")
    value = source.get("value")
    mime = source.get("mimeType", "")
    if not isinstance(value, str) or not value or not isinstance(mime, str):
        raise BadRequest(f"{where}.source needs its value (and mimeType, a string)",
                         field=f"{where}.source")  # fmt: skip
    name = named if isinstance(named, str) else None
    if source["type"] == "url":
        return InputFile(kind, where, mime, url=value, name=name)
    return InputFile(kind, where, mime, _decoded(value, f"{where}.source.value"), name=name)


def _decoded(value: Any, where: str) -> bytes:
    try:
        if not isinstance(value, str):
            raise ValueError
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        raise BadRequest(f"{where} is not base64", field=where) from None


def _without_tool_results(body: dict[str, Any], messages: list[Any]) -> dict[str, Any]:
    """``body`` with its tool messages' content and error emptied (checked on their own), and
    its file parts' base64 too: decoding refuses any character that is not base64, and a
    walk over megabytes of it would hold the event loop for nothing."""
    emptied = [
        {**m, "content": "", "error": None} if isinstance(m, dict) and m.get("role") == "tool"
        else {**m, "content": [_without_data(p) for p in m["content"]]}
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        else m
        for m in messages
    ]  # fmt: skip
    return {**body, "messages": emptied}


def _without_data(part: Any) -> Any:
    if not isinstance(part, dict) or part.get("type") not in (*FILE_PARTS, BINARY_PART):
        return part
    source = part.get("source")
    if isinstance(source, dict) and source.get("type") == "data":
        part = {**part, "source": {**source, "value": ""}}
    return {**part, "data": ""} if "data" in part else part


def _unstorable_result(text: str, error: str | None, where: str) -> str | None:
    """Why a tool message's content or error cannot be stored, or None. The content is the
    call's output as JSON text (hostcall/agui.py): an escape in it can decode to a NUL or a
    lone surrogate too."""
    found = strictjson.unstorable(text, f"{where}.content") or strictjson.unstorable(
        error, f"{where}.error"
    )
    if found is None and "\\u" in text:
        try:
            found = strictjson.unstorable(strictjson.loads(text), f"{where}.content")
        except strictjson.StrictJSONError:
            pass  # plain text, and none of its characters is unstorable
    if found is None:
        return None
    field, reason = found
    return unstorable_what(reason, field)


def _tool(raw: Any, where: str) -> PageTool:
    """AG-UI's ``Tool``: ``{name, description, parameters}`` (a JSON Schema)."""
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be a JSON object", field=where)
    name = _text(raw, "name", where)
    description = raw.get("description") or ""
    parameters = raw.get("parameters") or {"type": "object"}
    if not isinstance(description, str) or not isinstance(parameters, dict):
        raise BadRequest(
            f"{where}: 'description' must be a string and 'parameters' an object", field=where
        )
    return PageTool(name, description, parameters)
