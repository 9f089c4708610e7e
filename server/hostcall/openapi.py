"""The OpenAPI 3.1 description of the HTTP API of docs/protocol.md, built from the wire's types.

Served at ``/openapi.json``. It sits with the routes, above the wire (``protocol/``), because
it also names values defined further up (call states, tool kinds, form reasons). Response
bodies are the types of ``protocol.responses`` (and the console's, of ``protocol.console``),
their schemas derived by ``protocol.schema``; error codes come from ``protocol.codes``,
limits from ``protocol.limits``, event names from ``protocol.events``. Request bodies are
described here by hand beside ``protocol.requests``, which decodes them. tests/unit/test_openapi.py
checks that every route is described, holds real responses to these schemas, and runs
schemathesis against the real app (no 5xx, no response outside the description).
"""

from __future__ import annotations

from typing import Any

from hostcall import page_context
from hostcall.calls.assignment import FormReason
from hostcall.errors import SURFACE_ERROR_CODES
from hostcall.protocol import console as c
from hostcall.protocol import responses as r
from hostcall.protocol.codes import PageToolRefusal
from hostcall.protocol.events import CustomName, EventType
from hostcall.protocol.limits import (
    MAX_ATTACHMENTS,
    MAX_FEEDBACK_COMMENT_CHARS,
    MAX_MESSAGE_CHARS,
)
from hostcall.protocol.requests import LOCALES, SURFACE_ID
from hostcall.protocol.run_input import RESUME_STATUSES
from hostcall.protocol.schema import Enums, Schemas
from hostcall.store.records import CallState, RunStatus
from hostcall.tools import EFFECTS, KINDS

OBJECT: dict[str, Any] = {"type": "object"}
STRING: dict[str, Any] = {"type": "string"}
ROUTES = ("handler", "form")
SURFACE: dict[str, Any] = {"type": "string", "pattern": f"^{SURFACE_ID.pattern}$"}

