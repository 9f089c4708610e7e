"""What the widget's API checks first on a request made with a session token: the
conversation in the path is the token's, at its current session generation, and a browser's
``Origin`` is the widget's or one the agent allows (docs/protocol.md "Sessions")."""

from __future__ import annotations

from starlette.requests import Request

from hostcall.errors import Forbidden
from hostcall.origins import check_request_origin
from hostcall.runtime import Runtime
from hostcall.store.records import Conversation, Surface
from hostcall.tokens import Claims, Purpose
from hostcall.visitors.sessions import bearer_token


async def session_conversation(request: Request, runtime: Runtime) -> Conversation:
    """The conversation in the path, if the bearer session token is for it."""
    conversation, _ = await session_claims(request, runtime)
    return conversation


async def session_claims(request: Request, runtime: Runtime) -> tuple[Conversation, Claims]:
    """The conversation in the path and the claims of the bearer session token for it (the
    browser it was issued to, for a history)."""
    claims = _claims(request, runtime)
    conversation = await runtime.services.conversations.get(claims.conversation_id)
    _check(request, runtime, conversation, claims)
    return conversation, claims


async def session_surfaces(
    request: Request, runtime: Runtime
) -> tuple[Conversation, list[Surface]]:
    """``session_conversation``, with the conversation's surfaces read with it (one
    statement on PostgreSQL): for a message, whose run plans with its pages' tools."""
    claims = _claims(request, runtime)
    conversation, surfaces = await runtime.services.conversations.with_surfaces(
        claims.conversation_id
    )
    _check(request, runtime, conversation, claims)
    return conversation, surfaces


def _claims(request: Request, runtime: Runtime) -> Claims:
    claims = runtime.tokens.verify(Purpose.SESSION, bearer_token(request))
    conversation_id = request.path_params["conversation_id"]
    if claims.conversation_id != conversation_id:
        raise Forbidden(f"this session token is for another conversation than {conversation_id}")
    return claims


def _check(request: Request, runtime: Runtime, conversation: Conversation, claims: Claims) -> None:
    runtime.remember_agent(conversation.id, conversation.agent_id)
    runtime.sessions.check_generation(conversation, claims)
    check_origin(request, runtime, conversation.agent_id)


def check_origin(request: Request, runtime: Runtime, agent_id: str | None) -> None:
    """A browser's Origin is the widget's or one the agent allows."""
    if "origin" not in request.headers:
        return
    agent = runtime.agents.get(agent_id) if agent_id else None
    check_request_origin(request, agent.allowed_origins if agent else ())


def client_of(request: Request) -> str:
    """The client's address, as the limits per address count it."""
    return request.client.host if request.client else "unknown"
