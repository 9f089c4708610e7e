"""Instance management: conversations, their runs, call ledger and events, and what an
operator may do about them. The console is one more surface: an answer or a decision sent
from here goes through the ledger's own path (the call's first answer wins, and every
surface, the visitor's widget included, sees the call settled).

No token of the visitor's conversation ever reaches a console page: calls are shown as
``ConsoleCall``, a list of what may be shown, not a list of what to hide.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hostcall import strictjson
from hostcall.console.accounts import Role
from hostcall.console.render import page
from hostcall.console.session import guarded, operator_of
from hostcall.console.usage_page import money
from hostcall.errors import BadRequest
from hostcall.protocol.console import (
    AuditItem,
    ConsoleAttachment,
    ConsoleCall,
    ConsoleEvent,
    ConsoleFeedback,
    ConsoleHandoff,
    ConsoleMessage,
    ConsoleRating,
    ConsoleRun,
    ConversationDetail,
    ConversationItem,
    ConversationList,
    RunCancelled,
)
from hostcall.protocol.numbers import whole_number
from hostcall.protocol.reading import read_json
from hostcall.protocol.requests import Decision, read_body
from hostcall.protocol.responses import CallStatus
from hostcall.protocol.wire import to_wire
from hostcall.responses import WireResponse
from hostcall.runtime import Runtime, runtime_of, services_of
from hostcall.store.console_records import (
    ConversationQuery,
    ConversationSummary,
    Feedback,
    Handoff,
    Rating,
)
from hostcall.store.records import CallState, RunStatus

PAGE_SIZE = 25
MAX_EVENTS = 500
_ANSWER_ACTIONS = ("call.answer", "call.approve", "call.reject", "call.expire")


# ---------------------------------------------------------------------------- conversations


def _query(request: Request) -> tuple[ConversationQuery, int]:
    params = request.query_params
    status = params.get("status") or None
    if status is not None and status not in set(RunStatus):
        raise BadRequest(f"status {status[:40]!r} is not a run status", field="status")
    handoff, feedback = params.get("handoff") or None, params.get("feedback") or None
    if handoff not in (None, "waiting", "taken"):
        raise BadRequest("handoff must be 'waiting' or 'taken'", field="handoff")
    if feedback not in (None, "up", "down"):
        raise BadRequest("feedback must be 'up' or 'down'", field="feedback")
    page_number = whole_number(params.get("page", "1"), "page", low=1, high=100_000)
    query = ConversationQuery(
        agent_id=params.get("agent") or None,
        run_status=RunStatus(status) if status else None,
        waiting=params.get("waiting") == "1",
        text=(params.get("q") or "").strip()[:200],
        person=params.get("person") or None,
        handoff=handoff,
        feedback=feedback,
        # One more than a page: whether there is a next page, without a COUNT(*).
        limit=PAGE_SIZE + 1,
        offset=(page_number - 1) * PAGE_SIZE,
    )
    return query, page_number


def _summary(item: ConversationSummary) -> ConversationItem:
    return ConversationItem(
        id=item.conversation.id,
        agent_id=item.conversation.agent_id,
        created_at=item.conversation.created_at,
        run_status=item.run_status.value if item.run_status else None,
        waiting=item.waiting_calls,
        first_message=item.first_message[:200],
        person=item.conversation.person,
        handoff=item.handoff,
        held_by=item.held_by,
        feedback_up=item.feedback_up,
        feedback_down=item.feedback_down,
    )


async def _listing(request: Request) -> ConversationList:
    query, number = _query(request)
    found = await services_of(request).inspection.list(query)
    return ConversationList(
        items=tuple(_summary(item) for item in found[:PAGE_SIZE]),
        page=number,
        has_more=len(found) > PAGE_SIZE,
    )


@guarded(Role.OPERATOR)
async def home(request: Request) -> Response:
    return RedirectResponse("/console/conversations", 303)


@guarded(Role.OPERATOR)
async def conversations_page(request: Request) -> Response:
    params = request.query_params
    filters = {
        "agent": params.get("agent", ""),
        "status": params.get("status", ""),
        "waiting": params.get("waiting") == "1",
        "q": params.get("q", "")[:200],
        "person": params.get("person", "")[:255],
        "handoff": params.get("handoff", ""),
        "feedback": params.get("feedback", ""),
    }
    return page(
        request,
        "conversations.html",
        operator_of(request),
        data=to_wire(await _listing(request)),
        filters=filters,
        agents=sorted(runtime_of(request).agents),
        statuses=[s.value for s in RunStatus],
    )


@guarded(Role.OPERATOR)
async def conversations_json(request: Request) -> Response:
    return WireResponse(await _listing(request))


# ---------------------------------------------------------------------------- one conversation


async def _detail(runtime: Runtime, conversation_id: str) -> ConversationDetail:
    found = await runtime.services.inspection.inspect(
        conversation_id, audit=1000, events=MAX_EVENTS
    )
    conversation, audit = found.conversation, found.audit
    answered_by = {
        e.call_id: {"actor": e.actor, "action": e.action}
        for e in reversed(audit)
        if e.call_id and e.action in _ANSWER_ACTIONS
    }
    calls = tuple(
        ConsoleCall.of(c.view, answered_by.get(c.call.id), page_digest=c.page_digest)
        for c in found.calls
    )
    rated = {f.message_id: f for f in found.feedback}
    return ConversationDetail(
        id=conversation.id,
        agent_id=conversation.agent_id,
        created_at=conversation.created_at,
        locale=conversation.locale,
        handled_tools=tuple(conversation.handled_tools),
        last_seq=found.last_seq,
        messages=tuple(
            ConsoleMessage(
                id=m.id,
                role=m.role,
                text=m.text,
                run_id=m.run_id,
                tool_calls=tuple(c["name"] for c in m.tool_calls),
                tool_call_id=m.tool_call_id,
                author=m.author,
                feedback=_feedback(rated.get(m.id)),
                context=m.context,
                superseded_by=m.superseded_by,
                attachments=tuple(
                    ConsoleAttachment(a.id, a.name, a.type, a.size) for a in m.attachments
                )
                or None,
            )
            for m in found.messages
        ),
        runs=tuple(
            ConsoleRun(r.id, r.status.value, r.step, r.error, r.simulate) for r in found.runs
        ),
        calls=calls,
        events=tuple(ConsoleEvent(e.seq, e.name, _without_tokens(e.data)) for e in found.events),
        audit=tuple(AuditItem(e.at, e.actor, e.action, e.call_id) for e in audit[:50]),
        handoff=handoff_view(found.handoff),
        rating=_rating(found.rating),
    )


def _feedback(found: Feedback | None) -> ConsoleFeedback | None:
    return None if found is None else ConsoleFeedback(found.rating, found.comment, found.at)


def _rating(found: Rating | None) -> ConsoleRating | None:
    return None if found is None else ConsoleRating(found.score, found.remark, found.at)


def handoff_view(found: Handoff | None) -> ConsoleHandoff | None:
    return None if found is None else ConsoleHandoff(found.state, found.person, found.since)


def _without_tokens(value: Any) -> Any:
    """Events as stored carry the tokens the visitor's widget needs; the console shows none."""
    if isinstance(value, dict):
        return {k: _without_tokens(v) for k, v in value.items() if "token" not in k.lower()}
    if isinstance(value, list):
        return [_without_tokens(v) for v in value]
    return value


