"""The JSON API of docs/protocol.md: conversations, messages, call answers and decisions."""

from __future__ import annotations

import re
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.errors import SURFACE_ERROR_CODES, BadRequest, NotFound, ToolErrorCode, Unprocessable
from server.ledger import new_id
from server.protocol.reading import field_object, field_str, read_json
from server.protocol.wire import to_wire
from server.responses import StoredJSONResponse
from server.runtime import Runtime
from server.store.records import ANONYMOUS_SURFACE, Conversation
from server.tokens import Claims, Purpose

MAX_MESSAGE_CHARS = 8000
LOCALES = {"en", "fr", "es", "ja"}
# A surface id is chosen by its client: new for each page load, kept across reconnects.
SURFACE_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")


def surface_id(value: object, *, field: str = "surfaceId") -> str | None:
    """A client's surface id, checked; None when it names none."""
    if value is None:
        return None
    if not isinstance(value, str) or not SURFACE_ID.fullmatch(value):
        raise BadRequest(
            f"{field} must be 8 to 64 letters, digits, '-' or '_' (got {str(value)[:80]!r})",
            field=field,
        )
    return value


def _token(body: dict[str, object]) -> str | None:
    """The body's token: absent is 401 missing_token (from the verifier), not a 400."""
    if body.get("token") is None:
        return None
    return field_str(body, "token")


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.hostcall
    return runtime


def _conversation(request: Request, runtime: Runtime) -> Conversation:
    """The conversation in the path, if the bearer session token is for it."""
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else None
    claims = runtime.tokens.verify(Purpose.SESSION, token)
    conversation_id = request.path_params["conversation_id"]
    if claims.conversation_id != conversation_id:
        from server.errors import Forbidden

        raise Forbidden(f"this session token is for another conversation than {conversation_id}")
    conversation = runtime.store.get_conversation(conversation_id)
    if conversation is None:
        raise NotFound(f"no conversation {conversation_id}", code="unknown_conversation")
    return conversation


async def create_conversation(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    agent_id = request.path_params["agent_id"]
    agent = runtime.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r}", code="unknown_agent")
    body = await read_json(request, runtime.settings.max_body_bytes)
    locale = field_str(body, "locale", required=False) or ""
    if locale and locale not in LOCALES:
        raise BadRequest(f"locale {locale!r} is not one of {sorted(LOCALES)}", field="locale")
    conversation = Conversation(new_id("c"), agent.id, time.time(), locale)
    runtime.store.create_conversation(conversation)
    claims = Claims(conversation.id)
    return JSONResponse(
        {
            "conversationId": conversation.id,
            "sessionToken": runtime.tokens.sign(Purpose.SESSION, claims),
            "streamToken": runtime.stream_ticket(conversation.id),
            "agent": {
                "id": agent.id,
                "name": agent.name,
                "greeting": agent.greeting,
                "tools": [t.public() for t in agent.tools],
            },
        },
        status_code=201,
    )


