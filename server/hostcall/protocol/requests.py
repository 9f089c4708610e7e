"""Request bodies (docs/protocol.md), decoded into typed objects with clear 400/422 errors.

``read_body(request, Body, max_bytes)`` is the only way a route reads its body: bytes → JSON
(``hostcall.protocol.reading``) → one of the frozen classes below. Unknown fields are ignored
(clients may be newer than the server); a field of the wrong type is a 400 naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from starlette.requests import Request

from hostcall.errors import SURFACE_ERROR_CODES, BadRequest, ToolErrorCode, Unprocessable
from hostcall.protocol.apps import AppContext, AppToolCall
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.limits import (
    MAX_ATTACHMENTS,
    MAX_FEEDBACK_COMMENT_CHARS,
    MAX_MESSAGE_CHARS,
)
from hostcall.protocol.page_tool import PageTool
from hostcall.protocol.reading import read_json
from hostcall.protocol.run_input import RunAgentInput

LOCALES = ("en", "fr", "es", "ja")
# A surface id is chosen by its client: new for each page load, kept across reconnects.
SURFACE_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
# The page's resume key (widget/api.js): random, kept where only the page reads it.
RESUME_KEY = re.compile(r"[A-Za-z0-9_-]{32,128}")


def surface_id(value: object, *, field: str = "surfaceId") -> str | None:
    """A client's surface id (docs/protocol.md "Surfaces"), checked; None when it names none."""
    if value is None:
        return None
    if not isinstance(value, str) or not SURFACE_ID.fullmatch(value):
        raise BadRequest(
            f"{field} must be 8 to 64 letters, digits, '-' or '_' (got {str(value)[:80]!r})",
            field=field,
        )
    return value


def _str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"field {name!r} must be a string", field=name)
    return value


def _resume_key(body: dict[str, Any]) -> str:
    """The page's resume key, checked; "" when the request has none."""
    value = _str(body, "resumeKey") or ""
    if value and not RESUME_KEY.fullmatch(value):
        raise BadRequest(
            "field 'resumeKey' must be 32 to 128 letters, digits, '-' or '_'", field="resumeKey"
        )
    return value


