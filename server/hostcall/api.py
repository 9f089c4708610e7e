"""The JSON API of docs/protocol.md: conversations, their messages, runs and surfaces (a
call's answers and decisions: hostcall/call_answers.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.agents import Agent
from hostcall.errors import BadRequest, Forbidden, NotFound, Unprocessable
from hostcall.origins import check_request_origin
from hostcall.page_context import admit
from hostcall.page_tools import admit as admit_page_tools
from hostcall.page_tools import agent_names
from hostcall.protocol.codes import ErrorCode, RunErrorCode
from hostcall.protocol.requests import (
    Capabilities,
    NewConversation,
    NewFeedback,
    NewMessage,
    NewRating,
    RetryRun,
    read_body,
    surface_id,
)
from hostcall.protocol.responses import (
    AdmittedPageTool,
    FeedbackSaved,
    MessageHeld,
    RatingSaved,
    RefusedPageTool,
    RunAccepted,
    RunStopped,
    StreamToken,
    SurfaceTools,
)
from hostcall.quotas import DEFAULT_LIMITS
from hostcall.responses import StoredWireResponse, WireResponse
from hostcall.runtime import Runtime, runtime_of
from hostcall.services.runs import Held
from hostcall.store.records import (
    Conversation,
)
from hostcall.visitors.session_requests import client_of, session_conversation, session_surfaces
from hostcall.visitors.visitor import Visitor


async def _visitor_of(
    request: Request, runtime: Runtime, agent: Agent, conversation: Conversation
) -> Visitor | None:
    """Who a run started now acts for: the conversation's person, proved again with a token
    the page holds now (so a run never acts on claims past their ``exp``); None for an
    anonymous conversation."""
    if conversation.person is None or agent.identity is None:
        return None
    identity = await runtime.identities.of_request(request, agent, needed=True)
    assert identity is not None
    if identity.sub != conversation.person:
        raise Forbidden(
            "the identity token is another person's than this conversation's",
            code=ErrorCode.WRONG_PERSON,
        )
    return identity.visitor


async def create_conversation(request: Request) -> Response:
    runtime = runtime_of(request)
    agent_id = request.path_params["agent_id"]
    agent = runtime.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r}", code=ErrorCode.UNKNOWN_AGENT)
    check_request_origin(request, agent.allowed_origins, required=True)
    runtime.door.admit()
    body = await read_body(request, NewConversation, runtime.settings.max_body_bytes)
    parent = runtime.sessions.parent_origin(body.parent_origin, agent)
    # An identified visitor's new conversation is theirs from the start.
    identity = await runtime.identities.of_request(request, agent)
    await runtime.quotas.new_conversation(agent.id, agent.limits, client_of(request))
    person = identity.sub if identity else None
    # The conversation joins this browser's anonymous history only with the cookie that
    # carries the browser and the key it binds; the key alone starts a new browser, whose
    # history is empty (hostcall/visitors/sessions.py). Without a key no cookie could ever resume:
    # none is set, and the conversation is in no browser's history.
    key = body.resume_key
    browser = runtime.sessions.this_browser(request, parent, key) if key else None
    conversation = await runtime.services.conversations.start(
        agent.id, body.locale, person=person, browser=browser
    )
    runtime.remember_agent(conversation.id, agent.id)
    opened = runtime.sessions.opened(conversation, agent, browser=browser)
    response = WireResponse(opened, status_code=201)
    if key and browser is not None:
        binding = runtime.sessions.binding(key)
        runtime.sessions.set_cookie(
            response, conversation, agent, parent, binding=binding, browser=browser
        )
    return response


async def snapshot(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    surface = surface_id(request.query_params.get("surface"), field="surface")
    return StoredWireResponse(await runtime.services.snapshots.read(conversation, surface))


async def stream_token(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    ticket = runtime.stream_ticket(
        conversation.id, conversation.session_generation, conversation.person
    )
    return WireResponse(StreamToken(ticket))


async def capabilities(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, Capabilities, runtime.settings.max_body_bytes)
    tools = body.tools
    agent = runtime.agents.get(conversation.agent_id)
    if agent is None:
        raise NotFound(
            f"agent {conversation.agent_id!r} is no longer loaded", code=ErrorCode.UNKNOWN_AGENT
        )
    unknown = sorted(set(tools) - {t.name for t in agent.tools})
    if unknown:
        raise BadRequest(f"agent {agent.id!r} has no tool {unknown[0]!r}", field="tools")
    # Refused ones are named and not kept: the widget tells the page why.
    admitted, refused = admit_page_tools(
        agent.page_tools, body.page_tools, taken=agent_names(agent)
    )
    surface = await runtime.services.surfaces.declare(
        conversation.id, body.surface_id, tools, tuple(t.stored() for t in admitted)
    )
    return WireResponse(
        SurfaceTools(
            surface,
            tuple(tools),
            tuple(AdmittedPageTool(t.name, t.digest) for t in admitted),
            tuple(RefusedPageTool(r.name, r.reason.value) for r in refused),
        )
    )


async def surface_activity(request: Request) -> Response:
    """The person did something on this surface (focus, typing, a click): calls go here."""
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    surface = surface_id(request.path_params["surface_id"], field="surface_id")
    assert surface is not None
    await runtime.services.surfaces.touch(conversation.id, surface)
    return Response(status_code=204)


async def surface_leave(request: Request) -> Response:
    """The page is going away (reload, navigation, closed tab): its calls move on now,
    without waiting out the grace period."""
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    surface = surface_id(request.path_params["surface_id"], field="surface_id")
    assert surface is not None
    await runtime.services.surfaces.leave(conversation.id, surface)
    return Response(status_code=204)


async def post_message(request: Request) -> Response:
    runtime = runtime_of(request)
    runtime.door.admit()  # before the session's read: it would wait for the same connections
    conversation, surfaces = await session_surfaces(request, runtime)
    body = await read_body(request, NewMessage, runtime.settings.max_body_bytes)
    agent = runtime.agents.get(conversation.agent_id)
    # Checked first: a refused context, or a file the message may not send, costs the
    # visitor no message of their quota.
    context = admit(agent.page_context if agent is not None else None, body.context)
    policy = agent.attachments if agent is not None else None
    files = await runtime.services.attachments.sendable(conversation.id, policy, body.attachments)
    visitor = None
    if agent is not None:
        visitor = await _visitor_of(request, runtime, agent, conversation)
        await runtime.quotas.new_message(
            agent.id, agent.limits, conversation.id, client_of(request), person=conversation.person
        )
    sent = await runtime.services.runs.send(
        conversation, body.text, simulate=body.simulate, visitor=visitor, context=context,
        attachments=files, surfaces=surfaces,
    )  # fmt: skip
    if isinstance(sent, Held):
        # A member of the operator's team holds the conversation: the message is theirs to read.
        return WireResponse(MessageHeld(sent.message_id, sent.member), status_code=202)
    return WireResponse(RunAccepted(sent.id), status_code=202)


async def message_feedback(request: Request) -> Response:
    """The visitor rates one of the agent's replies (again: the latest rating stands)."""
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, NewFeedback, runtime.settings.max_body_bytes)
    agent = runtime.agents.get(conversation.agent_id)
    limits = agent.limits if agent is not None else DEFAULT_LIMITS
    await runtime.quotas.new_rating(
        conversation.agent_id, limits, conversation.id, client_of(request)
    )
    message_id = request.path_params["message_id"]
    await runtime.services.feedback.rate(conversation, message_id, body.rating, body.comment)
    return WireResponse(FeedbackSaved(message_id, body.rating, body.comment))


