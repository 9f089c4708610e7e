"""The call ledger: the only code that moves a tool call, by the table of
server/calls/transitions.py.

Each move is one conditional update in the store (a call leaves a state exactly once), and
the move's effects — the tool message the model reads and the ``TOOL_CALL_RESULT`` event,
a dispatch, a run to resume — happen in the same unit or right after its commit. Policies
(server/policies.py) decide whether a person must approve, and what the model reads of the
outcome; server/calls/assignment.py decides which surface runs a client-side call.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from server import strictjson
from server.agents import Agent
from server.calls.assignment import FormReason, choose, rehome
from server.calls.transitions import CallEvent, Effect, Move, sources, transition
from server.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ToolErrorCode,
    Unprocessable,
)
from server.guardrails import Hit, evaluate
from server.journal import Journal, Unit
from server.platform import Platform
from server.policies import approval_reason, model_content, visible_outcome
from server.protocol.events import (
    ApprovalRequested,
    CallDispatched,
    GuardrailMatched,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallResult,
    ToolCallStart,
)
from server.protocol.limits import MAX_ERROR_MESSAGE_CHARS, MAX_REASON_CHARS
from server.protocol.responses import CallView
from server.store.records import Call, CallState, Conversation, Run, StoredMessage
from server.tokens import Claims, Purpose, Tokens, input_digest
from server.tools import Tool

SCOPES = ("once", "conversation")
log = logging.getLogger("hostcall.guardrails")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def tool_error(code: ToolErrorCode, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code.value, "message": message, **details}}


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class Ledger:
    def __init__(
        self,
        journal: Journal,
        tokens: Tokens,
        *,
        agent_of_run: Callable[[str], Awaitable[Agent]],
        platform: Callable[[], Platform],
        on_settled: Callable[[str], Awaitable[None]],
        on_dispatched: Callable[[Unit, Call], Awaitable[None]],
        clock: Callable[[], float] = time.time,
        surface_grace: float = 5.0,
    ) -> None:
        self.journal = journal
        self.store = journal.store
        self.tokens = tokens
        self.agent_of_run = agent_of_run
        self.platform = platform
        self.on_settled = on_settled
        self.on_dispatched = on_dispatched
        self.clock = clock
        # How long a surface whose streams all closed keeps its calls (a reconnect).
        self.surface_grace = surface_grace

    # ---- views ---------------------------------------------------------------------------

    async def tool_of(self, call: Call) -> Tool | None:
        return (await self.agent_of_run(call.run_id)).tool(call.tool_name)

    async def view(self, call: Call) -> CallView:
        """The ``CALL`` shape of docs/protocol.md, with the token the call's state needs."""
        tool = await self.tool_of(call)
        kind = tool.kind if tool else "client"
        claims = Claims(call.conversation_id, call.id, call.tool_name, input_digest(call.input))
        answerable = call.state.answerable and kind == "client"
        awaiting = call.state is CallState.AWAITING_CONFIRMATION
        return CallView(
            tool_call_id=call.id,
            tool_call_name=call.tool_name,
            kind=kind,
            run_id=call.run_id,
            state=call.state.value,
            input=call.input,
            input_schema=tool.input_schema if tool else {},
            output_schema=tool.output_schema if tool else {},
            deadline=_iso(call.deadline),
            route=call.route,
            delivered=call.delivered,
            outcome=None if call.outcome is None else visible_outcome(tool, call.outcome),
            approval=call.extra.get("approval"),
            simulated=True if call.outcome and call.outcome.get("simulated") else None,
            surface_id=call.surface_id,
            assignment=call.assignment,
            title=tool.title if tool and tool.title else None,
            form_reason=call.extra.get("formReason"),
            result_token=self.tokens.sign(Purpose.CALL_RESULT, claims) if answerable else None,
            decision_token=self.tokens.sign(Purpose.CALL_DECISION, claims) if awaiting else None,
        )

    # ---- proposing -----------------------------------------------------------------------

    async def propose(
        self,
        unit: Unit,
        *,
        run: Run,
        agent: Agent,
        conversation: Conversation,
        step: int,
        call_id: str,
        name: str,
        arguments: str,
        message_id: str,
    ) -> Call:
        """Record a call the model asked for, and send it where its policies say."""
        cid = conversation.id
        await unit.emit(cid, ToolCallStart(call_id, name, message_id))
        await unit.emit(cid, ToolCallArgs(call_id, arguments))
        await unit.emit(cid, ToolCallEnd(call_id))

        tool = agent.tool(name)
        value, failure = _parse_arguments(tool, name, arguments, agent)
        if failure is None and tool and tool.max_calls_per_pass is not None:
            made = await self.store.count_calls(run.id, name)
            if made >= tool.max_calls_per_pass:
                failure = tool_error(
                    ToolErrorCode.CALL_LIMIT_REACHED,
                    f"{name!r} may be called at most {tool.max_calls_per_pass} time(s) per "
                    f"agent pass; this call was not executed. Continue without it.",
                    limit=tool.max_calls_per_pass,
                )
        hits: list[Hit] = []
        if failure is None and tool and tool.guardrails:
            hits = evaluate(tool.guardrails, "input", value)
            await self._record_hits(unit, cid, call_id, name, hits)
            blocked = next((h for h in hits if h.action == "block"), None)
            if blocked:
                failure = tool_error(
                    ToolErrorCode.BLOCKED_BY_GUARDRAIL,
                    f"The guardrail {blocked.rule!r} blocked this call; it was not executed.",
                    rule=blocked.rule,
                )
        now = self.clock()
        call = Call(
            id=call_id,
            conversation_id=cid,
            run_id=run.id,
            step=step,
            tool_name=name,
            state=CallState.PROPOSED,
            input=value if failure is None else None,
            arguments=arguments,
            deadline=now,
            route="form",
            extra={"guardrails": [h.to_json() for h in hits]} if hits else {},
        )
        await self.store.add_call(call)
        if failure is not None:
            failure["guardrails"] = [h.to_json() for h in hits]
            await self._settle(unit, call, CallEvent.REFUSE, failure)
            return await self._reload(call.id)
        assert tool is not None
        if run.simulate:
            result = tool.simulation_result if tool.has_simulation_result else None
            await self._settle(
                unit, call, CallEvent.SIMULATE, {"output": result, "simulated": True}
            )
            return await self._reload(call.id)
        environment = self.platform().environment(agent.environment)
        granted = await self.store.has_grant(cid, name)
        reason = approval_reason(tool, environment, granted=granted, hits=hits)
        if reason is not None:
            approval = {
                "reason": reason.value,
                "scopes": list(SCOPES) if reason.grantable else ["once"],
            }
            moved = await self._move(
                unit, call, CallEvent.ASK,
                deadline=now + tool.approval_timeout_seconds,
                extra={**call.extra, "approval": approval},
            )  # fmt: skip
            assert moved is not None, "a call just proposed is ours to move"
            return moved
        if granted and tool.approval == "always":
            call = await self._with_extra(
                call, approval={"reason": "grant", "scope": "conversation"}
            )
        return await self._dispatch(unit, call, tool, CallEvent.DISPATCH, value, surface=None)

    async def _dispatch(
        self,
        unit: Unit,
        call: Call,
        tool: Tool,
        event: CallEvent,
        value: Any,
        *,
        surface: str | None,
    ) -> Call:
        """Send the call where it runs: its block, a surface (the claim), or the form."""
        now = self.clock()
        deadline = now + tool.deadline_seconds
        changes: dict[str, Any] = {"input": value}
        if tool.kind != "client":
            # The block enforces this timeout itself; the sweeper is only the safety net.
            deadline += 5
        else:
            changes |= await self._assignment(call, preferred=surface, now=now)
        moved = await self._move(unit, call, event, deadline=deadline, **changes)
        if moved is None:
            raise await self._not_open(call.id, deciding=event is CallEvent.APPROVE)
        return moved

    async def _assignment(self, call: Call, *, preferred: str | None, now: float) -> dict[str, Any]:
        """The store changes that assign ``call`` to a surface, or to the form."""
        surfaces = await self.store.list_surfaces(call.conversation_id)
        target = choose(
            surfaces, call.tool_name, now=now, grace=self.surface_grace, preferred=preferred
        )
        extra = {k: v for k, v in call.extra.items() if k != "formReason"}
        if target is None:
            extra["formReason"] = FormReason.NO_HANDLER.value
            return {"route": "form", "surface_id": None, "extra": extra}
        return {
            "route": "handler",
            "surface_id": target.id,
            "assignment": call.assignment + 1,
            "extra": extra,
        }

    async def _record_hits(
        self, unit: Unit, conversation_id: str, call_id: str, name: str, hits: list[Hit]
    ) -> None:
        for hit in hits:
            log.info("guardrail %r (%s, %s) matched call %s of %r",
                     hit.rule, hit.action, hit.on, call_id, name)  # fmt: skip
            await unit.emit(
                conversation_id, GuardrailMatched(call_id, hit.rule, hit.action, hit.on)
            )

    # ---- what surfaces and people send -----------------------------------------------------

    async def checked_call(self, call_id: str, claims: Claims) -> Call:
        """The call a verified token is for; refuses tokens of another call or input."""
        if claims.call_id != call_id:
            raise Forbidden(f"this token was issued for another call, not {call_id}")
        call = await self.store.get_call(call_id)
        if call is None:
            raise NotFound(f"no call {call_id}", code="unknown_call")
        if claims.conversation_id != call.conversation_id or claims.tool != call.tool_name:
            raise Forbidden(
                f"this token was issued for another conversation or tool than {call_id}"
            )
        if claims.digest != input_digest(call.input):
            raise Conflict(
                f"the input of call {call_id} changed since this token was issued",
                code="input_changed",
            )
        if call.state.open and call.deadline <= self.clock():
            await self.expire(call)
            raise Gone(f"call {call_id} passed its deadline and has expired")
        return call

    async def deliver(self, call: Call) -> bool:
        """``POST /delivered`` of a client that names no surface; True only for the request
        that made the move (docs/protocol.md: it runs a handler only then)."""
        if call.state is CallState.DELIVERED:
            return False
        if not call.state.answerable:
            raise await self._not_open(call.id)
        async with self.journal.unit() as unit:
            return await self._move(unit, call, CallEvent.DELIVER, delivered=True) is not None

    async def claim(self, call_id: str, surface_id: str, assignment: int) -> bool:
        """Record that assignment ``assignment`` of the call reached surface ``surface_id``.

        Called by that surface's stream just before it writes the dispatch (or by its
        snapshot): from here on the surface may run the handler, with no request of its
        own. False when the call was settled or assigned elsewhere since: the stream then
        does not pass the stale dispatch on.
        """
        async with self.store.transaction():
            if await self.store.transition_call(
                call_id, [CallState.DISPATCHED], CallState.DELIVERED,
                assigned=(surface_id, assignment), delivered=True,
            ):  # fmt: skip
                return True
        call = await self.store.get_call(call_id)
        return (
            call is not None
            and call.state is CallState.DELIVERED
            and (call.surface_id, call.assignment) == (surface_id, assignment)
        )

    async def rehome(self, conversation_id: str) -> int:
        """Move the open client calls of a conversation whose surface is gone (see
        server/calls/assignment.py); the number moved."""
        now = self.clock()
        calls = [
            c for c in await self.store.list_calls(conversation_id)
            if c.state in (CallState.DISPATCHED, CallState.DELIVERED)
        ]  # fmt: skip
        if not calls:
            return 0
        surfaces = await self.store.list_surfaces(conversation_id)
        by_id = {s.id: s for s in surfaces}
        moved = 0
        for call in calls:
            tool = await self.tool_of(call)
            if tool is None or tool.kind != "client":
                continue
            plan = rehome(
                call, by_id.get(call.surface_id or ""), surfaces,
                rerunnable=tool.rerunnable, now=now, grace=self.surface_grace,
            )  # fmt: skip
            if plan is None:
                continue
            extra = {k: v for k, v in call.extra.items() if k != "formReason"}
            changes: dict[str, Any]
            if plan.surface is None:
                assert plan.reason is not None
                extra["formReason"] = plan.reason.value
                changes = {"route": "form", "surface_id": None, "extra": extra}
            else:
                changes = {
                    "route": "handler", "surface_id": plan.surface.id,
                    "assignment": call.assignment + 1, "extra": extra,
                }  # fmt: skip
            async with self.journal.unit() as unit:
                moved += await self._move(unit, call, plan.event, **changes) is not None
        return moved

    async def rehome_due(self) -> int:
        """The sweeper's pass: every conversation with a call on a surface or the form."""
        conversations = {
            c.conversation_id
            for c in await self.store.calls_in_states([CallState.DISPATCHED, CallState.DELIVERED])
        }
        return sum([await self.rehome(cid) for cid in sorted(conversations)])

    async def answer(self, call: Call, output: Any) -> Call:
        if not call.state.answerable:
            raise await self._not_open(call.id)
        tool = await self.tool_of(call)
        assert tool is not None, "answerable calls always name a known tool"
        problems = tool.output_validator.problems(output)
        if problems:
            # The call stays open: the surface can still send a correct result.
            raise Unprocessable(
                f"the result does not match the output schema of {call.tool_name!r}",
                code="invalid_result",
                errors=[p.to_json() for p in problems],
            )
        async with self.journal.unit() as unit:
            hits = evaluate(tool.guardrails, "output", output) if tool.guardrails else []
            await self._record_hits(unit, call.conversation_id, call.id, call.tool_name, hits)
            blocked = next((h for h in hits if h.action == "block"), None)
            outcome: dict[str, Any] = {"output": output}
            state = CallState.ANSWERED
            if blocked:
                state = CallState.FAILED
                outcome = tool_error(
                    ToolErrorCode.BLOCKED_BY_GUARDRAIL,
                    f"The guardrail {blocked.rule!r} withheld this result.",
                    rule=blocked.rule,
                )
                outcome["withheldOutput"] = output
            if hits:
                outcome["guardrails"] = [h.to_json() for h in hits]
            event = CallEvent.ANSWER if state is CallState.ANSWERED else CallEvent.FAIL
            if not await self._settle(unit, call, event, outcome):
                raise await self._not_open(call.id)
        await self.on_settled(call.run_id)
        return await self._reload(call.id)

    async def fail(self, call: Call, code: ToolErrorCode, message: str, **details: Any) -> Call:
        if not call.state.answerable:
            raise await self._not_open(call.id)
        text = message[:MAX_ERROR_MESSAGE_CHARS] or code.value
        outcome = tool_error(code, text, **details)
        async with self.journal.unit() as unit:
            if not await self._settle(unit, call, CallEvent.FAIL, outcome):
                raise await self._not_open(call.id)
        await self.on_settled(call.run_id)
        return await self._reload(call.id)

    async def approve(
        self, call: Call, edited: Any | None, scope: str = "once", surface: str | None = None
    ) -> Call:
        if call.state is not CallState.AWAITING_CONFIRMATION:
            raise await self._not_open(call.id, deciding=True)
        approval = dict(call.extra.get("approval", {}))
        if scope not in approval.get("scopes", ["once"]):
            raise BadRequest(
                f"scope {scope!r} is not offered for call {call.id} "
                f"(offered: {', '.join(approval.get('scopes', ['once']))})",
                field="scope",
            )
        tool = await self.tool_of(call)
        assert tool is not None
        value = call.input if edited is None else edited
        problems = tool.input_validator.problems(value)
        if problems:
            raise Unprocessable(
                f"the edited input does not match the input schema of {call.tool_name!r}",
                code="invalid_input",
                errors=[p.to_json() for p in problems],
            )
        approval |= {"decision": "approved", "scope": scope, "edited": edited is not None}
        async with self.journal.unit() as unit:
            call = await self._with_extra(call, approval=approval)
            if scope == "conversation":
                await self.store.add_grant(call.conversation_id, call.tool_name, call.id)
            return await self._dispatch(unit, call, tool, CallEvent.APPROVE, value, surface=surface)

    async def reject(self, call: Call, reason: str | None) -> Call:
        if call.state is not CallState.AWAITING_CONFIRMATION:
            raise await self._not_open(call.id, deciding=True)
        reason = (reason or "").strip()[:MAX_REASON_CHARS]
        message = "The user rejected this call." + (f" Their reason: {reason}" if reason else "")
        outcome = tool_error(ToolErrorCode.APPROVAL_REJECTED, message, reason=reason)
        async with self.journal.unit() as unit:
            if not await self._settle(unit, call, CallEvent.REJECT, outcome):
                raise await self._not_open(call.id, deciding=True)
        await self.on_settled(call.run_id)
        return await self._reload(call.id)

    async def expire(self, call: Call) -> bool:
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
            done = await self._settle(unit, call, CallEvent.EXPIRE, outcome)
        if done:
            await self.on_settled(call.run_id)
        return done

    async def expire_due(self) -> int:
        return sum([await self.expire(call) for call in await self.store.due_calls(self.clock())])

    # ---- settling ------------------------------------------------------------------------

    async def _move(self, unit: Unit, call: Call, event: CallEvent, **changes: Any) -> Call | None:
        """Make the table's move for ``event`` in the store and perform its emit effects;
        None if the call is no longer where the move starts (someone else moved it)."""
        move = transition(call.state, event)
        # Every state the event leaves for the same place: a request holding a call read a
        # moment ago (say dispatched) still settles it if it was delivered since.
        starts = [s for s in sources(event) if transition(s, event).to is move.to]
        if move.to is call.state:  # a move within a state (to the form, reassigned)
            starts = [call.state]
        assigned = (call.surface_id, call.assignment) if event in _REASSIGNING else None
        if not await self.store.transition_call(
            call.id, starts, move.to, assigned=assigned, **changes
        ):
            return None
        moved = await self._reload(call.id)
        await self._perform(unit, moved, move)
        return moved

    async def _perform(self, unit: Unit, call: Call, move: Move) -> None:
        for effect in move.effects:
            if effect is Effect.EMIT_APPROVAL_REQUESTED:
                await unit.emit(call.conversation_id, ApprovalRequested(await self.view(call)))
            elif effect is Effect.EMIT_DISPATCH:
                await unit.emit(call.conversation_id, CallDispatched(await self.view(call)))
            elif effect is Effect.EXECUTE:
                tool = await self.tool_of(call)
                if tool is not None and tool.kind != "client":
                    await self.on_dispatched(unit, call)
            # RECORD_OUTCOME is _settle's (it needs the outcome); RESUME_RUN is the caller's,
            # after the unit commits, so the next step reads what this one wrote.

    async def _settle(
        self, unit: Unit, call: Call, event: CallEvent, outcome: dict[str, Any]
    ) -> bool:
        # From any state the event leaves: the caller read the call a moment ago, and the
        # store's conditional update has the last word.
        starts = sorted(sources(event))
        (state,) = {transition(s, event).to for s in starts}
        assert all(Effect.RECORD_OUTCOME in transition(s, event).effects for s in starts)
        if not await self.store.transition_call(call.id, starts, state, outcome=outcome):
            return False
        tool = await self.tool_of(call)
        content = model_content(tool, outcome)
        message_id = new_id("m")
        await self.store.add_message(StoredMessage(
            id=message_id, conversation_id=call.conversation_id, run_id=call.run_id,
            role="tool", text=content, tool_call_id=call.id, tool_name=call.tool_name,
        ))  # fmt: skip
        result = ToolCallResult(
            message_id=message_id,
            tool_call_id=call.id,
            content=content,
            state=state.value,
            outcome=visible_outcome(tool, outcome),
            simulated=True if outcome.get("simulated") else None,
        )
        await unit.emit(call.conversation_id, result)
        return True

    async def _with_extra(self, call: Call, **extra: Any) -> Call:
        merged = {**call.extra, **extra}
        await self.store.transition_call(call.id, [call.state], call.state, extra=merged)
        return await self._reload(call.id)

    async def _reload(self, call_id: str) -> Call:
        call = await self.store.get_call(call_id)
        assert call is not None
        return call

    async def _not_open(self, call_id: str, *, deciding: bool = False) -> Conflict | Gone:
        """The one refusal for a call in the wrong state, whether the request checked first
        or lost a race at the conditional UPDATE: the same situation gets the same code
        (docs/protocol.md, issue 7). ``details.state`` says where the call is."""
        call = await self._reload(call_id)
        state = call.state.value
        if call.state is CallState.EXPIRED:
            return Gone(f"call {call_id} passed its deadline and has expired")
        if deciding:
            return Conflict(
                f"call {call_id} is {state}, not waiting for a decision",
                code="call_not_awaiting_decision",
                state=state,
            )
        if call.state.open:
            return Conflict(
                f"call {call_id} is {state}; it cannot be answered yet",
                code="call_not_dispatched",
                state=state,
            )
        return Conflict(
            f"call {call_id} is already {state}", code="call_already_settled", state=state
        )


# Moves that take a call from its surface: only while it is still on the one we read.
_REASSIGNING = frozenset({CallEvent.REASSIGN, CallEvent.RERUN, CallEvent.TO_FORM})


def _parse_arguments(
    tool: Tool | None, name: str, arguments: str, agent: Agent
) -> tuple[Any, dict[str, Any] | None]:
    if tool is None:
        known = ", ".join(t.name for t in agent.tools) or "none"
        return None, tool_error(
            ToolErrorCode.UNKNOWN_TOOL, f"There is no tool named {name!r}. Tools: {known}."
        )
    try:
        value = strictjson.loads(arguments or "{}")
    except strictjson.StrictJSONError as exc:
        return None, tool_error(
            ToolErrorCode.INVALID_ARGUMENTS, f"The arguments are not valid JSON: {exc.message}."
        )
    if not isinstance(value, dict):
        return None, tool_error(
            ToolErrorCode.INVALID_ARGUMENTS, "The arguments must be a JSON object."
        )
    problems = tool.input_validator.problems(value)
    if problems:
        return None, tool_error(
            ToolErrorCode.INVALID_ARGUMENTS,
            f"The arguments do not match the input schema of {name!r}.",
            errors=[p.to_json() for p in problems],
        )
    return value, None