async def snapshot(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    conversation = _conversation(request, runtime)
    store = runtime.store
    surface = surface_id(request.query_params.get("surface"), field="surface")
    ledger = runtime.engine.ledger
    if surface is not None:
        # The snapshot writes this surface's calls to it, as its stream would: the claim.
        for call in store.list_calls(conversation.id):
            if call.surface_id == surface and call.state.value == "dispatched":
                ledger.claim(call.id, surface, call.assignment)
    run = store.latest_run(conversation.id)
    messages = []
    for m in store.list_messages(conversation.id):
        if m.role == "tool":
            continue
        item: dict[str, object] = {"id": m.id, "role": m.role, "text": m.text, "runId": m.run_id}
        if m.tool_calls:
            item["toolCallIds"] = [c["id"] for c in m.tool_calls]
        messages.append(item)
    return StoredJSONResponse(
        {
            "conversationId": conversation.id,
            "agentId": conversation.agent_id,
            "lastEventId": f"{conversation.id}:{store.last_seq(conversation.id)}",
            "surfaces": [
                {
                    "surfaceId": x.id,
                    "tools": list(x.tools),
                    "present": x.present(ledger.clock(), ledger.surface_grace),
                }
                for x in store.list_surfaces(conversation.id)
            ],
            "run": None
            if run is None
            else {
                "runId": run.id,
                "status": run.status.value,
                "error": run.error,
            },
            "messages": messages,
            "calls": [to_wire(ledger.view(c)) for c in store.list_calls(conversation.id)],
        }
    )


async def stream_token(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    conversation = _conversation(request, runtime)
    return JSONResponse({"streamToken": runtime.stream_ticket(conversation.id)})


async def capabilities(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    conversation = _conversation(request, runtime)
    body = await read_json(request, runtime.settings.max_body_bytes)
    tools = body.get("tools")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise BadRequest("field 'tools' must be a list of tool names", field="tools")
    agent = runtime.agents.get(conversation.agent_id)
    if agent is None:
        raise NotFound(f"agent {conversation.agent_id!r} is no longer loaded", code="unknown_agent")
    unknown = sorted(set(tools) - {t.name for t in agent.tools})
    if unknown:
        raise BadRequest(f"agent {agent.id!r} has no tool {unknown[0]!r}", field="tools")
    handled = tuple(dict.fromkeys(tools))
    surface = surface_id(body.get("surfaceId")) or ANONYMOUS_SURFACE
    with runtime.store.transaction():
        runtime.store.save_surface_tools(conversation.id, surface, handled, time.time())
    # A read left on the form (its page reloaded) may now have a handler again.
    runtime.engine.ledger.rehome(conversation.id)
    return JSONResponse({"surfaceId": surface, "tools": list(handled)})


async def surface_activity(request: Request) -> Response:
    """The person did something on this surface (focus, typing, a click): calls go here."""
    runtime = _runtime(request)
    conversation = _conversation(request, runtime)
    surface = surface_id(request.path_params["surface_id"], field="surface_id")
    assert surface is not None
    with runtime.store.transaction():
        runtime.store.touch_surface(conversation.id, surface, time.time())
    return Response(status_code=204)


async def surface_leave(request: Request) -> Response:
    """The page is going away (reload, navigation, closed tab): its calls move on now,
    without waiting out the grace period."""
    runtime = _runtime(request)
    conversation = _conversation(request, runtime)
    surface = surface_id(request.path_params["surface_id"], field="surface_id")
    assert surface is not None
    with runtime.store.transaction():
        runtime.store.leave_surface(conversation.id, surface, time.time())
    runtime.engine.ledger.rehome(conversation.id)
    return Response(status_code=204)


async def post_message(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    conversation = _conversation(request, runtime)
    body = await read_json(request, runtime.settings.max_body_bytes)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise Unprocessable("field 'text' must be a non-empty string", code="invalid_message")
    if len(text) > MAX_MESSAGE_CHARS:
        raise Unprocessable(
            f"the message is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}",
            code="invalid_message",
        )
    simulate = body.get("simulate", False)
    if not isinstance(simulate, bool):
        raise BadRequest("field 'simulate' must be true or false", field="simulate")
    run = runtime.engine.start_run(conversation, text.strip(), simulate=simulate)
    return JSONResponse({"runId": run.id}, status_code=202)


async def call_delivered(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    ledger = runtime.engine.ledger
    body = await read_json(request, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, _token(body))
    first = ledger.deliver(ledger.checked_call(request.path_params["call_id"], claims))
    return JSONResponse({"state": "delivered", "first": first})


async def call_result(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    ledger = runtime.engine.ledger
    body = await read_json(request, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, _token(body))
    has_output, has_error = "output" in body, "error" in body
    if has_output == has_error:
        raise BadRequest("send exactly one of 'output' or 'error'")
    call = ledger.checked_call(request.path_params["call_id"], claims)
    if has_output:
        call = ledger.answer(call, body["output"])
    else:
        error = field_object(body, "error") or {}
        code = error.get("code")
        if not isinstance(code, str) or code not in SURFACE_ERROR_CODES:
            raise BadRequest(
                f"error code must be one of {sorted(SURFACE_ERROR_CODES)} (got {code!r})",
                field="error.code",
            )
        message = error.get("message", "")
        if not isinstance(message, str):
            raise BadRequest("error.message must be a string", field="error.message")
        text = message.strip() or "no message"
        call = ledger.fail(call, ToolErrorCode(code), f"The page reported: {text}")
    return JSONResponse({"state": call.state.value})


async def call_decision(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    ledger = runtime.engine.ledger
    body = await read_json(request, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_DECISION, _token(body))
    decision = body.get("decision")
    if decision not in ("approve", "reject"):
        raise BadRequest("field 'decision' must be 'approve' or 'reject'", field="decision")
    call = ledger.checked_call(request.path_params["call_id"], claims)
    if decision == "approve":
        scope = field_str(body, "scope", required=False) or "once"
        surface = surface_id(body.get("surfaceId"))
        edited = field_object(body, "input", required=False)
        call = ledger.approve(call, edited, scope, surface=surface)
    else:
        call = ledger.reject(call, field_str(body, "reason", required=False))
    return JSONResponse({"state": call.state.value})


def api_routes() -> list[BaseRoute]:
    return [
        Route("/api/agents/{agent_id}/conversations", create_conversation, methods=["POST"]),
        Route("/api/conversations/{conversation_id}", snapshot, methods=["GET"]),
        Route("/api/conversations/{conversation_id}/stream-token", stream_token, methods=["POST"]),
        Route("/api/conversations/{conversation_id}/capabilities", capabilities, methods=["POST"]),
        Route("/api/conversations/{conversation_id}/messages", post_message, methods=["POST"]),
        Route(
            "/api/conversations/{conversation_id}/surfaces/{surface_id}/activity",
            surface_activity,
            methods=["POST"],
        ),
        Route(
            "/api/conversations/{conversation_id}/surfaces/{surface_id}/leave",
            surface_leave,
            methods=["POST"],
        ),
        Route("/api/calls/{call_id}/delivered", call_delivered, methods=["POST"]),
        Route("/api/calls/{call_id}/result", call_result, methods=["POST"]),
        Route("/api/calls/{call_id}/decision", call_decision, methods=["POST"]),
    ]