async def conversation_rating(request: Request) -> Response:
    """The visitor rates the whole conversation, once, when the widget asks (the agent file's
    ``rating`` block); counted against the same limits as ratings of replies."""
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, NewRating, runtime.settings.max_body_bytes)
    agent = runtime.agents.get(conversation.agent_id)
    if agent is None or agent.rating is None:
        raise Unprocessable(
            f"the agent {conversation.agent_id!r} asks for no rating (its file has no"
            " rating block)",
            code=ErrorCode.RATING_NOT_ASKED,
        )
    await runtime.quotas.new_rating(agent.id, agent.limits, conversation.id, client_of(request))
    stored = await runtime.services.feedback.rate_conversation(
        conversation, body.score, body.remark
    )
    return WireResponse(RatingSaved(conversation.id, stored.score, stored.remark))


async def retry_run(request: Request) -> Response:
    """Retry after a failed run: a new run over the history as it is; nothing is re-sent."""
    runtime = runtime_of(request)
    runtime.door.admit()
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, RetryRun, runtime.settings.max_body_bytes)
    agent = runtime.agents.get(conversation.agent_id)
    visitor = None
    if agent is not None:  # counted and identified as a message is
        visitor = await _visitor_of(request, runtime, agent, conversation)
        await runtime.quotas.new_message(
            agent.id, agent.limits, conversation.id, client_of(request), person=conversation.person
        )
    run = await runtime.services.runs.retry(conversation, simulate=body.simulate, visitor=visitor)
    return WireResponse(RunAccepted(run.id), status_code=202)


