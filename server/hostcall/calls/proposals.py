"""Proposing: a call the model asked for is recorded, checked (arguments, per-pass limits,
guardrails) and sent where its policies say: refused, simulated, to a person for approval,
or dispatched (to its block, a surface, or the form).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hostcall import strictjson
from hostcall.agents import Agent
from hostcall.apps.resources import app_only
from hostcall.calls.moves import CallMoves, tool_error
from hostcall.calls.outcomes import Moved
from hostcall.calls.transitions import CallEvent
from hostcall.errors import (
    ToolErrorCode,
)
from hostcall.guardrails import Hit, evaluate
from hostcall.journal import Unit
from hostcall.policies import approval_reason
from hostcall.protocol.events import (
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from hostcall.runs.agents import RunAgents
from hostcall.store.interfaces import Calls
from hostcall.store.records import Call, CallState, Run
from hostcall.tools import Tool

SCOPES = ("once", "conversation")


class Proposals:
    def __init__(self, moves: CallMoves, agents: RunAgents, *, store: Calls) -> None:
        self.moves = moves
        self.store = store
        self.agents = agents

    async def propose(
        self,
        unit: Unit,
        *,
        run: Run,
        agent: Agent,
        conversation_id: str,
        step: int,
        call_id: str,
        name: str,
        arguments: str,
        message_id: str,
    ) -> Moved:
        """Record a call the model asked for, and send it where its policies say: the call
        as its move left it (``Dispatched``, perhaps to execute, when it was sent)."""
        cid = conversation_id
        await unit.emit(cid, ToolCallStart(call_id, name, message_id))
        await unit.emit(cid, ToolCallArgs(call_id, arguments))
        await unit.emit(cid, ToolCallEnd(call_id))

        tool = agent.tool(name)
        if app_only(tool):
            tool = None  # its server's views' alone: to the model, no such tool
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
            hits = evaluate(tool.guardrails, "input", value, visitor=run.visitor)
            await self.moves.record_hits(unit, cid, call_id, name, hits)
            blocked = next((h for h in hits if h.action == "block"), None)
            if blocked:
                failure = tool_error(
                    ToolErrorCode.BLOCKED_BY_GUARDRAIL,
                    f"The guardrail {blocked.rule!r} blocked this call; it was not executed.",
                    rule=blocked.rule,
                )
        now = self.moves.clock()
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
        if failure is not None:
            await self.store.add_call(call)
            failure["guardrails"] = [h.to_json() for h in hits]
            refused = await self.moves.settle(unit, call, CallEvent.REFUSE, failure)
            assert refused is not None, "a call just added is where the move starts"
            return Moved(refused)  # in the step that proposed it: nothing to resume
        assert tool is not None
        if run.simulate:
            await self.store.add_call(call)
            result = tool.simulation_result if tool.has_simulation_result else None
            simulated = await self.moves.settle(
                unit, call, CallEvent.SIMULATE, {"output": result, "simulated": True}
            )
            assert simulated is not None, "a call just added is where the move starts"
            return Moved(simulated)
        environment = self.agents.platform.environment(agent.environment)
        # A grant matters only to a tool that always asks (a read the others need not make).
        granted = tool.approval == "always" and await self.store.has_grant(cid, name)
        reason = approval_reason(tool, environment, granted=granted, hits=hits)
        if reason is not None:
            await self.store.add_call(call)
            approval = {
                "reason": reason.value,
                "scopes": list(SCOPES) if reason.grantable else ["once"],
            }
            moved = await self.moves.move(
                unit, call, CallEvent.ASK,
                deadline=now + tool.approval_timeout_seconds,
                extra={**call.extra, "approval": approval},
            )  # fmt: skip
            assert moved is not None, "a call just proposed is ours to move"
            return moved
        if granted:
            approval = {"reason": "grant", "scope": "conversation"}
            call = replace(call, extra={**call.extra, "approval": approval})
        # Not stored yet: it goes in as dispatched (one INSERT, not an INSERT and an UPDATE).
        return await self.moves.dispatch(
            unit, call, tool, CallEvent.DISPATCH, value, surface=None, stored=False
        )


def _parse_arguments(
    tool: Tool | None, name: str, arguments: str, agent: Agent
) -> tuple[Any, dict[str, Any] | None]:
    if tool is None:
        known = ", ".join(t.name for t in agent.tools if not app_only(t)) or "none"
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
