"""Known visitors in the widget's API: a page says who its visitor is, and their
conversations follow them (docs/identity.md).

``POST /api/agents/{agent}/session/identify`` takes the page's identity token
(``Hostcall-Identity``) and answers with the conversation this browser goes on with, as the person:

1. the conversation this tab holds (its session token) or this browser's cookie names, if it
   is already theirs;
2. else that conversation, *adopted*, if it is anonymous and has begun (a message was sent),
   or if the person has none yet: it becomes theirs, and moves to its next session
   generation, so any token of it from before (a copy anyone kept) is refused;
3. else the person's conversation they wrote in last (from any browser or device);
4. else none yet: ``404 no_session``, as when resuming finds nothing. The widget's first
   message creates the conversation, with the identity token, so it is theirs; a person who
   signs in and never writes leaves no empty conversation behind.

A conversation of another person is never adopted, opened or resumed, whatever the tab
holds. ``POST .../conversations/{id}/open`` opens one of the person's conversations (their
history); ``POST /api/conversations/{id}/logout`` ends this browser's session of a
conversation (its tokens are refused from then on).
"""

from __future__ import annotations

from dataclasses import replace

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.agents import Agent
from hostcall.errors import HostcallError, NotFound
from hostcall.origins import check_request_origin
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.requests import NewConversation, ResumeSession, read_body
from hostcall.responses import WireResponse
from hostcall.runtime import Runtime, runtime_of
from hostcall.store.records import Conversation
from hostcall.tokens import Claims, Purpose
from hostcall.visitors.session_requests import session_conversation
from hostcall.visitors.sessions import bearer_token


def _agent(request: Request, runtime: Runtime) -> Agent:
    agent_id = request.path_params["agent_id"]
    agent = runtime.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r}", code=ErrorCode.UNKNOWN_AGENT)
    return agent


async def _held(
    request: Request, runtime: Runtime, agent: Agent
) -> tuple[Conversation, Claims] | None:
    """The conversation of the session token this tab holds, and its claims, if current."""
    token = bearer_token(request)
    if token is None:
        return None
    try:
        claims = runtime.tokens.verify(Purpose.SESSION, token)
    except HostcallError:
        return None
    conversation = await runtime.services.conversations.of_agent(claims.conversation_id, agent.id)
    if conversation is None:
        return None
    try:
        runtime.sessions.check_generation(conversation, claims)
    except HostcallError:
        return None
    return conversation, claims


async def _cookied(
    request: Request, runtime: Runtime, agent: Agent, parent: str, key: str, person: str
) -> Conversation | None:
    """The conversation this browser's cookie names (resumed: next generation), if any."""
    cookie = request.cookies.get(runtime.sessions.cookie_name(parent))
    try:
        conversation, claims = await runtime.sessions.resume(cookie, agent, key, person=person)
    except HostcallError:
        return None
    return replace(conversation, session_generation=claims.generation)


async def identify(request: Request) -> Response:
    runtime = runtime_of(request)
    agent = _agent(request, runtime)
    # Like resuming, only the widget's own page: it reads this browser's cookie, whose Path
    # (the session endpoint's) it is under.
    check_request_origin(request, (), required=True)
    body = await read_body(request, NewConversation, runtime.settings.max_body_bytes)
    parent = runtime.sessions.parent_origin(body.parent_origin, agent)
    identity = await runtime.identities.of_request(request, agent, needed=True)
    assert identity is not None
    person = identity.sub
    held = await _held(request, runtime, agent)
    current = held[0] if held else None
    # The browser the cookie (with the key) or the tab's token was issued to, else a new one.
    browser = runtime.sessions.this_browser(
        request, parent, body.resume_key, held=held[1] if held else None
    )
    if current is None or current.person not in (None, person):
        current = await _cookied(request, runtime, agent, parent, body.resume_key, person)
    found = await runtime.services.conversations.choose(agent.id, identity.sub, current)
    if found is None:
        raise NotFound("this person has no conversation yet", code=ErrorCode.NO_SESSION)
    chosen, adopted = found
    opened = runtime.sessions.opened(chosen, agent, browser=browser)
    response = WireResponse(replace(opened, adopted=adopted))
    if body.resume_key:
        binding = runtime.sessions.binding(body.resume_key)
        runtime.sessions.set_cookie(
            response, chosen, agent, parent, binding=binding, browser=browser
        )
    return response


async def open_conversation(request: Request) -> Response:
    runtime = runtime_of(request)
    agent = _agent(request, runtime)
    check_request_origin(request, (), required=True)
    body = await read_body(request, ResumeSession, runtime.settings.max_body_bytes)
    parent = runtime.sessions.parent_origin(body.parent_origin, agent)
    identity = await runtime.identities.of_request(request, agent, needed=True)
    assert identity is not None
    conversation = await runtime.services.conversations.persons(
        agent.id, identity.sub, request.path_params["conversation_id"]
    )
    browser = runtime.sessions.this_browser(request, parent, body.resume_key)
    response = WireResponse(runtime.sessions.opened(conversation, agent, browser=browser))
    if body.resume_key:
        binding = runtime.sessions.binding(body.resume_key)
        runtime.sessions.set_cookie(
            response, conversation, agent, parent, binding=binding, browser=browser
        )
    return response


async def logout(request: Request) -> Response:
    """This browser leaves the conversation: every token of its session is refused from now
    (a person's other browsers resume theirs with their own cookie and identity)."""
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    await runtime.services.conversations.leave(conversation)
    return Response(status_code=204)


def known_visitor_routes() -> list[BaseRoute]:
    return [
        Route("/api/agents/{agent_id}/session/identify", identify, methods=["POST"]),
        Route(
            "/api/agents/{agent_id}/conversations/{conversation_id}/open",
            open_conversation,
            methods=["POST"],
        ),
        Route("/api/conversations/{conversation_id}/logout", logout, methods=["POST"]),
    ]