# The ``str`` fields of the wire types that hold one of a closed set.
ENUMS: Enums = {
    **{(view, "state"): CallState for view in (r.CallView, c.ConsoleCall, r.CallStatus)},
    **{(view, "kind"): KINDS for view in (r.CallView, c.ConsoleCall, r.ToolCard)},
    **{(view, "route"): ROUTES for view in (r.CallView, c.ConsoleCall)},
    **{(view, "form_reason"): FormReason for view in (r.CallView, c.ConsoleCall)},
    **{(view, "status"): RunStatus for view in (r.SnapshotRun, c.ConsoleRun)},
    (c.ConversationItem, "run_status"): RunStatus,
    (r.SnapshotMessage, "role"): ("user", "assistant", "operator"),
    **{(view, "rating"): ("up", "down") for view in (r.FeedbackSaved, c.ConsoleFeedback)},
    (r.SnapshotMessage, "feedback"): ("up", "down"),
    (c.ConsoleHandoff, "state"): ("waiting", "taken"),
    (c.ConversationItem, "handoff"): ("waiting", "taken"),
    (r.ToolCard, "effect"): EFFECTS,
    (r.RefusedPageTool, "reason"): PageToolRefusal,
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


# Every body-carrying request can meet these before its handler runs (reading.py, middleware).
BODY_ERRORS = (400, 408, 413, 415)
SESSION: list[dict[str, list[str]]] = [{"session": []}]
IDENTITY: list[dict[str, list[str]]] = [{"identity": []}]
CONSOLE: list[dict[str, list[str]]] = [{"console": [], "csrf": []}]


class _Paths:
    """Builds the operations, collecting the schemas of the types they answer with."""

    def __init__(self) -> None:
        self.schemas = Schemas(ENUMS)

    def body(self, *types: type) -> dict[str, Any]:
        if len(types) == 1:
            return self.schemas.ref(types[0])
        return {"oneOf": [self.schemas.ref(t) for t in types]}

    def errors(self, *statuses: int) -> dict[str, Any]:
        described = {
            400: "Malformed request (the message names the field)", 401: "Missing or bad token",
            403: "A token of another conversation, call, tool or purpose",
            404: "Unknown resource", 405: "Method not allowed", 408: "The body stopped arriving",
            409: "Conflict", 410: "The call expired", 413: "Body too large",
            415: "Not application/json", 422: "Valid JSON, invalid content",
            429: "Rate limited (Retry-After)", 503: "The store cannot be written, or (code"
            " overloaded) the server is too busy to take new work: nothing was stored; send it"
            " again after Retry-After",
        }  # fmt: skip
        error = self.body(r.ErrorBody)
        out = {str(s): {"description": described[s], **_json(error)} for s in statuses}
        wait = {"required": True, "schema": {"type": "integer", "minimum": 1}}
        for waited in ("429", "503"):
            if waited in out:
                out[waited]["headers"] = {"Retry-After": {"description": "Seconds to wait", **wait}}
        return out

    def op(
        self,
        summary: str,
        ok: int,
        ok_schema: dict[str, Any],
        *errors: int,
        body: dict[str, Any] | None = None,
        security: list[Any] | None = None,
        ok_media: str = "application/json",
        optional_body: bool = False,
    ) -> dict[str, Any]:
        op: dict[str, Any] = {"summary": summary, "security": security or []}
        content = {ok_media: {"schema": ok_schema}}
        op["responses"] = {str(ok): {"description": "OK", "content": content}}
        # 400 everywhere: a path, query string or header holding a NUL is refused before
        # any route (invalid_text, hostcall/middleware.py).
        op["responses"].update(self.errors(400, *errors))
        if body is not None:
            op["requestBody"] = {"required": not optional_body, **_json(body)}
            op["responses"].update(self.errors(*BODY_ERRORS))
        return op

    def nobody(self, summary: str, *errors: int) -> dict[str, Any]:
        """A 204 operation with no body either way (the surface calls)."""
        return {
            "summary": summary,
            "security": SESSION,
            "responses": {"204": {"description": "Done"}, **self.errors(*errors, *BODY_ERRORS)},
        }


def _upload(op: dict[str, Any]) -> dict[str, Any]:
    """``op`` taking a file's raw bytes: its ``Content-Type`` is the browser's guess, which
    decides nothing (the content does), so any is described."""
    op["requestBody"] = {"required": True, "content": {
        "*/*": {"schema": {"type": "string", "format": "binary"}}}}  # fmt: skip
    op["responses"].update({k: v for k, v in _Paths().errors(408).items()})
    return op


def _or_nothing(op: dict[str, Any], why: str) -> dict[str, Any]:
    """``op``, which may also answer ``204`` with no body, for ``why``."""
    op["responses"]["204"] = {"description": why}
    return op


def _param(name: str, where: str = "path", schema: dict[str, Any] = STRING) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema}


