"""Human handoff from the console: an operator takes a conversation over, writes to the
visitor as themselves, and hands it back to the agent (hostcall/handoff.py does the work;
docs/console.md, "Human handoff"). Each action is audited in the unit that makes it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from hostcall.console.accounts import Role
from hostcall.console.instances import handoff_view
from hostcall.console.session import guarded, operator_of
from hostcall.errors import Conflict
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.console import HandoffChanged, PersonMessageSent
from hostcall.protocol.requests import PersonSays, read_body
from hostcall.responses import WireResponse
from hostcall.runtime import runtime_of, services_of


@guarded(Role.OPERATOR)
async def take_over(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await runtime.services.conversations.get(request.path_params["conversation_id"])
    if conversation.agent_id not in runtime.agents:
        # Nobody could hand it back: the visitor's widget can no longer reach the agent.
        raise Conflict(
            f"conversation {conversation.id} is finished: its agent"
            f" {conversation.agent_id!r} is no longer served",
            code=ErrorCode.CONVERSATION_FINISHED,
        )
    held = await runtime.services.handoffs.take_over(conversation.id, operator_of(request).name)
    return WireResponse(HandoffChanged(handoff_view(held)))


@guarded(Role.OPERATOR)
async def hand_back(request: Request) -> Response:
    services = services_of(request)
    conversation = await services.conversations.get(request.path_params["conversation_id"])
    await services.handoffs.hand_back(conversation.id, operator_of(request).name)
    return WireResponse(HandoffChanged(None))


@guarded(Role.OPERATOR)
async def say(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await runtime.services.conversations.get(request.path_params["conversation_id"])
    body = await read_body(request, PersonSays, runtime.settings.max_body_bytes)
    who = operator_of(request).name
    message_id = await runtime.services.handoffs.say(conversation.id, who, body.text)
    return WireResponse(PersonMessageSent(message_id), status_code=201)
