"""A call's answers, each made with the call's own token (not the session's): the page says
it delivered the call and gives its result, and the person approves or rejects it
(docs/protocol.md, ``POST /api/calls/{callId}/...``). Each is audited with the visitor as its
actor, in the same unit as its move, and the run goes on from it (``CallService``:
hostcall/services/calls.py).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.protocol.requests import CallResult, Decision, Delivered, read_body
from hostcall.protocol.responses import CallStatus, DeliveryAck
from hostcall.responses import WireResponse
from hostcall.runtime import Runtime, runtime_of
from hostcall.tokens import Claims, Purpose
from hostcall.visitors.session_requests import check_origin


async def _check_call_origin(request: Request, runtime: Runtime, claims: Claims) -> None:
    if "origin" in request.headers:
        agent_id = await runtime.agent_of_conversation(claims.conversation_id)
        check_origin(request, runtime, agent_id)


async def call_delivered(request: Request) -> Response:
    runtime = runtime_of(request)
    body = await read_body(request, Delivered, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, body.token)
    await _check_call_origin(request, runtime, claims)
    first = await runtime.services.calls.deliver(request.path_params["call_id"], claims)
    return WireResponse(DeliveryAck("delivered", first))


async def call_result(request: Request) -> Response:
    runtime = runtime_of(request)
    body = await read_body(request, CallResult, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, body.token)
    await _check_call_origin(request, runtime, claims)
    call = await runtime.services.calls.answer(request.path_params["call_id"], claims, body)
    return WireResponse(CallStatus(call.state.value))


async def call_decision(request: Request) -> Response:
    runtime = runtime_of(request)
    body = await read_body(request, Decision, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_DECISION, body.token)
    await _check_call_origin(request, runtime, claims)
    call = await runtime.services.calls.decide(request.path_params["call_id"], claims, body)
    return WireResponse(CallStatus(call.state.value))


def call_answer_routes() -> list[BaseRoute]:
    return [
        Route("/api/calls/{call_id}/delivered", call_delivered, methods=["POST"]),
        Route("/api/calls/{call_id}/result", call_result, methods=["POST"]),
        Route("/api/calls/{call_id}/decision", call_decision, methods=["POST"]),
    ]
