"""The AG-UI endpoint: ``POST /agui/{agentId}``, AG-UI's ``RunAgentInput`` in, the run out as
AG-UI events over SSE — so an existing AG-UI client (``@ag-ui/client``'s ``HttpAgent``, and
the frameworks built on it) can use a Hostcall agent (docs/protocol.md).

A thread is a Hostcall conversation, its id derived from the agent and the ``threadId``.
Each request is one AG-UI run:

- tool messages in the input answer the calls this client was handed (by call id); else the
  last message, a user message, starts a Hostcall run;
- the agent's client-side tools that the client declares in ``tools`` are the client's to
  run: when the model calls one, the AG-UI run ends (``RUN_FINISHED``) with the call in its
  ``TOOL_CALL_*`` events, and the client's next request carries the result;
- its other tools are page tools, admitted by the agent's ``page_tools`` block as a page's
  are (hostcall/page_tools.py) and frozen with the run; one refused ends the AG-UI run with
  ``RUN_ERROR`` (``page_tool_refused``, naming the tool and the reason);
- a call that waits for a person (an approval, or a client-side call no client of the thread
  runs, which a person answers as the widget's form) ends the AG-UI run with AG-UI's
  interrupt outcome, and the client's next request answers it in ``resume``
  (hostcall/interrupts.py). A request with neither a resume nor a new message, on a thread
  with interrupts pending, is a reload: the run ends at once with the same interrupts;
- a reload first hands over the ``TOOL_CALL_RESULT`` of every settled call whose result the
  client's history lacks (a client that aborted its run while a write was in flight reads
  how it ended: a write that may have run says so; nothing is run again);
- server-side tools, guardrails and every other policy run on the server, as for any
  surface.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from hostcall.agui_files import admit as admit_files
from hostcall.agui_files import body_limit
from hostcall.agui_files import keep as keep_files
from hostcall.errors import BadRequest, Conflict, HostcallError, NotFound
from hostcall.interrupts import Interrupts
from hostcall.origins import check_request_origin
from hostcall.page_context import admit_described
from hostcall.page_tools import Refused, agent_names
from hostcall.page_tools import admit as admit_page_tools
from hostcall.protocol.agui_fields import agui_event, encode_agui
from hostcall.protocol.codes import ErrorCode, RunErrorCode
from hostcall.protocol.events import (
    CustomName,
    EventType,
    Interrupt,
    RunError,
    RunFinished,
    RunOutcome,
    RunStarted,
    encode,
)
from hostcall.protocol.page_tool import PageTool
from hostcall.protocol.requests import read_body
from hostcall.protocol.run_input import InputMessage, RunAgentInput
from hostcall.protocol.wire import dumps
from hostcall.runtime import runtime_of
from hostcall.services import CallService
from hostcall.services.logs import LogService
from hostcall.visitors.sessions import bearer_token

# A stream waits this long for news before looking at the store again (the broker only wakes
# it up; the store is the source of truth).
POLL_SECONDS = 5.0
LF = "\n"


def thread_conversation_id(agent_id: str, thread_id: str, person: str | None = None) -> str:
    """A thread's conversation; an identified person's threads are theirs alone (the same
    thread id from anyone else, or from nobody, is another conversation)."""
    key = f"{agent_id}\0{thread_id}" if person is None else f"{agent_id}\0{person}\0{thread_id}"
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"t_{digest[:32]}"


async def run_agent(request: Request) -> EventSourceResponse:
    runtime = runtime_of(request)
    agent_id = request.path_params["agent_id"]
    agent = runtime.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r}", code=ErrorCode.UNKNOWN_AGENT)
    # A browser's Origin must be allowed. The agent's limits are the widget's API's: a new
    # thread is a new conversation (per client address and per agent), so a fresh thread
    # id is no way around them, and each request costs one message (it may start a run).
    check_request_origin(request, agent.allowed_origins)
    runtime.door.admit()  # before anything is read or stored (hostcall/door.py)
    limit = body_limit(runtime.settings.max_body_bytes, agent.attachments)
    body = await read_body(request, RunAgentInput, limit)
    # The site's identity token for its visitor, as this endpoint's bearer token.
    identity = await runtime.identities.of_request(request, agent, token=bearer_token(request))
    person = identity.sub if identity else None
    client = request.client.host if request.client else "unknown"
    # Checked first, as the widget's is: a refused context costs no message of the quota.
    context = admit_described(agent.page_context, body.context)
    client_tools = {t.name for t in agent.tools if t.kind == "client"}
    offered = [t for t in body.definitions if t.name not in client_tools]
    page_tools: list[PageTool] = []
    if agent.page_tools is not None and offered:
        # The client's other tools are its page tools; without a page_tools block they are
        # ignored, as they always were. A refused one ends the run before anything is kept.
        page_tools, refused = admit_page_tools(agent.page_tools, offered, taken=agent_names(agent))
        if refused:
            return _refused(body, refused[0])
    cid = thread_conversation_id(agent.id, body.thread_id, person)
    # The new message's files, checked as uploads are before anything is kept.
    last = body.messages[-1] if body.messages and body.messages[-1].role == "user" else None
    files = await admit_files(
        runtime.services.attachments, agent.attachments, cid, last, request
    ) if last is not None else ()  # fmt: skip
    new = await runtime.services.conversations.find(cid) is None
    if new:
        await runtime.quotas.new_conversation(agent.id, agent.limits, client)
    await runtime.quotas.new_message(agent.id, agent.limits, cid, client, person=person)
    tools = tuple(n for n in body.tools if n in client_tools)
    conversation = await runtime.services.conversations.thread(
        cid, agent.id, person, tools, tuple(t.stored() for t in page_tools), new=new
    )
    declared = frozenset(body.tools)
    interrupts = Interrupts(runtime.services.calls)
    queue = runtime.broker.subscribe(conversation.id)
    refusal: HostcallError | None = None
    reoffered: list[Interrupt] = []
    unseen: set[str] = set()
    idle = False
    try:
        start = await runtime.services.logs.end(conversation.id)
        try:
            if body.resume:
                await interrupts.resume(conversation.id, body.resume, declared)
        except HostcallError as exc:
            # AG-UI's rule: a resume that cannot be applied is a RUN_ERROR (with our code).
            refusal = exc
        answered: set[str] = set()
        if refusal is None:
            answered = await runtime.services.calls.answer_from_client(
                conversation.id, body.messages
            )
        if refusal is None and not body.resume and not answered:
            if not _has_user_text(body.messages):
                unseen = await runtime.services.calls.unseen_results(conversation.id, body.messages)
            reoffered = await interrupts.pending(conversation.id, declared)
            if reoffered and _has_user_text(body.messages):
                ids = ", ".join(i.id for i in reoffered)
                refusal = Conflict(
                    f"this thread waits for its interrupts ({ids}): answer them in 'resume' "
                    "before a new message",
                    code=ErrorCode.INTERRUPTS_PENDING,
                    interrupts=[i.id for i in reoffered],
                )
            elif not reoffered and (new or _has_user_text(body.messages)):
                visitor = identity.visitor if identity else None
                text = _user_text(body.messages)
                sent = await keep_files(
                    runtime.services.attachments, agent.attachments, conversation, files
                )
                await runtime.services.runs.start(
                    conversation, text, visitor=visitor, context=context, attachments=sent
                )
            elif not reoffered:
                # A reload (the thread's history, nothing new): it follows the run that goes
                # on, or ends at once with nothing to do. It never runs anything again.
                idle = not await runtime.services.runs.active(conversation.id)
    except BaseException:
        runtime.broker.unsubscribe(conversation.id, queue)
        raise

    def finished(
        pending: list[Interrupt] | None = None, handed: tuple[str, ...] = ()
    ) -> ServerSentEvent:
        outcome = (
            RunOutcome("interrupt", tuple(pending))
            if pending
            else RunOutcome("success", pending_tool_call_ids=handed or None)
        )
        return _sse(*encode(RunFinished(body.thread_id, body.run_id, outcome)))

    async def frames() -> AsyncIterator[ServerSentEvent]:
        yield _sse(*encode(RunStarted(body.thread_id, body.run_id)))
        # A result handed over here is not relayed again if it settled since ``start``.
        relay = _Relay(runtime.services.calls, declared, answered | unseen)
        last = start
        ended = False
        try:
            for data in await _results_of(runtime.services.logs, conversation.id, unseen):
                yield _sse(EventType.TOOL_CALL_RESULT, dumps(agui_event(data)))
            if refusal is not None:
                ended = True
                details = refusal.details or None
                error = RunError(refusal.message, refusal.code.value, body.run_id, details)
                yield _sse(*encode_agui(error))
                return
            if reoffered or idle:
                ended = True
                yield finished(reoffered)
                return
            look = True  # whether the thread may now wait only for people
            while True:
                for event in await runtime.services.logs.after(conversation.id, last):
                    last = event.seq
                    out = await relay.translate(event.name, event.data)
                    if out is not None:
                        shaped = agui_event(out)
                        yield _sse(event.name, event.encoded if shaped is out else dumps(shaped))
                    if relay.ended:
                        ended = True
                        if relay.ended == EventType.RUN_FINISHED:
                            yield finished()
                        return
                look = look or relay.moved
                relay.moved = False
                if relay.handed_off or look:
                    look = False
                    # Every event of the step that called the client's tool (or asked for
                    # a person) is committed together, so all its calls were in the page
                    # just read.
                    waiting = await interrupts.waiting(conversation.id, declared)
                    if relay.handed_off or waiting:
                        ended = True
                        yield finished(waiting, tuple(relay.handed))
                        return
                try:
                    await asyncio.wait_for(queue.get(), POLL_SECONDS)
                except TimeoutError:
                    pass
        finally:
            runtime.broker.unsubscribe(conversation.id, queue)
            if not ended:
                # The client went away mid-run: AG-UI's abortRun closes the request, and an
                # AG-UI run lives only as long as its request (nothing resumes its stream).
                # Stop it, as the widget's Stop does, in a task of the engine's own: this
                # one is being cancelled. A run that ended with interrupts is not stopped:
                # it waits for the person's answer in a later request.
                runtime.services.runs.abandon(conversation.id)

    return EventSourceResponse(
        frames(),
        ping=int(runtime.settings.ping_seconds),
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        sep=LF,
    )


class _Relay:
    """Decides, event by event, what an AG-UI client of one request sees, and when it ends."""

    def __init__(self, calls: CallService, declared: frozenset[str], answered: set[str]) -> None:
        self.calls = calls
        self.declared = declared
        self.answered = answered  # results the client sent: it has them already
        self.user_messages: set[str] = set()
        self.handed_off = False
        self.handed: list[str] = []  # the calls handed to the client, in order
        self.ended: EventType | None = None
        # A call moved in a way that may leave the run waiting only for people.
        self.moved = False

    async def translate(self, name: str, data: dict[str, Any]) -> dict[str, Any] | None:
        kind = data["type"]
        if kind == EventType.RUN_STARTED:
            return None  # the AG-UI run began with the client's own ids
        if kind == EventType.RUN_FINISHED:
            self.ended = EventType.RUN_FINISHED
            return None  # replaced by one with the client's ids
        if kind == EventType.RUN_ERROR:
            self.ended = EventType.RUN_ERROR
            return data
        if kind == EventType.TEXT_MESSAGE_START and data.get("role") == "user":
            self.user_messages.add(data["messageId"])
        if kind.startswith("TEXT_MESSAGE_") and data.get("messageId") in self.user_messages:
            return None  # the client sent this message itself
        if kind == EventType.TOOL_CALL_RESULT:
            self.moved = True
            if data["toolCallId"] in self.answered:
                return None
        if name == CustomName.TOOL_CALL_APPROVAL_REQUESTED:
            self.moved = True
        if name == CustomName.TOOL_CALL_DISPATCH and data["value"].get("kind") == "client":
            self.moved = True
            call_id = data["value"]["toolCallId"]
            if await self.calls.hand_to_client(call_id, self.declared):
                self.handed_off = True
                self.handed.append(call_id)
        return data


def _refused(body: RunAgentInput, refused: Refused) -> EventSourceResponse:
    """The AG-UI run that ends at once: the client offered a tool the agent refuses."""
    error = RunError(
        f"the tool {refused.name[:80]!r} was refused: {refused.reason.value}",
        RunErrorCode.PAGE_TOOL_REFUSED,
        body.run_id,
    )

    async def frames() -> AsyncIterator[ServerSentEvent]:
        yield _sse(*encode(RunStarted(body.thread_id, body.run_id)))
        yield _sse(*encode_agui(error))

    return EventSourceResponse(frames(), headers={"Cache-Control": "no-store"}, sep=LF)


async def _results_of(logs: LogService, cid: str, calls: set[str]) -> list[dict[str, Any]]:
    """The ``TOOL_CALL_RESULT`` events of ``calls`` in the thread's log, in order."""
    found: list[dict[str, Any]] = []
    seq = 0
    while calls:
        page = await logs.after(cid, seq)
        if not page:
            break
        seq = page[-1].seq
        found += [e.data for e in page if e.data.get("type") == EventType.TOOL_CALL_RESULT
                  and e.data.get("toolCallId") in calls]  # fmt: skip
    return found


