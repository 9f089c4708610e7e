"""The call ledger: every tool call's state machine, and the only code that moves it.

    proposed ─┬─> awaiting_confirmation ─┬─> dispatched ─> delivered ─┬─> answered
              │                          ├─> rejected                 ├─> failed
              │                          └─> expired                  └─> expired
              ├─> dispatched ...
              └─> failed (unknown tool, invalid arguments)

A call leaves an open state exactly once (``Store.transition_call``); whatever settles it
also writes the tool message the model reads and the ``TOOL_CALL_RESULT`` event, in one
unit, and then asks the engine to resume the run.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from server.agents import Agent, Tool
from server.errors import Conflict, Forbidden, Gone, NotFound, ToolErrorCode, Unprocessable
from server.journal import Journal, Unit
from server.protocol import EventType
from server.store.records import OPEN_STATES, Call, CallState, Conversation, Run, StoredMessage
from server.tokens import Claims, Purpose, Tokens, input_digest

MAX_ERROR_MESSAGE = 1000
MAX_REASON = 1000


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def tool_error(code: ToolErrorCode, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code.value, "message": message, **details}}


def _iso(timestamp: float) -> str:
    return (
        datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


class Ledger:
    def __init__(
        self,
        journal: Journal,
        tokens: Tokens,
        agent_of_run: Callable[[str], Agent],
        on_settled: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.journal = journal
        self.store = journal.store
        self.tokens = tokens
        self.agent_of_run = agent_of_run
        self.on_settled = on_settled
        self.clock = clock

    # ---- views ---------------------------------------------------------------------------

    def tool_of(self, call: Call) -> Tool | None:
        return self.agent_of_run(call.run_id).tool(call.tool_name)

    def view(self, call: Call) -> dict[str, Any]:
        """The ``CALL`` shape of docs/protocol.md, with the token the call's state needs."""
        tool = self.tool_of(call)
        data: dict[str, Any] = {
            "toolCallId": call.id,
            "toolCallName": call.tool_name,
            "runId": call.run_id,
            "state": call.state.value,
            "input": call.input,
            "inputSchema": tool.input_schema if tool else {},
            "outputSchema": tool.output_schema if tool else {},
            "deadline": _iso(call.deadline),
            "route": call.route,
            "delivered": call.delivered,
            "outcome": call.outcome,
        }
        claims = Claims(call.conversation_id, call.id, call.tool_name, input_digest(call.input))
        if call.state.answerable:
            data["resultToken"] = self.tokens.sign(Purpose.CALL_RESULT, claims)
        if call.state is CallState.AWAITING_CONFIRMATION:
            data["decisionToken"] = self.tokens.sign(Purpose.CALL_DECISION, claims)
        return data

    # ---- proposing -----------------------------------------------------------------------

    def propose(
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
        """Record a call the model asked for; settle it at once if it cannot go anywhere."""
        cid = conversation.id
        unit.emit(
            cid,
            EventType.TOOL_CALL_START,
            {
                "toolCallId": call_id,
                "toolCallName": name,
                "parentMessageId": message_id,
            },
        )
        unit.emit(cid, EventType.TOOL_CALL_ARGS, {"toolCallId": call_id, "delta": arguments})
        unit.emit(cid, EventType.TOOL_CALL_END, {"toolCallId": call_id})

        tool = agent.tool(name)
        value, failure = _parse_arguments(tool, name, arguments, agent)
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
            route="handler" if name in conversation.handled_tools else "form",
        )
        self.store.add_call(call)
        if failure is not None:
            self._settle(unit, call, CallState.FAILED, failure)
            return self._reload(call.id)
        assert tool is not None
        if tool.require_confirmation:
            deadline = now + tool.approval_timeout_seconds
            self.store.transition_call(
                call.id, [CallState.PROPOSED], CallState.AWAITING_CONFIRMATION, deadline=deadline
            )
            moved = self._reload(call.id)
            unit.emit(cid, EventType.TOOL_CALL_APPROVAL_REQUESTED, self.view(moved))
            return moved
        return self._dispatch(unit, call, tool, [CallState.PROPOSED], value)

    def _dispatch(
        self, unit: Unit, call: Call, tool: Tool, from_states: list[CallState], value: Any
    ) -> Call:
        deadline = self.clock() + tool.deadline_seconds
        if not self.store.transition_call(
            call.id, from_states, CallState.DISPATCHED, input=value, deadline=deadline
        ):
            raise self._not_open(call.id)
        moved = self._reload(call.id)
        unit.emit(call.conversation_id, EventType.TOOL_CALL_DISPATCH, self.view(moved))
        return moved

    # ---- what surfaces and people send -----------------------------------------------------

    def checked_call(self, call_id: str, claims: Claims) -> Call:
        """The call a verified token is for; refuses tokens of another call or input."""
        if claims.call_id != call_id:
            raise Forbidden(f"this token was issued for another call, not {call_id}")
        call = self.store.get_call(call_id)
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
            self.expire(call)
            raise Gone(f"call {call_id} passed its deadline and has expired")
        return call

    def deliver(self, call: Call) -> Call:
        if call.state is CallState.DELIVERED:
            return call
        if not call.state.answerable:
            raise self._not_open(call.id, answering=False)
        with self.journal.unit() as unit:
            if self.store.transition_call(
                call.id, [CallState.DISPATCHED], CallState.DELIVERED, delivered=True
            ):
                unit.emit(
                    call.conversation_id,
                    EventType.TOOL_CALL_STATE,
                    {"toolCallId": call.id, "state": CallState.DELIVERED.value},
                )
        return self._reload(call.id)

    def answer(self, call: Call, output: Any) -> Call:
        if not call.state.answerable:
            raise self._not_open(call.id)
        tool = self.tool_of(call)
        assert tool is not None, "answerable calls always name a known tool"
        problems = tool.output_validator.problems(output)
        if problems:
            # The call stays open: the surface can still send a correct result.
            raise Unprocessable(
                f"the result does not match the output schema of {call.tool_name!r}",
                code="invalid_result",
                errors=[p.to_json() for p in problems],
            )
        return self._settle_from(
            call,
            [CallState.DISPATCHED, CallState.DELIVERED],
            CallState.ANSWERED,
            {"output": output},
        )

    def fail(self, call: Call, code: ToolErrorCode, message: str) -> Call:
        if not call.state.answerable:
            raise self._not_open(call.id)
        text = message[:MAX_ERROR_MESSAGE] or code.value
        return self._settle_from(
            call,
            [CallState.DISPATCHED, CallState.DELIVERED],
            CallState.FAILED,
            tool_error(code, f"The page reported: {text}"),
        )

    def approve(self, call: Call, edited: Any | None) -> Call:
        if call.state is not CallState.AWAITING_CONFIRMATION:
            raise self._not_open(call.id, code="call_not_awaiting_decision")
        tool = self.tool_of(call)
        assert tool is not None
        value = call.input if edited is None else edited
        problems = tool.input_validator.problems(value)
        if problems:
            raise Unprocessable(
                f"the edited input does not match the input schema of {call.tool_name!r}",
                code="invalid_input",
                errors=[p.to_json() for p in problems],
            )
        with self.journal.unit() as unit:
            return self._dispatch(unit, call, tool, [CallState.AWAITING_CONFIRMATION], value)

    def reject(self, call: Call, reason: str | None) -> Call:
        if call.state is not CallState.AWAITING_CONFIRMATION:
            raise self._not_open(call.id, code="call_not_awaiting_decision")
        reason = (reason or "").strip()[:MAX_REASON]
        message = "The user rejected this call." + (f" Their reason: {reason}" if reason else "")
        outcome = tool_error(ToolErrorCode.APPROVAL_REJECTED, message, reason=reason)
        return self._settle_from(
            call, [CallState.AWAITING_CONFIRMATION], CallState.REJECTED, outcome
        )

    def expire(self, call: Call) -> bool:
        if call.state is CallState.AWAITING_CONFIRMATION:
            outcome = tool_error(
                ToolErrorCode.APPROVAL_EXPIRED,
                "Nobody approved or rejected this call in time; it was not executed.",
            )
        else:
            outcome = tool_error(
                ToolErrorCode.TIMEOUT,
                "The page did not answer this call before its deadline.",
                delivered=call.delivered,
            )
        with self.journal.unit() as unit:
            done = self._settle(unit, call, CallState.EXPIRED, outcome, from_states=[call.state])
        if done:
            self.on_settled(call.run_id)
        return done

    def expire_due(self) -> int:
        return sum(self.expire(call) for call in self.store.due_calls(self.clock()))

    # ---- settling ------------------------------------------------------------------------

    def _settle_from(
        self, call: Call, from_states: list[CallState], state: CallState, outcome: dict[str, Any]
    ) -> Call:
        with self.journal.unit() as unit:
            if not self._settle(unit, call, state, outcome, from_states=from_states):
                raise self._not_open(call.id)
        self.on_settled(call.run_id)
        return self._reload(call.id)

    def _settle(
        self,
        unit: Unit,
        call: Call,
        state: CallState,
        outcome: dict[str, Any],
        *,
        from_states: list[CallState] | None = None,
    ) -> bool:
        states = from_states if from_states is not None else list(OPEN_STATES)
        if not self.store.transition_call(call.id, states, state, outcome=outcome):
            return False
        content = json.dumps(outcome.get("output", outcome), ensure_ascii=False)
        message_id = new_id("m")
        self.store.add_message(
            StoredMessage(
                id=message_id,
                conversation_id=call.conversation_id,
                run_id=call.run_id,
                role="tool",
                text=content,
                tool_call_id=call.id,
                tool_name=call.tool_name,
            )
        )
        unit.emit(
            call.conversation_id,
            EventType.TOOL_CALL_RESULT,
            {
                "messageId": message_id,
                "toolCallId": call.id,
                "role": "tool",
                "content": content,
                "state": state.value,
                "outcome": outcome,
            },
        )
        return True

    def _reload(self, call_id: str) -> Call:
        call = self.store.get_call(call_id)
        assert call is not None
        return call

    def _not_open(
        self, call_id: str, *, answering: bool = True, code: str | None = None
    ) -> Conflict | Gone:
        call = self._reload(call_id)
        if call.state is CallState.EXPIRED:
            return Gone(f"call {call_id} passed its deadline and has expired")
        if call.state is CallState.AWAITING_CONFIRMATION and answering:
            return Conflict(
                f"call {call_id} is waiting for approval; it cannot be answered yet",
                code=code or "call_not_dispatched",
            )
        if call.state.open:
            return Conflict(f"call {call_id} is {call.state.value}", code=code or "conflict")
        return Conflict(
            f"call {call_id} is already {call.state.value}",
            code=code or "call_already_settled",
            state=call.state.value,
        )


def _parse_arguments(
    tool: Tool | None, name: str, arguments: str, agent: Agent
) -> tuple[Any, dict[str, Any] | None]:
    if tool is None:
        known = ", ".join(t.name for t in agent.tools) or "none"
        return None, tool_error(
            ToolErrorCode.UNKNOWN_TOOL, f"There is no tool named {name!r}. Tools: {known}."
        )
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return None, tool_error(
            ToolErrorCode.INVALID_ARGUMENTS, f"The arguments are not valid JSON: {exc}."
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