def request_schemas() -> dict[str, Any]:
    """The request bodies ``requests`` decodes (it says why one is refused)."""
    surface = SURFACE
    return {
        "NewConversation": _obj(
            [], locale={"enum": ["", *LOCALES]}, parentOrigin=STRING, resumeKey=STRING
        ),
        "ResumeSession": _obj([], parentOrigin=STRING, resumeKey=STRING),
        "Capabilities": _obj(["tools"], tools={"type": "array", "items": STRING},
                             surfaceId=surface,
                             # WebMCP's getTools(), admitted by the agent's page_tools.
                             pageTools={"type": "array", "items": _obj(
                                 ["name"], name=STRING, title=STRING, description=STRING,
                                 inputSchema=OBJECT, annotations=_obj(
                                     [], readOnlyHint={"type": "boolean"},
                                     untrustedContentHint={"type": "boolean"}))}),
        # ``text`` may be empty (or left out) when the message carries attachments.
        "NewMessage": _obj([], text={"type": "string", "maxLength": MAX_MESSAGE_CHARS},
                           attachments={"type": "array", "maxItems": MAX_ATTACHMENTS,
                                        "items": {"type": "string", "minLength": 1}},
                           simulate={"type": "boolean"},
                           # The page's context: its agent's page_context caps (agents.md).
                           context={"type": "object", "propertyNames": {
                               "pattern": f"^{page_context.KEY.pattern}$"}}),
        "NewFeedback": _obj(["rating"], rating={"enum": ["up", "down"]},
                            comment={"type": "string", "maxLength": MAX_FEEDBACK_COMMENT_CHARS}),
        "NewRating": _obj(["score"], score={"type": "integer", "minimum": 1, "maximum": 5},
                          remark={"type": "string", "maxLength": MAX_FEEDBACK_COMMENT_CHARS}),
        "PersonSays": _obj(["text"], text={"type": "string", "minLength": 1,
                                           "maxLength": MAX_MESSAGE_CHARS}),
        "RetryRun": _obj([], simulate={"type": "boolean"}),
        "Delivered": _obj(["token"], token=STRING),
        "CallResult": {"oneOf": [  # exactly one of output and error
            {**_obj(["token", "output"], token=STRING, output={}),
             "not": {"required": ["error"]}},
            {**_obj(["token", "error"], token=STRING, error=_obj(
                ["code"], code={"enum": sorted(SURFACE_ERROR_CODES)}, message=STRING)),
             "not": {"required": ["output"]}},
        ]},
        "Decision": _obj(
            ["token", "decision"], token=STRING, decision={"enum": ["approve", "reject"]},
            input=OBJECT, scope={"enum": ["once", "conversation"]}, reason=STRING,
            surfaceId=surface,
        ),
        "ConsoleAnswer": _obj(["output"], output={}),
        "AppToolCall": _obj(["name"], name={"type": "string", "minLength": 1, "maxLength": 128},
                            arguments=OBJECT, confirmed={"type": "boolean"}),
        "AppContext": _obj([], content={"type": "array", "items": OBJECT},
                           structuredContent={}),
        "AgentBody": _obj(["agent"], agent=OBJECT, note=STRING),
        "RunAgentInput": _obj(
            ["threadId", "runId", "messages"], threadId=STRING, runId=STRING,
            messages={"type": "array", "items": OBJECT}, tools={"type": "array", "items": OBJECT},
            context={"type": "array", "items": _obj(
                ["description", "value"], description={
                    "type": "string", "minLength": 1,
                    "maxLength": page_context.MAX_DESCRIPTION_CHARS}, value={})},
            resume={"type": "array", "items": _obj(
                ["interruptId", "status"], interruptId=STRING,
                status={"enum": list(RESUME_STATUSES)}, payload={}, metadata=OBJECT)},
        ),
    }  # fmt: skip


