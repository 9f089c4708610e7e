"""A settled call, told to the metrics and the traces: its final state, who answered it
(``page``, ``form``, ``operator``, ``block``, ``simulation``, or ``none`` when nobody did:
refused at its proposal, expired, or cancelled), and how long it took from its dispatch."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from hostcall import metrics, strictjson
from hostcall.errors import ToolErrorCode
from hostcall.journal import Unit
from hostcall.store.records import Call, CallState
from hostcall.tools import Tool
from hostcall.tracing import Attributes, Tracing

# A block's deadline is its timeout plus the sweeper's margin (hostcall/calls/moves.py).
_BLOCK_MARGIN = 5.0


# Ended by a Stop or an operator before anyone answered (hostcall/calls/answers.py).
_CANCELLED = frozenset(
    {ToolErrorCode.CANCELLED, ToolErrorCode.OPERATOR_CANCELLED, ToolErrorCode.OPERATOR_ENDED}
)


def answered_by(call: Call, tool: Tool | None, outcome: dict[str, Any], by: str | None) -> str:
    error = outcome.get("error")
    cancelled = isinstance(error, dict) and error.get("code") in _CANCELLED
    if tool is None or call.state is CallState.EXPIRED or not call.deadline or cancelled:
        return "none"  # an unknown tool, refused before it went anywhere, expired, cancelled
    if outcome.get("simulated"):
        return "simulation"
    if tool.kind != "client":
        return "block"
    if by is not None:
        return by
    return "page" if call.route == "handler" else "form"


def observe_settled(
    tracing: Tracing,
    call: Call,
    tool: Tool | None,
    outcome: dict[str, Any],
    *,
    by: str | None,
    now: float,
) -> None:
    route = answered_by(call, tool, outcome, by)
    state = call.state.value
    label = metrics.answered_by_label(route)
    metrics.child(metrics.TOOL_CALLS, state, label).inc()
    started = now
    if tool is not None and call.deadline:
        margin = _BLOCK_MARGIN if tool.kind != "client" else 0.0
        started = min(now, call.deadline - tool.deadline_seconds - margin)
    metrics.child(metrics.TOOL_CALL_SECONDS, label).observe(max(0.0, now - started))
    if not tracing.on:
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool_name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function" if tool is None or tool.kind == "client" else "extension",
        "gen_ai.conversation.id": call.conversation_id,
        "hostcall.tool_call.outcome": state,
        "hostcall.tool_call.answered_by": route,
    }
    error = outcome.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if tracing.content:
        # Only when the operator opted in: arguments and results are the visitor's data.
        attributes["gen_ai.tool.call.arguments"] = call.arguments
        attributes["gen_ai.tool.call.result"] = strictjson.dumps(outcome.get("output", error))
    typed: Attributes = attributes
    tracing.record(f"execute_tool {call.tool_name}", typed, run_id=call.run_id, start=started,
                   end=now, error=code if isinstance(code, str) else None)  # fmt: skip


def observe_committed(
    unit: Unit,
    tracing: Tracing,
    call: Call,
    tool: Tool | None,
    outcome: dict[str, Any],
    *,
    by: str | None,
    now: float,
) -> None:
    """``observe_settled`` once ``unit`` has committed (a unit rolled back settled nothing,
    and is not counted), a turn after its events are published: the streams write the
    call's ``TOOL_CALL_RESULT`` first, and the counting is not on the round trip's path."""
    counted = partial(observe_settled, tracing, call, tool, outcome, by=by, now=now)

    def committed() -> None:
        asyncio.get_running_loop().call_soon(counted)

    unit.afterwards.append(committed)
