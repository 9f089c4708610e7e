"""Human handoff from the console: an operator takes a conversation over, writes to the
visitor as themselves, and hands it back to the agent (hostcall/handoff.py does the work;
docs/console.md, "Human handoff"). Each action is audited in the unit that makes it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from hostcall.console.accounts import Role
from hostcall.console.instances import handoff_view
from hostcall.console.session import guarded, operator_of
from hostcall.errors import Conflict, NotFound
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.console import HandoffChanged, PersonMessageSent
from hostcall.protocol.requests import PersonSays, read_body
from hostcall.responses import WireResponse
from hostcall.runtime import Runtime, runtime_of
from hostcall.store.records import AuditEntry, Conversation


async def _conversation(runtime: Runtime, request: Request) -> Conversation:
    conversation_id = request.path_params["conversation_id"]
    conversation = await runtime.store.get_conversation(conversation_id)
    if conversation is None:
        raise NotFound(f"no conversation {conversation_id}", code=ErrorCode.UNKNOWN_CONVERSATION)
    return conversation


def _did(request: Request, action: str, conversation_id: str, **details: object) -> AuditEntry:
    who = operator_of(request).name
    return AuditEntry(runtime_of(request).clock(), who, action, conversation_id, details=details)


@guarded(Role.OPERATOR)
async def take_over(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await _conversation(runtime, request)
    if conversation.agent_id not in runtime.agents:
        # Nobody could hand it back: the visitor's widget can no longer reach the agent.
        raise Conflict(
            f"conversation {conversation.id} is finished: its agent"
            f" {conversation.agent_id!r} is no longer served",
            code=ErrorCode.CONVERSATION_FINISHED,
        )
    cancelled = await runtime.services.runs.cancel_latest(conversation.id)
    audit = _did(request, "conversation.take_over", conversation.id, cancelled_run=cancelled)
    await runtime.handoff.take_over(conversation.id, audit.actor, audit=audit)
    held = await runtime.store.get_handoff(conversation.id)
    return WireResponse(HandoffChanged(handoff_view(held)))


@guarded(Role.OPERATOR)
async def hand_back(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await _conversation(runtime, request)
    audit = _did(request, "conversation.hand_back", conversation.id)
    await runtime.handoff.hand_back(conversation.id, audit.actor, audit=audit)
    return WireResponse(HandoffChanged(None))


@guarded(Role.OPERATOR)
async def say(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await _conversation(runtime, request)
    body = await read_body(request, PersonSays, runtime.settings.max_body_bytes)
    audit = _did(request, "conversation.message", conversation.id, text=body.text)
    message_id = await runtime.handoff.say(conversation.id, audit.actor, body.text, audit=audit)
    return WireResponse(PersonMessageSent(message_id), status_code=201)