def _api(p: _Paths) -> dict[str, Any]:
    conv = [_param("conversationId")]
    call = [_param("callId")]
    events = ", ".join([*(t.value for t in EventType), *(n.value for n in CustomName)])
    opened = p.body(r.ConversationOpened)
    call_status = p.body(r.CallStatus)
    return {
        "/healthz": {"get": p.op("Ready: the store can be written", 200, p.body(r.Health), 503)},
        "/embed/check": {"parameters": [_param("agent", "query"), _param("origin", "query")],
                         "get": p.op("Why a page could not embed an agent", 200,
                                     p.body(r.EmbedAllowed, r.EmbedRefused))},
        "/api/agents/{agentId}/conversations": {"parameters": [_param("agentId")], "post": p.op(
            "Start a conversation", 201, opened, 403, 404, 429, 503,
            body=_ref("NewConversation"), optional_body=True)},
        "/api/agents/{agentId}/session": {"parameters": [_param("agentId")], "post": _or_nothing(
            p.op("Resume this browser's conversation (the widget page's cookie; the session"
                 " token a tab held, if any, keeps the session's generation)", 200, opened,
                 403, 404, 429, body=_ref("ResumeSession"),
                 security=[{}, *SESSION],  # optional: a new page has no token
                 optional_body=True),
            "Nothing to resume in this browser (a first visit): nothing changed")},
        "/api/agents/{agentId}/session/identify": {"parameters": [_param("agentId")], "post": p.op(
            "Go on as the person the page's identity token names: this browser's conversation"
            " (adopted if it was anonymous and begun), else the person's latest; 404 no_session"
            " if they have none yet (docs/identity.md)", 200, opened, 400, 401, 403, 404, 503,
            body=_ref("NewConversation"), security=[IDENTITY[0] | SESSION[0], *IDENTITY],
            optional_body=True)},
        "/api/agents/{agentId}/conversations/{conversationId}/open": {
            "parameters": [_param("agentId"), *conv], "post": p.op(
                "Open one of the identified person's conversations in this browser", 200,
                opened, 400, 401, 403, 404, 503, body=_ref("ResumeSession"), security=IDENTITY,
                optional_body=True)},
        "/api/conversations/{conversationId}/logout": {"parameters": conv, "post": p.nobody(
            "This browser leaves the conversation: its session's tokens are refused from now",
            401, 403, 404)},
        "/api/conversations/{conversationId}": {"parameters": [
            *conv, _param("surface", "query", SURFACE),
        ], "get": p.op(
            "The snapshot a reloaded widget renders", 200, p.body(r.Snapshot), 400, 401, 403,
            404, security=SESSION)},
        "/api/conversations/{conversationId}/stream-token": {"parameters": conv, "post": p.op(
            "A fresh stream token", 200, p.body(r.StreamToken), 401, 403, 404, body=OBJECT,
            security=SESSION, optional_body=True)},
        "/api/conversations/{conversationId}/capabilities": {"parameters": conv, "post": p.op(
            "The tools this surface has handlers for, and the page tools it registered:"
            " those admitted and those refused", 200, p.body(r.SurfaceTools), 400, 401, 403,
            404, body=_ref("Capabilities"), security=SESSION)},
        "/api/conversations/{conversationId}/messages": {"parameters": conv, "post": p.op(
            "Send a user message: starts a run (or, while a person holds the conversation,"
            " is kept for them)", 202, p.body(r.RunAccepted, r.MessageHeld), 401, 403, 404,
            409, 422, 429, 503, body=_ref("NewMessage"), security=SESSION)},
        "/api/conversations/{conversationId}/attachments": {"parameters": [
            *conv, {**_param("name", "query"), "required": True},
        ], "post": _upload(p.op(
            "Upload one file (the raw bytes as the body) for a message to send: kept if its"
            " content is one of the agent's types, within its size and the conversation's"
            " total", 201, p.body(r.AttachmentSaved), 401, 403, 404, 413, 415, 422, 429, 503,
            security=SESSION))},
        "/api/conversations/{conversationId}/attachments/{attachmentId}": {"parameters": [
            *conv, _param("attachmentId"), _param("thumb", "query"),
        ], "get": p.op(
            "A file's bytes, as an attachment, with the type its content showed", 200,
            {"type": "string", "format": "binary"}, 401, 403, 404, security=SESSION,
            ok_media="application/octet-stream")},
        "/api/conversations/{conversationId}/messages/{messageId}/feedback": {"parameters": [
            *conv, _param("messageId")], "post": p.op(
            "Rate one of the agent's replies (again: the latest rating stands)", 200,
            p.body(r.FeedbackSaved), 401, 403, 404, 422, 429, body=_ref("NewFeedback"),
            security=SESSION)},
        "/api/conversations/{conversationId}/calls/{callId}/app/tools-call": {
            "parameters": [*conv, *call], "post": p.op(
            "An MCP App view's tools/call: a read of its own server's tools (docs/agents.md,"
            " 'MCP Apps')", 200, p.body(r.AppCallResult), 400, 401, 403, 404, 409, 422,
            body=_ref("AppToolCall"), security=SESSION)},
        "/api/conversations/{conversationId}/calls/{callId}/app/context": {
            "parameters": [*conv, *call], "post": p.op(
            "An MCP App view's ui/update-model-context: the page-context entry app:<server>",
            200, p.body(r.AppContextSaved), 400, 401, 403, 404, 422,
            body=_ref("AppContext"), security=SESSION)},
        "/api/conversations/{conversationId}/rating": {"parameters": conv, "post": p.op(
            "Rate the whole conversation, once, when the widget asks (the same again: the"
            " one stored)", 200, p.body(r.RatingSaved), 400, 401, 403, 404, 409, 422, 429,
            body=_ref("NewRating"), security=SESSION)},
        "/api/conversations/{conversationId}/messages/{messageId}/edit": {"parameters": [
            *conv, _param("messageId")], "post": p.op(
            "Edit the visitor's last message: a new run on a branch, the old one kept", 202,
            p.body(r.RunAccepted), 401, 403, 404, 409, 422, 429, 503, body=_ref("NewMessage"),
            security=SESSION)},
        "/api/conversations/{conversationId}/messages/{messageId}/regenerate": {"parameters": [
            *conv, _param("messageId")], "post": p.op(
            "Answer the visitor's last message again, in place of the last answer: a new run"
            " on a branch, the old one kept", 202, p.body(r.RunAccepted), 401, 403, 404, 409,
            429, 503, body=_ref("RetryRun"), security=SESSION, optional_body=True)},
        "/api/conversations/{conversationId}/retry": {"parameters": conv, "post": p.op(
            "Retry after a failed run: a new run over the history, nothing re-sent", 202,
            p.body(r.RunAccepted), 401, 403, 404, 409, 429, 503, body=_ref("RetryRun"),
            security=SESSION, optional_body=True)},
        "/api/conversations/{conversationId}/runs/{runId}/stop": {"parameters": [
            *conv, _param("runId"),
        ], "post": p.op(
            "Stop a running or waiting run: it and its open calls end as cancelled", 200,
            p.body(r.RunStopped), 401, 403, 404, 409, body=OBJECT, security=SESSION,
            optional_body=True)},
        "/api/conversations/{conversationId}/events": {"parameters": [
            *conv, _param("token", "query"), _param("after", "query"),
            _param("surface", "query", SURFACE), _param("Last-Event-ID", "header"),
        ], "get": p.op(
            f"The event stream (SSE; AG-UI events: {events})", 200, STRING, 400, 401, 403, 404, 503,
            ok_media="text/event-stream")},
        "/api/conversations/{conversationId}/history": {"parameters": [
            *conv, _param("before", "query"),
        ], "get": p.op(
            "The visitor's conversations: the signed-in person's, else this browser's", 200,
            p.body(r.History), 401, 403, 404, security=SESSION)},
        "/api/conversations/{conversationId}/history/{otherId}": {
            "parameters": [*conv, _param("otherId")],
            "post": p.op("Switch to a conversation of the history (the cookie then names it)",
                         200, opened, 401, 403, 404, body=_ref("ResumeSession"),
                         security=SESSION, optional_body=True),
            "delete": {**p.nobody("Delete a conversation of the history, whole", 401, 403,
                                  404, 409)},
        },
        "/api/conversations/{conversationId}/surfaces/{surfaceId}/activity": {
            "parameters": [*conv, _param("surfaceId", schema=SURFACE)],
            "post": p.nobody("The person did something on this surface", 401, 403, 404, 400),
        },
        "/api/conversations/{conversationId}/surfaces/{surfaceId}/leave": {
            "parameters": [*conv, _param("surfaceId", schema=SURFACE)],
            "post": p.nobody("The page is going away", 401, 403, 404, 400),
        },
        "/api/calls/{callId}/delivered": {"parameters": call, "post": p.op(
            "The surface has the call", 200, p.body(r.DeliveryAck), 401, 403, 404, 409, 410,
            body=_ref("Delivered"))},
        "/api/calls/{callId}/result": {"parameters": call, "post": p.op(
            "Answer a call", 200, call_status, 401, 403, 404, 409, 410, 422,
            body=_ref("CallResult"))},
        "/api/calls/{callId}/decision": {"parameters": call, "post": p.op(
            "Approve (maybe with edits) or reject a call", 200, call_status, 400, 401, 403,
            404, 409, 410, 422, body=_ref("Decision"))},
        "/agui/{agentId}": {"parameters": [_param("agentId")], "post": p.op(
            "AG-UI: RunAgentInput in, the run as AG-UI events out", 200, STRING, 403, 404, 409,
            422, 429, 503, body=_ref("RunAgentInput"), ok_media="text/event-stream")},
        "/agui/{agentId}/capabilities": {"parameters": [_param("agentId")], "get": p.op(
            "AG-UI: the agent's AgentCapabilities", 200, OBJECT, 404)},
    }  # fmt: skip


