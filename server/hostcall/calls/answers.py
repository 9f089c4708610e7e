"""Answers and decisions: what surfaces, people and the sweeper send about a call — a
result, a failure, an approval or a rejection, a delivery, an expiry. Each moves the call
with one conditional update (the first request wins; the others get one refusal) and
returns what the caller does once the unit has committed: ``Settled`` (resume the run),
``Dispatched`` (perhaps start its block), hostcall/calls/outcomes.py.

``audit``: an entry of the audit log (a visitor's answer or decision) written in the unit
that makes the move, last, so it is stored exactly when the move is, at no round trip of
its own (``Store.note_audit``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from hostcall.calls.moves import MAY_HAVE_RUN, CallMoves, may_have_run, tool_error
from hostcall.calls.outcomes import CallExpired, Moved, Settled
from hostcall.calls.transitions import CallEvent
from hostcall.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    ToolErrorCode,
    Unprocessable,
)
from hostcall.guardrails import Hit, evaluate
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.limits import MAX_ERROR_MESSAGE_CHARS, MAX_REASON_CHARS
from hostcall.runs.agents import RunAgents
from hostcall.store.console_records import AuditEntry
from hostcall.store.interfaces import Audit, Calls
from hostcall.store.records import Call, CallState
from hostcall.tokens import Claims, input_digest
from hostcall.tools import Tool

# What the model reads for a call that was cancelled (``Answers.cancel``): who ended it, and
# that no result is coming, or, for a write that may have run (``may_have_run``), that it
# may already have taken effect. ``delivered`` says whether the page had it.
CANCEL_MESSAGES: dict[ToolErrorCode, str] = {
    ToolErrorCode.CANCELLED: "The user stopped the run before this call finished",
    ToolErrorCode.OPERATOR_CANCELLED: "An operator cancelled the run before this call finished",
    ToolErrorCode.OPERATOR_ENDED: "An operator ended this call before it was answered",
}
NO_RESULT = "it has no result."


class _NotAsClaimed(Exception):
    """The call a result's UPDATE settled is not quite what its token claims: roll back."""


class _AnswerStore(Audit, Calls, Protocol):
    """What answers read and write besides the moves: the call, its grant, the audit log."""