async def _branch_visitor(
    request: Request, runtime: Runtime, conversation: Conversation
) -> Visitor | None:
    """Who a branch's run acts for, counted as a message is (a new run costs the same):
    once the branch is found possible, so a refused one costs nothing."""
    agent = runtime.agents.get(conversation.agent_id)
    if agent is None:
        return None
    visitor = await _visitor_of(request, runtime, agent, conversation)
    await runtime.quotas.new_message(
        agent.id, agent.limits, conversation.id, client_of(request), person=conversation.person
    )
    return visitor


async def edit_message(request: Request) -> Response:
    """The visitor edits their last message: a new run on a branch (services/branches.py)."""
    runtime = runtime_of(request)
    runtime.door.admit()
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, NewMessage, runtime.settings.max_body_bytes)
    if body.attachments or not body.text:
        raise Unprocessable(
            "an edit changes the message's text and carries no files; send a new message "
            "to attach some",
            code=ErrorCode.INVALID_MESSAGE,
        )
    agent = runtime.agents.get(conversation.agent_id)
    context = admit(agent.page_context if agent is not None else None, body.context)
    branches = runtime.services.branches
    plan = await branches.edit(
        conversation, request.path_params["message_id"], body.text, context=context
    )
    visitor = await _branch_visitor(request, runtime, conversation)
    run = await branches.start(plan, simulate=body.simulate, visitor=visitor)
    return WireResponse(RunAccepted(run.id), status_code=202)


async def regenerate_message(request: Request) -> Response:
    """The visitor has the last answer written again: a new run on a branch."""
    runtime = runtime_of(request)
    runtime.door.admit()
    conversation = await session_conversation(request, runtime)
    body = await read_body(request, RetryRun, runtime.settings.max_body_bytes)
    branches = runtime.services.branches
    plan = await branches.regenerate(conversation, request.path_params["message_id"])
    visitor = await _branch_visitor(request, runtime, conversation)
    run = await branches.start(plan, simulate=body.simulate, visitor=visitor)
    return WireResponse(RunAccepted(run.id), status_code=202)


async def stop_run(request: Request) -> Response:
    """The visitor's Stop: the run and its open calls end as ``cancelled``."""
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    stopped = await runtime.services.runs.stop(conversation.id, request.path_params["run_id"])
    return WireResponse(RunStopped(stopped.id, "stopped", RunErrorCode.CANCELLED))


def api_routes() -> list[BaseRoute]:
    return [
        Route("/api/agents/{agent_id}/conversations", create_conversation, methods=["POST"]),
        Route("/api/conversations/{conversation_id}", snapshot, methods=["GET"]),
        Route("/api/conversations/{conversation_id}/stream-token", stream_token, methods=["POST"]),
        Route("/api/conversations/{conversation_id}/capabilities", capabilities, methods=["POST"]),
        Route("/api/conversations/{conversation_id}/messages", post_message, methods=["POST"]),
        Route("/api/conversations/{conversation_id}/retry", retry_run, methods=["POST"]),
        Route(
            "/api/conversations/{conversation_id}/runs/{run_id}/stop", stop_run, methods=["POST"]
        ),
        Route(
            "/api/conversations/{conversation_id}/messages/{message_id}/edit",
            edit_message,
            methods=["POST"],
        ),
        Route(
            "/api/conversations/{conversation_id}/messages/{message_id}/regenerate",
            regenerate_message,
            methods=["POST"],
        ),
        Route(
            "/api/conversations/{conversation_id}/messages/{message_id}/feedback",
            message_feedback,
            methods=["POST"],
        ),
        Route("/api/conversations/{conversation_id}/rating", conversation_rating, methods=["POST"]),
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
    ]