def _console(p: _Paths) -> dict[str, Any]:
    """The console's JSON routes (docs/console.md): a signed-in operator's cookie, and on a
    POST the CSRF token of the session in ``X-CSRF-Token``."""
    call = [_param("callId")]
    status = p.body(r.CallStatus)
    query = [_param(n, "query") for n in ("agent", "status", "waiting", "handoff", "feedback",
                                          "q", "page")]  # fmt: skip
    conv = [_param("conversationId")]
    handoff = p.body(c.HandoffChanged)
    return {
        "/console/api/conversations": {"parameters": query, "get": p.op(
            "Conversations, newest first, a page at a time", 200,
            p.body(c.ConversationList), 400, 401, 403, security=CONSOLE)},
        "/console/api/conversations/{conversationId}": {
            "parameters": [_param("conversationId")], "get": p.op(
                "One conversation: its messages, runs, calls, events and console actions", 200,
                p.body(c.ConversationDetail), 401, 403, 404, security=CONSOLE)},
        "/console/api/calls/{callId}/answer": {"parameters": call, "post": p.op(
            "Answer a client-side call as an operator", 200, status, 401, 403, 404, 409, 410,
            422, body=_ref("ConsoleAnswer"), security=CONSOLE)},
        "/console/api/calls/{callId}/decision": {"parameters": call, "post": p.op(
            "Decide a confirmation as an operator", 200, status, 401, 403, 404, 409, 410,
            422, body=_ref("Decision"), security=CONSOLE)},
        "/console/api/calls/{callId}/expire": {"parameters": call, "post": p.op(
            "End an open call (operator_ended)", 200, status, 401, 403, 404, 409, 410,
            security=CONSOLE)},
        "/console/api/runs/{runId}/cancel": {"parameters": [_param("runId")], "post": p.op(
            "Cancel a running or waiting run", 200, p.body(c.RunCancelled), 401, 403, 404, 409,
            security=CONSOLE)},
        "/console/api/conversations/{conversationId}/take-over": {"parameters": conv, "post": p.op(
            "Take the conversation over from the agent", 200, handoff, 401, 403, 404, 409,
            security=CONSOLE)},
        "/console/api/conversations/{conversationId}/hand-back": {"parameters": conv, "post": p.op(
            "Hand the conversation back to the agent", 200, handoff, 401, 403, 404, 409,
            security=CONSOLE)},
        "/console/api/conversations/{conversationId}/messages": {"parameters": conv, "post": p.op(
            "Write to the visitor as the person holding the conversation", 201,
            p.body(c.PersonMessageSent), 401, 403, 404, 409, 422, body=_ref("PersonSays"),
            security=CONSOLE)},
        "/console/api/agents/{agentId}/check": {"parameters": [_param("agentId")], "post": p.op(
            "The problems an agent file would have, changing nothing", 200,
            p.body(c.AgentProblems), 401, 403, body=_ref("AgentBody"), security=CONSOLE)},
        "/console/api/agents/{agentId}": {"parameters": [_param("agentId")], "post": p.op(
            "Save an agent file: a new version", 200, p.body(c.AgentSaved), 401, 403, 404, 409,
            422, body=_ref("AgentBody"), security=CONSOLE)},
        "/console/api/mcp/{server}/tools": {"parameters": [
            _param("server"), _param("environment", "query"),
        ], "get": p.op(
            "An MCP server's tools as it lists them now, or why not", 200,
            p.body(c.McpServerTools), 401, 403, security=CONSOLE)},
    }  # fmt: skip


def document() -> dict[str, Any]:
    p = _Paths()
    paths = {**_api(p), **_console(p)}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Hostcall", "version": "1", "description": "docs/protocol.md"},
        "paths": paths,
        "components": {
            "schemas": {**request_schemas(), **dict(sorted(p.schemas.components.items()))},
            "securitySchemes": {
                "session": {"type": "http", "scheme": "bearer"},
                "identity": {"type": "apiKey", "in": "header", "name": "Hostcall-Identity"},
                "console": {"type": "apiKey", "in": "cookie", "name": "hc_console"},
                "csrf": {"type": "apiKey", "in": "header", "name": "X-CSRF-Token"},
            },
        },
    }