def _object(body: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = body.get(name)
    if value is not None and not isinstance(value, dict):
        raise BadRequest(f"field {name!r} must be a JSON object", field=name)
    return value


def _choices(values: Any) -> str:
    return ", ".join(repr(str(v)) for v in sorted(values))


@dataclass(frozen=True, slots=True)
class NewConversation:
    """``POST /api/agents/{agentId}/conversations``"""

    locale: str
    # The page embedding the widget ("" standalone): names the session cookie.
    parent_origin: str = ""
    # The page's key ("" none): the session cookie is set bound to it, and only with one.
    resume_key: str = ""

    @classmethod
    def decode(cls, body: dict[str, Any]) -> NewConversation:
        locale = _str(body, "locale") or ""
        if locale and locale not in LOCALES:
            raise BadRequest(
                f"locale {locale[:40]!r} is not one of {_choices(LOCALES)}", field="locale"
            )
        return cls(locale, _str(body, "parentOrigin") or "", _resume_key(body))


@dataclass(frozen=True, slots=True)
class ResumeSession:
    """``POST /api/agents/{agentId}/session``: the conversation this browser's cookie names."""

    parent_origin: str
    # The key the cookie was bound to: without it the cookie resumes nothing.
    resume_key: str = ""

    @classmethod
    def decode(cls, body: dict[str, Any]) -> ResumeSession:
        return cls(_str(body, "parentOrigin") or "", _resume_key(body))


@dataclass(frozen=True, slots=True)
class Capabilities:
    """``POST /api/conversations/{conversationId}/capabilities``: the tools a surface answers,
    and the page tools it registered (hostcall/page_tools.py), admitted by the route."""

    tools: tuple[str, ...]
    surface_id: str | None = None
    page_tools: tuple[PageTool, ...] = ()

    @classmethod
    def decode(cls, body: dict[str, Any]) -> Capabilities:
        tools = body.get("tools")
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise BadRequest("field 'tools' must be a list of tool names", field="tools")
        raw = body.get("pageTools")
        raw = [] if raw is None else raw
        if not isinstance(raw, list):
            raise BadRequest("field 'pageTools' must be a list of tools", field="pageTools")
        page_tools = tuple(_page_tool(t, f"pageTools[{i}]") for i, t in enumerate(raw))
        names = [t.name for t in page_tools]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise BadRequest(f"pageTools names {twice[:80]!r} twice", field="pageTools")
        return cls(tuple(dict.fromkeys(tools)), surface_id(body.get("surfaceId")), page_tools)


def _page_tool(raw: Any, where: str) -> PageTool:
    """One page tool as WebMCP's ``getTools()`` lists it: ``{name, title, description,
    inputSchema, annotations: {readOnlyHint, untrustedContentHint}}``."""
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be a JSON object", field=where)
    name, description = raw.get("name"), raw.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise BadRequest(f"{where}: 'name' and 'description' must be strings", field=where)
    title = raw.get("title") or ""
    schema = raw.get("inputSchema") or {"type": "object"}
    hints = raw.get("annotations") or {}
    if not isinstance(title, str) or not isinstance(schema, dict) or not isinstance(hints, dict):
        raise BadRequest(
            f"{where}: 'title' must be a string, 'inputSchema' and 'annotations' objects",
            field=where,
        )
    flags = {k: hints.get(k, False) for k in ("readOnlyHint", "untrustedContentHint")}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise BadRequest(f"{where}: annotations' hints must be true or false", field=where)
    return PageTool(
        name, description, schema, flags["readOnlyHint"], flags["untrustedContentHint"], title
    )


@dataclass(frozen=True, slots=True)
class NewMessage:
    """``POST /api/conversations/{conversationId}/messages``"""

    text: str
    simulate: bool
    # The page's context at send time (hostcall/page_context.py), as sent: its agent's caps
    # are checked where the agent is known.
    context: dict[str, Any] | None = None
    # Ids of files uploaded to the conversation (``POST …/attachments``) that it sends.
    attachments: tuple[str, ...] = ()

    @classmethod
    def decode(cls, body: dict[str, Any]) -> NewMessage:
        attachments = _attachment_ids(body.get("attachments", []))
        text = body.get("text", "" if attachments else None)
        if not isinstance(text, str) or not (text.strip() or attachments):
            raise Unprocessable(
                "field 'text' must be a non-empty string (it may be empty with attachments)",
                code=ErrorCode.INVALID_MESSAGE,
            )
        if len(text) > MAX_MESSAGE_CHARS:
            raise Unprocessable(
                f"the message is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}",
                code=ErrorCode.INVALID_MESSAGE,
            )
        simulate = body.get("simulate", False)
        if not isinstance(simulate, bool):
            raise BadRequest("field 'simulate' must be true or false", field="simulate")
        return cls(text.strip(), simulate, _object(body, "context"), attachments)


def _attachment_ids(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadRequest("field 'attachments' must be a list of attachment ids",
                         field="attachments")  # fmt: skip
    if len(value) > MAX_ATTACHMENTS:
        raise Unprocessable(
            f"a message carries {MAX_ATTACHMENTS} attachments at most",
            code=ErrorCode.BAD_ATTACHMENT,
        )
    return tuple(value)


@dataclass(frozen=True, slots=True)
class NewFeedback:
    """``POST /api/conversations/{conversationId}/messages/{messageId}/feedback``"""

    rating: Literal["up", "down"]
    comment: str

    @classmethod
    def decode(cls, body: dict[str, Any]) -> NewFeedback:
        rating = body.get("rating")
        if rating not in ("up", "down"):
            raise BadRequest("field 'rating' must be 'up' or 'down'", field="rating")
        comment = (_str(body, "comment") or "").strip()
        if len(comment) > MAX_FEEDBACK_COMMENT_CHARS:
            raise BadRequest(
                f"the comment is {len(comment)} characters; the limit is"
                f" {MAX_FEEDBACK_COMMENT_CHARS}",
                field="comment",
            )
        return cls(rating, comment)


@dataclass(frozen=True, slots=True)
class NewRating:
    """``POST /api/conversations/{conversationId}/rating``: five points, a remark if any."""

    score: int
    remark: str

    @classmethod
    def decode(cls, body: dict[str, Any]) -> NewRating:
        score = body.get("score")
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
            raise BadRequest("field 'score' must be a whole number from 1 to 5", field="score")
        remark = (_str(body, "remark") or "").strip()
        if len(remark) > MAX_FEEDBACK_COMMENT_CHARS:
            raise BadRequest(
                f"the remark is {len(remark)} characters; the limit is"
                f" {MAX_FEEDBACK_COMMENT_CHARS}",
                field="remark",
            )
        return cls(score, remark)


@dataclass(frozen=True, slots=True)
class PersonSays:
    """``POST /console/api/conversations/{id}/messages``: the operator holding it writes."""

    text: str

    @classmethod
    def decode(cls, body: dict[str, Any]) -> PersonSays:
        return cls(NewMessage.decode({"text": body.get("text")}).text)


@dataclass(frozen=True, slots=True)
class RetryRun:
    """``POST /api/conversations/{conversationId}/retry``"""

    simulate: bool

    @classmethod
    def decode(cls, body: dict[str, Any]) -> RetryRun:
        simulate = body.get("simulate", False)
        if not isinstance(simulate, bool):
            raise BadRequest("field 'simulate' must be true or false", field="simulate")
        return cls(simulate)


@dataclass(frozen=True, slots=True)
class Delivered:
    """``POST /api/calls/{callId}/delivered``. An absent token is left to the verifier,
    which answers 401 ``missing_token`` (not a 400)."""

    token: str | None

    @classmethod
    def decode(cls, body: dict[str, Any]) -> Delivered:
        return cls(_str(body, "token"))


@dataclass(frozen=True, slots=True)
class SurfaceError:
    code: ToolErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class CallResult:
    """``POST /api/calls/{callId}/result``: exactly one of ``output`` or ``error``."""

    token: str | None
    output: Any
    error: SurfaceError | None

    @classmethod
    def decode(cls, body: dict[str, Any]) -> CallResult:
        token = _str(body, "token")
        if ("output" in body) == ("error" in body):
            raise BadRequest("send exactly one of 'output' or 'error'")
        if "output" in body:
            return cls(token, body["output"], None)
        error = _object(body, "error") or {}
        code = error.get("code")
        if not isinstance(code, str) or code not in SURFACE_ERROR_CODES:  # a list is unhashable
            raise BadRequest(
                f"error.code must be one of {_choices(SURFACE_ERROR_CODES)} "
                f"(got {str(code)[:40]!r})",
                field="error.code",
            )
        message = error.get("message", "")
        if not isinstance(message, str):
            raise BadRequest("error.message must be a string", field="error.message")
        return cls(token, None, SurfaceError(ToolErrorCode(code), message.strip()))


@dataclass(frozen=True, slots=True)
class Decision:
    """``POST /api/calls/{callId}/decision``"""

    token: str | None
    decision: Literal["approve", "reject"]
    input: dict[str, Any] | None
    scope: str
    reason: str | None
    # Where the person decided: an approved client call runs there.
    surface_id: str | None = None

    @classmethod
    def decode(cls, body: dict[str, Any]) -> Decision:
        token = _str(body, "token")
        decision = body.get("decision")
        surface = surface_id(body.get("surfaceId"))
        if decision == "approve":
            scope = _str(body, "scope") or "once"
            return cls(token, "approve", _object(body, "input"), scope, None, surface)
        if decision == "reject":
            return cls(token, "reject", None, "once", _str(body, "reason"), surface)
        raise BadRequest("field 'decision' must be 'approve' or 'reject'", field="decision")


Body = TypeVar(
    "Body",
    NewConversation,
    ResumeSession,
    Capabilities,
    NewMessage,
    NewFeedback,
    NewRating,
    PersonSays,
    RetryRun,
    Delivered,
    CallResult,
    Decision,
    RunAgentInput,
    AppToolCall,
    AppContext,
)


async def read_body(request: Request, body: type[Body], max_bytes: int) -> Body:
    """The request's body as ``body``; the one call every route makes to read its body."""
    # An AG-UI body checks its own text: a tool message's content no store can hold fails
    # that call rather than the request (hostcall/protocol/run_input.py).
    check_text = body is not RunAgentInput
    return body.decode(await read_json(request, max_bytes, check_text=check_text))