@guarded(Role.OPERATOR)
async def conversation_page(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation_id = request.path_params["conversation_id"]
    detail = await _detail(runtime, conversation_id)
    usage = await runtime.services.usage.of_conversation(conversation_id)
    return page(request, "conversation.html", operator_of(request), data=to_wire(detail),
                usage=usage, money=money, page_context=_page_context(detail),
                attached=[m for m in detail.messages if m.attachments])  # fmt: skip


def _page_context(detail: ConversationDetail) -> list[tuple[ConsoleMessage, list[tuple[str, str]]]]:
    """Each message the page sent context with, and its entries as text: the page wrote
    them, so the template shows them escaped, never as HTML."""
    return [
        (m, [(key, strictjson.dumps(value)) for key, value in m.context.items()])
        for m in detail.messages
        if m.context
    ]


@guarded(Role.OPERATOR)
async def conversation_json(request: Request) -> Response:
    return WireResponse(await _detail(runtime_of(request), request.path_params["conversation_id"]))


# ---------------------------------------------------------------------------- actions


@guarded(Role.OPERATOR)
async def answer_call(request: Request) -> Response:
    runtime = runtime_of(request)
    body = await read_json(request, runtime.settings.max_body_bytes)
    if "output" not in body:
        raise BadRequest("field 'output' is required", field="output")
    call = await runtime.services.calls.answer_as_operator(
        request.path_params["call_id"], body["output"], operator=operator_of(request).name
    )
    return WireResponse(CallStatus(call.state.value))


@guarded(Role.OPERATOR)
async def decide_call(request: Request) -> Response:
    runtime = runtime_of(request)
    # The visitor's decision body, read by the same code.
    body = await read_body(request, Decision, runtime.settings.max_body_bytes)
    call = await runtime.services.calls.decide_as_operator(
        request.path_params["call_id"], body, operator=operator_of(request).name
    )
    return WireResponse(CallStatus(call.state.value))


@guarded(Role.OPERATOR)
async def expire_call(request: Request) -> Response:
    """ "End call": the call fails with ``operator_ended``; the model is told an operator
    ended it (not that it timed out), the visitor reads a sentence of its own."""
    await services_of(request).calls.end(
        request.path_params["call_id"], operator=operator_of(request).name
    )
    return WireResponse(CallStatus(CallState.FAILED.value))


@guarded(Role.OPERATOR)
async def cancel_run(request: Request) -> Response:
    await services_of(request).runs.cancel(
        request.path_params["run_id"], operator=operator_of(request).name
    )
    return WireResponse(RunCancelled("failed"))
