"""What the widget's API checks first on a request made with a session token: the
conversation in the path is the token's, at its current session generation, and a browser's
``Origin`` is the widget's or one the agent allows (docs/protocol.md "Sessions")."""

from __future__ import annotations

from starlette.requests import Request

from hostcall.errors import Forbidden
from hostcall.origins import check_request_origin
from hostcall.runtime import Runtime
from hostcall.store.records import Conversation
from hostcall.tokens import Claims, Purpose
from hostcall.visitors.sessions import bearer_token


async def session_conversation(request: Request, runtime: Runtime) -> Conversation:
    """The conversation in the path, if the bearer session token is for it."""
    conversation, _ = await session_claims(request, runtime)
    return conversation


async def session_claims(request: Request, runtime: Runtime) -> tuple[Conversation, Claims]:
    """The conversation in the path and the claims of the bearer session token for it (the
    browser it was issued to, for a history)."""
    claims = runtime.tokens.verify(Purpose.SESSION, bearer_token(request))
    conversation_id = request.path_params["conversation_id"]
    if claims.conversation_id != conversation_id:
        raise Forbidden(f"this session token is for another conversation than {conversation_id}")
    conversation = await runtime.services.conversations.get(conversation_id)
    runtime.remember_agent(conversation.id, conversation.agent_id)
    runtime.sessions.check_generation(conversation, claims)
    check_origin(request, runtime, conversation.agent_id)
    return conversation, claims


def check_origin(request: Request, runtime: Runtime, agent_id: str | None) -> None:
    """A browser's Origin is the widget's or one the agent allows."""
    if "origin" not in request.headers:
        return
    agent = runtime.agents.get(agent_id) if agent_id else None
    check_request_origin(request, agent.allowed_origins if agent else ())


def client_of(request: Request) -> str:
    """The client's address, as the limits per address count it."""
    return request.client.host if request.client else "unknown"
