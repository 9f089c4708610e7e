"""The core of the call ledger (hostcall/ledger.py): views of a call, and the one way a call
moves. Every store write of a call's state is the table's move
(hostcall/calls/transitions.py), made by ``_update`` with one conditional UPDATE; ``_move``
performs the move's effects, ``_settle`` records an outcome with the tool message and the
``TOOL_CALL_RESULT`` event, in the caller's unit.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hostcall.agents import Agent
from hostcall.calls.assignment import FormReason, choose
from hostcall.calls.transitions import CallEvent, Effect, Move, sources, transition
from hostcall.errors import (
    Conflict,
    Gone,
    ToolErrorCode,
)
from hostcall.guardrails import Hit
from hostcall.journal import Journal, Unit
from hostcall.platform import Platform
from hostcall.policies import model_content, visible_outcome
from hostcall.protocol.events import (
    ApprovalRequested,
    CallDispatched,
    GuardrailMatched,
    ToolCallResult,
)
from hostcall.protocol.responses import CallView
from hostcall.store.records import Call, CallState, StoredMessage
from hostcall.tokens import Claims, Purpose, Tokens, input_digest
from hostcall.tools import Tool

log = logging.getLogger("hostcall.guardrails")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def tool_error(code: ToolErrorCode, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code.value, "message": message, **details}}


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class CallMoves:
    def __init__(
        self,
        journal: Journal,
        tokens: Tokens,
        *,
        agent_of_run: Callable[[str], Awaitable[Agent]],
        run_agent: Callable[[str], Awaitable[Agent | None]],
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
        self.run_agent = run_agent  # agent_of_run, or None for a run id that names no run
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

    # ---- settling ------------------------------------------------------------------------

    # ---- dispatching (a proposal, or an approval) -------------------------------------

    async def _dispatch(
        self,
        unit: Unit,
        call: Call,
        tool: Tool,
        event: CallEvent,
        value: Any,
        *,
        surface: str | None,
        stored: bool = True,
    ) -> Call:
        """Send the call where it runs: its block, a surface (the claim), or the form.

        ``stored=False``: a call proposed in the caller's unit and not stored yet; it is
        stored as the move leaves it (nobody else can see it before the unit commits)."""
        now = self.clock()
        deadline = now + tool.deadline_seconds
        changes: dict[str, Any] = {"input": value, "extra": call.extra}
        if tool.kind != "client":
            # The block enforces this timeout itself; the sweeper is only the safety net.
            deadline += 5
        else:
            changes |= await self._assignment(call, preferred=surface, now=now)
        if not stored:
            move = transition(call.state, event)
            placed = replace(call, state=move.to, deadline=deadline, **changes)
            await self.store.add_call(placed)
            await self._perform(unit, placed, move)
            return placed
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

    # ---- moving and settling ---------------------------------------------------------

    async def _move(self, unit: Unit, call: Call, event: CallEvent, **changes: Any) -> Call | None:
        """Make the table's move for ``event`` in the store and perform its emit effects;
        None if the call is no longer where the move starts (someone else moved it)."""
        assigned = (call.surface_id, call.assignment) if event in _REASSIGNING else None
        made = await self._update(call.id, event, read=call.state, assigned=assigned, **changes)
        if made is None:
            return None
        moved, move = made
        await self._perform(unit, moved, move)
        return moved

    async def _deliver_row(self, call_id: str, assigned: tuple[str, int]) -> Call | None:
        """The delivery UPDATE alone (a surface's claim): the call as it left
        ``dispatched``, or None."""
        made = await self._update(call_id, CallEvent.DELIVER, read=None, assigned=assigned,
                                  delivered=True)  # fmt: skip
        if made is None:
            return None
        moved, move = made
        assert not move.effects, "a delivery has nothing to perform"
        return moved

    async def _update(
        self,
        call_id: str,
        event: CallEvent,
        *,
        read: CallState | None,
        assigned: tuple[str | None, int] | None = None,
        **changes: Any,
    ) -> tuple[Call, Move] | None:
        """The one store write of a call's state: the table's move for ``event``, as one
        conditional UPDATE; the call as it left it and the move, or None.

        ``read``: the state the caller read the call in. The UPDATE starts from every state
        the event leaves for the same place: a request holding a call read a moment ago
        (say dispatched) still settles it if it was delivered since; a move within a state
        (to the form, reassigned) only from that state. ``read=None``: the caller did not
        read the call (hostcall/calls/answers.py); every state the event leaves leads to one
        move, and the store's conditional update has the last word."""
        if read is None:
            (move,) = {transition(s, event) for s in sources(event)}
            starts = sorted(sources(event))
        else:
            move = transition(read, event)
            starts = [s for s in sources(event) if transition(s, event).to is move.to]
            if move.to is read:
                starts = [read]
        moved = await self.store.transition_call(
            call_id, starts, move.to, assigned=assigned, **changes
        )
        return None if moved is None else (moved, move)

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
    ) -> Call | None:
        """The call as settled, or None when someone else moved it first."""
        settled = await self._settle_row(call.id, event, outcome)
        if settled is None:
            return None
        await self._record_outcome(unit, settled, await self.tool_of(settled), outcome)
        return settled

    async def _settle_row(
        self, call_id: str, event: CallEvent, outcome: dict[str, Any]
    ) -> Call | None:
        """The settling UPDATE alone, from any state the event leaves: the call as it left
        it, or None."""
        made = await self._update(call_id, event, read=None, outcome=outcome)
        if made is None:
            return None
        settled, move = made
        assert Effect.RECORD_OUTCOME in move.effects, f"{event.value} does not settle a call"
        return settled

    async def _record_outcome(
        self, unit: Unit, settled: Call, tool: Tool | None, outcome: dict[str, Any]
    ) -> None:
        """The settled call's tool message (what the model reads) and its
        ``TOOL_CALL_RESULT``, in the unit that settled it."""
        content = model_content(tool, outcome)
        message_id = new_id("m")
        await self.store.add_message(StoredMessage(
            id=message_id, conversation_id=settled.conversation_id, run_id=settled.run_id,
            role="tool", text=content, tool_call_id=settled.id, tool_name=settled.tool_name,
        ))  # fmt: skip
        result = ToolCallResult(
            message_id=message_id,
            tool_call_id=settled.id,
            content=content,
            state=settled.state.value,
            outcome=visible_outcome(tool, outcome),
            simulated=True if outcome.get("simulated") else None,
        )
        await unit.emit(settled.conversation_id, result)

    async def _settled(self, settled: Call) -> Call:
        """After the unit that settled the call committed (its ``TOOL_CALL_RESULT`` is
        published): resume the run, then give the loop two turns before this request goes
        on to its response. The streams were woken before the run's task was started, so in
        the first turn they write ``TOOL_CALL_RESULT``, then the resumed step runs up to its
        first wait (a model that answers at once: up to its first text, committed and
        published); in the second, the streams write that text. The person's next words do
        not wait behind the answering page's 200 (issue 9: the resumed run's first text).
        ``settled``: the call as its settling UPDATE left it."""
        await self.on_settled(settled.run_id)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return settled

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
