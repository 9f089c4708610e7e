"""A call's answers, each made with the call's own token (not the session's): the page says
it delivered the call and gives its result, and the person approves or rejects it
(docs/protocol.md, ``POST /api/calls/{callId}/...``). Each is audited with the visitor as its
actor, in the same unit as its move, and the run goes on from it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.calls.outcomes import CallExpired, Moved
from hostcall.protocol.limits import MAX_REASON_CHARS
from hostcall.protocol.requests import CallResult, Decision, Delivered, read_body
from hostcall.protocol.responses import CallStatus, DeliveryAck
from hostcall.responses import WireResponse
from hostcall.runtime import Runtime
from hostcall.session_requests import check_origin, runtime_of
from hostcall.store.records import AuditEntry, Call
from hostcall.tokens import Claims, Purpose


async def _checked_call(runtime: Runtime, call_id: str, claims: Claims) -> Call:
    """``Answers.checked_call``; the run of a call it found expired goes on (the refusal too)."""
    try:
        return await runtime.engine.ledger.answers.checked_call(call_id, claims)
    except CallExpired as expired:
        runtime.engine.resume_expired(expired)
        raise


async def _check_call_origin(request: Request, runtime: Runtime, claims: Claims) -> None:
    if "origin" in request.headers:
        agent_id = await runtime.agent_of_conversation(claims.conversation_id)
        check_origin(request, runtime, agent_id)


# Who the audit log names for what a visitor's call token did (the console's actions name
# their operator; docs/console.md "Audit log").
VISITOR = "visitor"


def _visitor_did(
    runtime: Runtime, action: str, claims: Claims, call_id: str, **details: object
) -> AuditEntry:
    """The audit entry of a visitor's answer or decision, written with its move."""
    return AuditEntry(runtime.clock(), VISITOR, action, claims.conversation_id, call_id,
                      details=details)  # fmt: skip


async def call_delivered(request: Request) -> Response:
    runtime = runtime_of(request)
    ledger = runtime.engine.ledger
    body = await read_body(request, Delivered, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, body.token)
    await _check_call_origin(request, runtime, claims)
    call = await _checked_call(runtime, request.path_params["call_id"], claims)
    first = await ledger.answers.deliver(call)
    return WireResponse(DeliveryAck("delivered", first))


async def call_result(request: Request) -> Response:
    runtime = runtime_of(request)
    ledger = runtime.engine.ledger
    body = await read_body(request, CallResult, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, body.token)
    await _check_call_origin(request, runtime, claims)
    call_id = request.path_params["call_id"]
    try:
        if body.error is None:
            audit = _visitor_did(runtime, "call.answer", claims, call_id)
            settled = await ledger.answers.answer_claimed(call_id, claims, body.output, audit=audit)
        else:
            text = body.error.message or "no message"
            audit = _visitor_did(
                runtime, "call.answer", claims, call_id, error=body.error.code.value
            )
            call = await ledger.answers.checked_call(call_id, claims)
            settled = await ledger.answers.fail(
                call, body.error.code, f"The page reported: {text}", audit=audit
            )
    except CallExpired as expired:
        runtime.engine.resume_expired(expired)
        raise
    call = await runtime.engine.follow(settled)
    return WireResponse(CallStatus(call.state.value))


async def call_decision(request: Request) -> Response:
    runtime = runtime_of(request)
    ledger = runtime.engine.ledger
    body = await read_body(request, Decision, runtime.settings.max_body_bytes)
    claims = runtime.tokens.verify(Purpose.CALL_DECISION, body.token)
    await _check_call_origin(request, runtime, claims)
    call = await _checked_call(runtime, request.path_params["call_id"], claims)
    decided: Moved
    if body.decision == "approve":
        edited = body.input is not None
        audit = _visitor_did(
            runtime, "call.approve", claims, call.id, edited=edited, scope=body.scope
        )
        decided = await ledger.answers.approve(
            call, body.input, body.scope, surface=body.surface_id, audit=audit
        )
    else:
        reason = (body.reason or "").strip()[:MAX_REASON_CHARS]
        audit = _visitor_did(runtime, "call.reject", claims, call.id, reason=reason)
        decided = await ledger.answers.reject(call, body.reason, audit=audit)
    call = await runtime.engine.follow(decided)
    return WireResponse(CallStatus(call.state.value))


def call_answer_routes() -> list[BaseRoute]:
    return [
        Route("/api/calls/{call_id}/delivered", call_delivered, methods=["POST"]),
        Route("/api/calls/{call_id}/result", call_result, methods=["POST"]),
        Route("/api/calls/{call_id}/decision", call_decision, methods=["POST"]),
    ]
