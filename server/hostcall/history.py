"""A visitor's history (docs/protocol.md "History"): their conversations with the agent,
to list, open (switch to) and delete, each request made with the session token of the
conversation the widget holds now.

Whose history it is follows from that token, never from the request's body: a signed-in
person's conversations (``Conversation.person``) on any browser, else the anonymous
conversations of the browser the token was issued to (``Claims.browser``, a random id that
only the browser's HttpOnly cookie carries: hostcall/visitors/sessions.py). The resume key is never
enough: a conversation created with the key but without the cookie is a new browser's, with
an empty history. Another owner's conversation, or another agent's, is answered exactly as
one that does not exist: nobody learns that an id is in use.
"""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.errors import Forbidden, NotFound
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.cursors import page_cursor, read_cursor
from hostcall.protocol.requests import ResumeSession, read_body
from hostcall.protocol.responses import History, HistoryEntry
from hostcall.responses import WireResponse
from hostcall.runtime import Runtime, runtime_of
from hostcall.store.records import Conversation
from hostcall.tokens import Claims
from hostcall.visitors.session_requests import session_claims

# Conversations per page of a history.
PAGE = 50


async def _holder(request: Request, runtime: Runtime) -> tuple[Conversation, Claims]:
    """The conversation whose session token the request holds, and the token's claims; for
    a person's, proved again with the page's identity token of that person (a history spans
    every device, so a session token alone, past its person's sign-out, lists nothing)."""
    holder, claims = await session_claims(request, runtime)
    agent = runtime.agents.get(holder.agent_id)
    if holder.person is not None and agent is not None and agent.identity is not None:
        identity = await runtime.identities.of_request(request, agent, needed=True)
        if identity is None or identity.sub != holder.person:
            raise Forbidden(
                "the identity token is another person's than this conversation's",
                code=ErrorCode.WRONG_PERSON,
            )
    return holder, claims


async def _owned(request: Request, runtime: Runtime) -> tuple[Conversation, Claims, Conversation]:
    """The token's conversation and claims, and the one in the path if the holder owns it."""
    holder, claims = await _holder(request, runtime)
    other = await runtime.services.conversations.owned(
        holder, request.path_params["other_id"], browser=claims.browser
    )
    return holder, claims, other


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


async def list_history(request: Request) -> Response:
    runtime = runtime_of(request)
    holder, claims = await _holder(request, runtime)
    before = read_cursor(request.query_params.get("before"))
    lines = await runtime.services.conversations.history(
        holder, browser=claims.browser, limit=PAGE + 1, before=before
    )
    page = lines[:PAGE]
    last = page[-1] if len(lines) > PAGE else None
    return WireResponse(
        History(
            conversations=tuple(
                HistoryEntry(c.id, c.title, _iso(c.created_at), _iso(c.updated_at)) for c in page
            ),
            next=page_cursor(last.updated_at, last.id) if last else None,
        )
    )


async def open_conversation(request: Request) -> Response:
    """Switch to another conversation of the history: its tokens, and the cookie names it
    (the widget boots again resuming it, and so does a reload), bound to the page's key and
    carrying the browser the held token was issued to (this route is not sent the cookie)."""
    runtime = runtime_of(request)
    _, claims, other = await _owned(request, runtime)
    agent = runtime.agents.get(other.agent_id)
    if agent is None:
        raise NotFound(
            f"agent {other.agent_id!r} is no longer loaded", code=ErrorCode.UNKNOWN_AGENT
        )
    body = await read_body(request, ResumeSession, runtime.settings.max_body_bytes)
    parent = runtime.sessions.parent_origin(body.parent_origin, agent)
    browser = claims.browser or runtime.sessions.new_browser()
    response = WireResponse(runtime.sessions.opened(other, agent, browser=browser))
    if body.resume_key:  # as at creation: the cookie binds the page's key, or is not set
        binding = runtime.sessions.binding(body.resume_key)
        runtime.sessions.set_cookie(
            response, other, agent, parent, binding=binding, browser=browser
        )
    return response


async def delete_conversation(request: Request) -> Response:
    """Delete a conversation of the history whole (hostcall/visitors/personal_data.py), audited."""
    runtime = runtime_of(request)
    holder, _, other = await _owned(request, runtime)
    await runtime.services.conversations.delete(holder, other)
    return Response(status_code=204)


def history_routes() -> list[BaseRoute]:
    base = "/api/conversations/{conversation_id}/history"
    return [
        Route(base, list_history, methods=["GET"]),
        Route(base + "/{other_id}", open_conversation, methods=["POST"]),
        Route(base + "/{other_id}", delete_conversation, methods=["DELETE"]),
    ]