def _has_user_text(messages: tuple[InputMessage, ...]) -> bool:
    """Whether the last message is a new user message: text, or files."""
    last = messages[-1] if messages else None
    return last is not None and last.role == "user" and bool(last.text.strip() or last.files)


def _user_text(messages: tuple[InputMessage, ...]) -> str:
    if not _has_user_text(messages):
        raise BadRequest(
            "nothing to run: the last message is not a user message with text or files, and"
            " no tool message answers a call of this thread",
            field="messages",
        )
    return messages[-1].text.strip()


def _sse(name: str, data: str) -> ServerSentEvent:
    # Do not "fix" to sse-starlette's default CRLF: @ag-ui/client 1.0 splits events on "\n\n"
    # only, and reads CRLF-framed events as one (the SSE spec allows both).
    return ServerSentEvent(data=data, event=name, sep=LF)


async def capabilities(request: Request) -> JSONResponse:
    """AG-UI's ``AgentCapabilities`` (ag-ui docs/concepts/capabilities.mdx): what a client
    can count on before its first run. ``HttpAgent`` has no ``getCapabilities`` of its own;
    a client reads this with one GET."""
    runtime = runtime_of(request)
    agent_id = request.path_params["agent_id"]
    agent = runtime.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r}", code=ErrorCode.UNKNOWN_AGENT)
    tools = [
        {"name": t.name, "description": t.description, "parameters": t.input_schema}
        for t in agent.tools
    ]
    body = {
        "identity": {"name": agent.id, "type": "hostcall"},
        "transport": {"streaming": True},
        "tools": {
            "supported": True,
            "items": tools,
            "parallelCalls": True,
            # The agent's client-side tools are the client's to run, when it names them.
            "clientProvided": any(t.kind == "client" for t in agent.tools),
        },
        "humanInTheLoop": {
            "supported": True,
            "approvals": True,
            "interrupts": True,
            "approveWithEdits": True,
        },
    }
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


def agui_routes() -> list[BaseRoute]:
    return [
        Route("/agui/{agent_id}", run_agent, methods=["POST"]),
        Route("/agui/{agent_id}/capabilities", capabilities, methods=["GET"]),
    ]
