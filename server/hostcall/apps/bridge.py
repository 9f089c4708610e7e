"""A view's two requests back to Hostcall, made by the widget for it with the visitor's
session token, on the widget's origin (never the apps origin, which has no credentials):
its ``tools/call`` and its ``ui/update-model-context`` (hostcall/services/apps.py says what
each may do)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.protocol.apps import AppContext, AppToolCall
from hostcall.protocol.requests import read_body
from hostcall.responses import WireResponse
from hostcall.runtime import runtime_of
from hostcall.visitors.session_requests import session_conversation

BASE = "/api/conversations/{conversation_id}/calls/{call_id}/app"


def bridge_routes() -> list[BaseRoute]:
    return [
        Route(f"{BASE}/tools-call", app_tools_call, methods=["POST"]),
        Route(f"{BASE}/context", app_context, methods=["POST"]),
    ]


async def app_tools_call(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, AppToolCall, runtime.settings.max_body_bytes)
    call_id = request.path_params["call_id"]
    result = await runtime.services.apps.call_tool(
        conversation, call_id, body.name, body.arguments, confirmed=body.confirmed
    )
    return WireResponse(result)


async def app_context(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, AppContext, runtime.settings.max_body_bytes)
    call_id = request.path_params["call_id"]
    saved = await runtime.services.apps.set_context(conversation, call_id, body.value())
    return WireResponse(saved)
