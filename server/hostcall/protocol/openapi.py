"""The OpenAPI 3.1 description of the HTTP API of docs/protocol.md, built from this package.

Served at ``/openapi.json``. Error codes come from ``codes.ErrorCode``, limits from
``limits``, event names from ``events``; tests/unit/test_openapi.py checks that every API
route is described, and runs schemathesis against the real app (no 5xx, no response outside
the description). The console (its own pages and JSON) is not part of this API.
"""

from __future__ import annotations

from typing import Any

from hostcall.errors import SURFACE_ERROR_CODES
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.events import CustomName, EventType
from hostcall.protocol.limits import MAX_MESSAGE_CHARS
from hostcall.protocol.requests import LOCALES
from hostcall.store.records import CallState

OBJECT: dict[str, Any] = {"type": "object"}
STRING: dict[str, Any] = {"type": "string"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    described = {
        400: "Malformed request (the message names the field)", 401: "Missing or bad token",
        403: "A token of another conversation, call, tool or purpose", 404: "Unknown resource",
        405: "Method not allowed", 408: "The body stopped arriving", 409: "Conflict",
        410: "The call expired", 413: "Body too large", 415: "Not application/json",
        422: "Valid JSON, invalid content", 429: "Rate limited (Retry-After)",
        503: "The store cannot be written",
    }  # fmt: skip
    return {str(s): {"description": described[s], **_json(_ref("Error"))} for s in statuses}


# Every body-carrying request can meet these before its handler runs (reading.py, middleware).
BODY_ERRORS = (400, 408, 413, 415)
SESSION: list[dict[str, list[str]]] = [{"session": []}]


def _op(
    summary: str,
    ok: int,
    ok_schema: dict[str, Any] | None,
    *errors: int,
    body: dict[str, Any] | None = None,
    security: list[Any] | None = None,
    ok_media: str = "application/json",
    optional_body: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": security or []}
    content = {ok_media: {"schema": ok_schema or OBJECT}}
    op["responses"] = {str(ok): {"description": "OK", "content": content}, **_errors(*errors)}
    if body is not None:
        op["requestBody"] = {"required": not optional_body, **_json(body)}
        op["responses"].update(_errors(*BODY_ERRORS))
    return op


def _nobody(summary: str, *errors: int) -> dict[str, Any]:
    """A 204 operation with no body either way (the surface calls)."""
    return {
        "summary": summary,
        "security": SESSION,
        "responses": {"204": {"description": "Done"}, **_errors(*errors, *BODY_ERRORS)},
    }


def _param(name: str, where: str = "path", **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": STRING, **extra}


def schemas() -> dict[str, Any]:
    call_states = [s.value for s in CallState]
    return {
        "Error": _obj(["error"], error=_obj(
            ["code", "message", "details"],
            code={"enum": [c.value for c in ErrorCode]}, message=STRING, details=OBJECT,
        )),
        "Call": _obj(
            ["toolCallId", "toolCallName", "kind", "runId", "state", "input", "inputSchema",
             "outputSchema", "deadline", "route", "delivered", "outcome"],
            toolCallId=STRING, toolCallName=STRING, kind={"enum": ["client", "http"]},
            runId=STRING, state={"enum": call_states}, input={}, inputSchema=OBJECT,
            outputSchema=OBJECT, deadline=STRING, route={"enum": ["handler", "form"]},
            delivered={"type": "boolean"}, outcome={"type": ["object", "null"]},
            approval=OBJECT, simulated={"type": "boolean"}, resultToken=STRING,
            decisionToken=STRING,
        ),
        "Snapshot": _obj(
            ["conversationId", "agentId", "lastEventId", "handledTools", "run", "messages",
             "calls"],
            conversationId=STRING, agentId=STRING, lastEventId=STRING,
            handledTools={"type": "array", "items": STRING},
            run={"oneOf": [{"type": "null"}, _obj(
                ["runId", "status", "error"], runId=STRING,
                status={"enum": ["running", "waiting", "finished", "failed"]},
                error={"type": ["object", "null"]},
            )]},
            messages={"type": "array", "items": _obj(
                ["id", "role", "text", "runId"], id=STRING, role={"enum": ["user", "assistant"]},
                text=STRING, runId=STRING, interrupted={"type": "boolean"},
                toolCallIds={"type": "array", "items": STRING},
            )},
            calls={"type": "array", "items": _ref("Call")},
        ),
        "NewConversation": _obj([], locale={"enum": ["", *LOCALES]}),
        "Conversation": _obj(
            ["conversationId", "sessionToken", "streamToken", "agent"],
            conversationId=STRING, sessionToken=STRING, streamToken=STRING, agent=_obj(
                ["id", "name", "greeting", "tools"], id=STRING, name=STRING, greeting=STRING,
                tools={"type": "array", "items": OBJECT},
            ),
        ),
        "Capabilities": _obj(["tools"], tools={"type": "array", "items": STRING}),
        "NewMessage": _obj(["text"], text={"type": "string", "minLength": 1,
                                           "maxLength": MAX_MESSAGE_CHARS},
                           simulate={"type": "boolean"}),
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
        ),
        "CallState": _obj(["state"], state={"enum": call_states}),
        "RunAgentInput": _obj(
            ["threadId", "runId", "messages"], threadId=STRING, runId=STRING,
            messages={"type": "array", "items": OBJECT}, tools={"type": "array", "items": OBJECT},
        ),
    }  # fmt: skip


def document() -> dict[str, Any]:
    conv = [_param("conversationId")]
    call = [_param("callId")]
    events = ", ".join([*(t.value for t in EventType), *(n.value for n in CustomName)])
    paths: dict[str, Any] = {
        "/healthz": {"get": _op("Ready: the store can be written", 200, OBJECT, 503)},
        "/api/agents/{agentId}/conversations": {"parameters": [_param("agentId")], "post": _op(
            "Start a conversation", 201, _ref("Conversation"), 404, 429,
            body=_ref("NewConversation"), optional_body=True)},
        "/api/agents/{agentId}/session": {
            "parameters": [_param("agentId")],
            "post": _op(
                "Resume this browser's conversation (the widget page's cookie; the session"
                " token a tab held, if any, keeps the session's generation)",
                200,
                _ref("Conversation"),
                403,
                404,
                429,
                body=_obj([], parentOrigin=STRING),
                security=[{}, *SESSION],  # optional: a new page has no token
                optional_body=True,
            ),
        },
        "/api/conversations/{conversationId}": {"parameters": conv, "get": _op(
            "The snapshot a reloaded widget renders", 200, _ref("Snapshot"), 401, 403, 404,
            security=SESSION)},
        "/api/conversations/{conversationId}/stream-token": {"parameters": conv, "post": _op(
            "A fresh stream token", 200, _obj(["streamToken"], streamToken=STRING), 401, 403,
            404, body=OBJECT, security=SESSION, optional_body=True)},
        "/api/conversations/{conversationId}/capabilities": {"parameters": conv, "post": _op(
            "The tools the page has handlers for", 200, _ref("Capabilities"), 401, 403, 404,
            body=_ref("Capabilities"), security=SESSION)},
        "/api/conversations/{conversationId}/messages": {"parameters": conv, "post": _op(
            "Send a user message: starts a run", 202, _obj(["runId"], runId=STRING), 401, 403,
            404, 409, 422, 429, body=_ref("NewMessage"), security=SESSION)},
        "/api/conversations/{conversationId}/events": {"parameters": [
            *conv, _param("token", "query"), _param("after", "query"),
            _param("Last-Event-ID", "header"),
        ], "get": _op(
            f"The event stream (SSE; AG-UI events: {events})", 200, STRING, 400, 401, 403, 404,
            ok_media="text/event-stream")},
        "/api/conversations/{conversationId}/surfaces/{surfaceId}/activity": {
            "parameters": [*conv, _param("surfaceId")],
            "post": _nobody("The person did something on this surface", 401, 403, 404, 400),
        },
        "/api/conversations/{conversationId}/surfaces/{surfaceId}/leave": {
            "parameters": [*conv, _param("surfaceId")],
            "post": _nobody("The page is going away", 401, 403, 404, 400),
        },
        "/api/calls/{callId}/delivered": {"parameters": call, "post": _op(
            "The surface has the call", 200, _obj(["state", "first"], state=STRING,
                                                  first={"type": "boolean"}),
            401, 403, 404, 409, 410, body=_ref("Delivered"))},
        "/api/calls/{callId}/result": {"parameters": call, "post": _op(
            "Answer a call", 200, _ref("CallState"), 401, 403, 404, 409, 410, 422,
            body=_ref("CallResult"))},
        "/api/calls/{callId}/decision": {"parameters": call, "post": _op(
            "Approve (maybe with edits) or reject a call", 200, _ref("CallState"), 401, 403,
            404, 409, 410, 422, body=_ref("Decision"))},
        "/agui/{agentId}": {"parameters": [_param("agentId")], "post": _op(
            "AG-UI: RunAgentInput in, the run as AG-UI events out", 200, STRING, 404, 409, 422,
            body=_ref("RunAgentInput"), ok_media="text/event-stream")},
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "Hostcall", "version": "1", "description": "docs/protocol.md"},
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {"session": {"type": "http", "scheme": "bearer"}},
        },
    }