class Answers:
    def __init__(self, moves: CallMoves, agents: RunAgents, *, store: _AnswerStore) -> None:
        self.moves = moves
        self.store = store
        self.journal = moves.journal
        self.agents = agents

    async def answer_claimed(
        self, call_id: str, claims: Claims, output: Any, *, audit: AuditEntry | None = None
    ) -> Settled:
        """``answer(await checked_call(call_id, claims), output)``, one statement shorter
        when the token names its run (the result's round trip). The run's agent
        gives the tool, so the output is checked before anything is read; the settling
        UPDATE does not wait for a read of the call, and what ``checked_call`` checks is
        checked on the row it returns, before anything else is written: if one check
        fails, the unit rolls back (nothing changed) and the answer goes the long way,
        which reads the call and refuses it as it always did. So does a token without a
        run (issued before tokens named it), and an output the tool refuses."""
        if claims.run_id is not None and claims.call_id == call_id and claims.tool:
            agent = await self.agents.run_agent(claims.run_id)
            tool = agent.tool(claims.tool) if agent is not None else None
            if tool is not None and not tool.output_validator.problems(output):
                try:
                    settled = await self._answer_as_claimed(call_id, claims, tool, output, audit)
                except _NotAsClaimed:
                    settled = None
                if settled is not None:
                    return Settled(settled)
        return await self.answer(await self.checked_call(call_id, claims), output, audit=audit)

    async def _answer_as_claimed(
        self, call_id: str, claims: Claims, tool: Tool, output: Any, audit: AuditEntry | None
    ) -> Call | None:
        event, outcome, hits = _judged(tool, output)
        async with self.journal.unit() as unit:
            settled = await self.moves.settle_row(call_id, event, outcome)
            if settled is None:
                return None
            if not self._as_claimed(settled, claims):
                raise _NotAsClaimed(call_id)
            # Before the outcome's append: on PostgreSQL the entry goes out inside it.
            await self._audit(audit)
            await self.moves.record_hits(unit, claims.conversation_id, call_id, tool.name, hits)
            await self.moves.record_outcome(unit, settled, tool, outcome)
        return settled

    def _as_claimed(self, moved: Call, claims: Claims) -> bool:
        """What ``checked_call`` checks, on the row a move left."""
        return (
            moved.conversation_id == claims.conversation_id
            and moved.tool_name == claims.tool
            and moved.run_id == claims.run_id
            and input_digest(moved.input) == claims.digest
            # Moved past its deadline: the long way expires it instead.
            and moved.deadline > self.moves.clock()
        )

    async def deliver_claimed(self, call_id: str, claims: Claims) -> bool | None:
        """``deliver(await checked_call(call_id, claims))`` when the token names its run, in
        one statement where there were two: the delivery UPDATE, and the checks on the row
        it returns. None where that says nothing (the call was not dispatched, or a check
        failed, rolled back): the caller goes the long way, which reads the call and
        answers as it always did (False for a second delivery, or the refusal)."""
        if claims.run_id is None or claims.call_id != call_id or not claims.tool:
            return None
        try:
            async with self.journal.unit():
                moved = await self.moves.deliver_row(call_id)
                if moved is None or not self._as_claimed(moved, claims):
                    raise _NotAsClaimed(call_id)
        except _NotAsClaimed:
            return None
        return True

    async def checked_call(self, call_id: str, claims: Claims) -> Call:
        """The call a verified token is for; refuses tokens of another call or input, and
        expires a call past its deadline (``CallExpired`` carries what its caller resumes)."""
        if claims.call_id != call_id:
            raise Forbidden(f"this token was issued for another call, not {call_id}")
        call = await self.store.get_call(call_id)
        if call is None:
            raise NotFound(f"no call {call_id}", code=ErrorCode.UNKNOWN_CALL)
        if (
            claims.conversation_id != call.conversation_id
            or claims.tool != call.tool_name
            or claims.run_id not in (None, call.run_id)
        ):
            raise Forbidden(
                f"this token was issued for another conversation or tool than {call_id}"
            )
        if claims.digest != input_digest(call.input):
            raise Conflict(
                f"the input of call {call_id} changed since this token was issued",
                code=ErrorCode.INPUT_CHANGED,
            )
        if call.state.open and call.deadline <= self.moves.clock():
            raise CallExpired(call_id, await self.expire(call))
        return call

    async def deliver(self, call: Call) -> bool:
        """``POST /delivered`` of a client that names no surface; True only for the request
        that made the move (docs/protocol.md: it runs a handler only then)."""
        if call.state is CallState.DELIVERED:
            return False
        if not call.state.answerable:
            raise await self.moves.not_open(call.id)
        async with self.journal.unit() as unit:
            moved = await self.moves.move(unit, call, CallEvent.DELIVER, delivered=True)
            return moved is not None

    async def answer(
        self, call: Call, output: Any, *, audit: AuditEntry | None = None, by: str | None = None
    ) -> Settled:
        """``by``: who answered, where the call's route does not say (``"operator"``)."""
        if not call.state.answerable:
            raise await self.moves.not_open(call.id)
        tool = await self.moves.views.known_tool(call)
        problems = tool.output_validator.problems(output)
        if problems:
            # The call stays open: the surface can still send a correct result.
            raise Unprocessable(
                f"the result does not match the output schema of {call.tool_name!r}",
                code=ErrorCode.INVALID_RESULT,
                errors=[p.to_json() for p in problems],
            )
        event, outcome, hits = _judged(tool, output)
        async with self.journal.unit() as unit:
            await self.moves.record_hits(unit, call.conversation_id, call.id, call.tool_name, hits)
            settled = await self.moves.settle(unit, call, event, outcome, by=by)
            if settled is None:
                raise await self.moves.not_open(call.id)
            await self._audit(audit)
        return Settled(settled)

    async def fail(
        self,
        call: Call,
        code: ToolErrorCode,
        message: str,
        *,
        audit: AuditEntry | None = None,
        **details: Any,
    ) -> Settled:
        if not call.state.answerable:
            raise await self.moves.not_open(call.id)
        text = message[:MAX_ERROR_MESSAGE_CHARS] or code.value
        outcome = tool_error(code, text, **details)
        async with self.journal.unit() as unit:
            settled = await self.moves.settle(unit, call, CallEvent.FAIL, outcome)
            if settled is None:
                raise await self.moves.not_open(call.id)
            await self._audit(audit)
        return Settled(settled)

    async def approve(
        self,
        call: Call,
        edited: Any | None,
        scope: str = "once",
        surface: str | None = None,
        *,
        audit: AuditEntry | None = None,
    ) -> Moved:
        """The call dispatched as approved (``Settled`` instead: a page tool with nowhere
        to run, hostcall/calls/moves.py ``_no_handler``)."""
        if call.state is not CallState.AWAITING_CONFIRMATION:
            raise await self.moves.not_open(call.id, deciding=True)
        approval = dict(call.extra.get("approval", {}))
        if scope not in approval.get("scopes", ["once"]):
            raise BadRequest(
                f"scope {scope!r} is not offered for call {call.id} "
                f"(offered: {', '.join(approval.get('scopes', ['once']))})",
                field="scope",
            )
        tool = await self.moves.views.known_tool(call)
        value = call.input if edited is None else edited
        problems = tool.input_validator.problems(value)
        if problems:
            raise Unprocessable(
                f"the edited input does not match the input schema of {call.tool_name!r}",
                code=ErrorCode.INVALID_INPUT,
                errors=[p.to_json() for p in problems],
            )
        approval |= {"decision": "approved", "scope": scope, "edited": edited is not None}
        # The decision is written with the move that dispatches the call: one UPDATE.
        call = replace(call, extra={**call.extra, "approval": approval})
        async with self.journal.unit() as unit:
            if scope == "conversation":
                await self.store.add_grant(call.conversation_id, call.tool_name, call.id)
            dispatched = await self.moves.dispatch(
                unit, call, tool, CallEvent.APPROVE, value, surface=surface
            )
            await self._audit(audit)
            return dispatched

    async def reject(
        self, call: Call, reason: str | None, *, audit: AuditEntry | None = None
    ) -> Settled:
        if call.state is not CallState.AWAITING_CONFIRMATION:
            raise await self.moves.not_open(call.id, deciding=True)
        reason = (reason or "").strip()[:MAX_REASON_CHARS]
        message = "The user rejected this call." + (f" Their reason: {reason}" if reason else "")
        outcome = tool_error(ToolErrorCode.APPROVAL_REJECTED, message, reason=reason)
        async with self.journal.unit() as unit:
            settled = await self.moves.settle(unit, call, CallEvent.REJECT, outcome)
            if settled is None:
                raise await self.moves.not_open(call.id, deciding=True)
            await self._audit(audit)
        return Settled(settled)

    async def _audit(self, entry: AuditEntry | None) -> None:
        if entry is not None:
            await self.store.note_audit(entry)

    async def expire(self, call: Call) -> Settled | None:
        """Settled, or None when the call moved first (an answer, another expiry)."""
        if call.state is CallState.AWAITING_CONFIRMATION:
            outcome = tool_error(
                ToolErrorCode.APPROVAL_EXPIRED,
                "Nobody approved or rejected this call in time; it was not executed.",
            )
        else:
            outcome = tool_error(
                ToolErrorCode.TIMEOUT,
                "The call was not answered before its deadline.",
                delivered=call.delivered,
            )
        async with self.journal.unit() as unit:
            settled = await self.moves.settle(unit, call, CallEvent.EXPIRE, outcome)
        return None if settled is None else Settled(settled)

    async def cancel(self, call: Call, code: ToolErrorCode) -> Settled | None:
        """End an open call with ``code`` (``CANCEL_MESSAGES``: what the model reads): its
        run was stopped or cancelled, or an operator ended it. None when the call moved
        first (an answer, an expiry).

        A write whose request went out (a page had it, or its block was started) is not
        said to have no result: the model reads that it may already have taken effect, and
        the outcome says ``mayHaveRun`` (shown to people too), so nobody retries it blind.
        """
        ran = may_have_run(call, await self.moves.views.tool_of(call))
        message = f"{CANCEL_MESSAGES[code]}; {MAY_HAVE_RUN if ran else NO_RESULT}"
        details: dict[str, Any] = {"mayHaveRun": True} if ran else {}
        outcome = tool_error(code, message, delivered=call.delivered, **details)
        async with self.journal.unit() as unit:
            settled = await self.moves.settle(unit, call, CallEvent.CANCEL, outcome)
        return None if settled is None else Settled(settled)

    async def expire_due(self) -> list[Settled]:
        """Expire every open call past its deadline: the expiries this pass made."""
        expired = [
            await self.expire(call) for call in await self.store.due_calls(self.moves.clock())
        ]
        return [settled for settled in expired if settled is not None]


def _judged(tool: Tool, output: Any) -> tuple[CallEvent, dict[str, Any], list[Hit]]:
    """How a valid ``output`` settles its call: answered, or failed when an output
    guardrail blocks it (the outcome keeps it, withheld from the model); and the hits."""
    hits = evaluate(tool.guardrails, "output", output) if tool.guardrails else []
    blocked = next((h for h in hits if h.action == "block"), None)
    event = CallEvent.ANSWER
    outcome: dict[str, Any] = {"output": output}
    if blocked:
        event = CallEvent.FAIL
        outcome = tool_error(
            ToolErrorCode.BLOCKED_BY_GUARDRAIL,
            f"The guardrail {blocked.rule!r} withheld this result.",
            rule=blocked.rule,
        )
        outcome["withheldOutput"] = output
    if hits:
        outcome["guardrails"] = [h.to_json() for h in hits]
    return event, outcome, hits
