"""How the ledger shows a call: its tool (of the run's agent, as the run started) and the
``CALL`` shape of docs/protocol.md, with the token the call's state needs."""

from __future__ import annotations

from datetime import UTC, datetime

from hostcall.apps.references import AppReferences
from hostcall.errors import RunUnreadable
from hostcall.policies import visible_outcome, visible_view
from hostcall.protocol.responses import CallView
from hostcall.runs.agents import RunAgents
from hostcall.store.records import Call, CallState
from hostcall.tokens import Claims, Purpose, Tokens, input_digest
from hostcall.tools import Tool


class CallViews:
    def __init__(self, tokens: Tokens, agents: RunAgents, *, apps: AppReferences) -> None:
        self.tokens = tokens
        self.agents = agents
        # What a settled call says of its MCP App view (hostcall/apps/references.py).
        self.apps = apps

    async def tool_of(self, call: Call) -> Tool | None:
        return (await self.agents.agent_of_run(call.run_id)).tool(call.tool_name)

    async def known_tool(self, call: Call) -> Tool:
        """``tool_of`` for a call that must have one; ``RunUnreadable`` if the run's stored
        definition lacks it (a row is data this process did not write)."""
        tool = await self.tool_of(call)
        if tool is None:
            reason = f"call {call.id} names tool {call.tool_name!r}, which its run lacks"
            raise RunUnreadable(call.run_id, [reason])
        return tool

    async def view(self, call: Call, *, operator: bool = False) -> CallView:
        """The ``CALL`` shape of docs/protocol.md, with the token the call's state needs;
        the ``operator``'s (the console) shows an error as the model read it."""
        tool = await self.tool_of(call)
        kind = tool.kind if tool else "client"
        claims = Claims(
            call.conversation_id,
            call.id,
            call.tool_name,
            input_digest(call.input),
            run_id=call.run_id,
        )
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
            outcome=None
            if call.outcome is None
            else visible_outcome(tool, call.outcome, operator=operator),
            approval=call.extra.get("approval"),
            simulated=True if call.outcome and call.outcome.get("simulated") else None,
            surface_id=call.surface_id,
            assignment=call.assignment,
            title=tool.title if tool and tool.title else None,
            form_reason=call.extra.get("formReason"),
            page_tool=True if tool and tool.page_digest else None,
            view=None if call.outcome is None else visible_view(tool, call.outcome),
            app=await self.apps.ref(call, tool),
            origin=call.extra.get("origin"),
            view_call=call.extra.get("viewCall"),
            result_token=self.tokens.sign(Purpose.CALL_RESULT, claims) if answerable else None,
            decision_token=self.tokens.sign(Purpose.CALL_DECISION, claims) if awaiting else None,
        )


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
