"""The core of the call ledger (hostcall/ledger.py): the one way a call moves. Every store
write of a call's state is the table's move (hostcall/calls/transitions.py), made by
``_update`` with one conditional UPDATE; ``move`` performs the move's effects in the
caller's unit, ``settle`` records an outcome with the tool message and the
``TOOL_CALL_RESULT`` event. What is left for the caller, once the unit commits, comes back
as a value (hostcall/calls/outcomes.py).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any, Protocol

from hostcall.calls.assignment import FormReason, choose
from hostcall.calls.observed import observe_committed
from hostcall.calls.outcomes import Dispatched, Moved, Settled
from hostcall.calls.transitions import CallEvent, Effect, Move, sources, transition
from hostcall.calls.views import CallViews
from hostcall.errors import Conflict, Gone, ToolErrorCode
from hostcall.guardrails import Hit
from hostcall.journal import Journal, Unit
from hostcall.leases import Leases, call_key
from hostcall.policies import settled_result
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.events import (
    ApprovalRequested,
    CallDispatched,
    GuardrailMatched,
    ToolCallResult,
)
from hostcall.store.interfaces import Calls, Messages, Surfaces
from hostcall.store.records import Call, CallState, StoredMessage
from hostcall.tools import Tool
from hostcall.tracing import Tracing

log = logging.getLogger("hostcall.guardrails")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def tool_error(code: ToolErrorCode, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code.value, "message": message, **details}}


# What the model reads for a write that ended without a result after it may have run.
MAY_HAVE_RUN = "it may already have taken effect."


def may_have_run(call: Call, tool: Tool | None) -> bool:
    """Whether an open call's write may have taken effect: a page received it (a read or an
    idempotent tool is run again instead), or its server-side block was started — a
    dispatched server-side call's request goes out as soon as its dispatch commits, and
    is never sent twice (hostcall/runs/recovery.py)."""
    if tool is None or tool.rerunnable:
        return False
    if tool.kind == "client":
        return call.delivered
    return call.state is CallState.DISPATCHED


class _MoveStore(Calls, Messages, Surfaces, Protocol):
    """What a call's moves write: the call, its tool message, and where its surfaces are."""


class CallMoves:
    def __init__(
        self,
        journal: Journal,
        views: CallViews,
        leases: Leases,
        *,
        store: _MoveStore,
        clock: Callable[[], float] = time.time,
        surface_grace: float = 5.0,
        tracing: Tracing | None = None,
    ) -> None:
        self.journal = journal
        self.store = store
        self.views = views
        self.leases = leases
        self.clock = clock
        # How long a surface whose streams all closed keeps its calls (a reconnect).
        self.surface_grace = surface_grace
        self.tracing = tracing or Tracing.off()

    # ---- dispatching (a proposal, or an approval) -------------------------------------

    async def dispatch(
        self,
        unit: Unit,
        call: Call,
        tool: Tool,
        event: CallEvent,
        value: Any,
        *,
        surface: str | None,
        stored: bool = True,
    ) -> Moved:
        """Send the call where it runs: its block, a surface (the claim), or the form; a
        page tool no present page holds and no form may answer fails ``no_handler``.

        ``stored=False``: a call proposed in the caller's unit and not stored yet; it is
        stored as the move leaves it (nobody else can see it before the unit commits)."""
        now = self.clock()
        deadline = now + tool.deadline_seconds
        changes: dict[str, Any] = {"input": value, "extra": call.extra}
        if tool.kind != "client":
            # The block enforces this timeout itself; the sweeper is only the safety net.
            deadline += 5
        else:
            changes |= await self._assignment(call, tool, preferred=surface, now=now)
            if changes["surface_id"] is None and not tool.has_form:
                return await self._no_handler(unit, call, stored=stored)
        if not stored:
            move = transition(call.state, event)
            placed = replace(call, state=move.to, deadline=deadline, **changes)
            await self.store.add_call(placed)
            return Dispatched(placed, execute=await self._perform(unit, placed, move))
        moved = await self.move(unit, call, event, deadline=deadline, **changes)
        if moved is None:
            raise await self.not_open(call.id, deciding=event is CallEvent.APPROVE)
        assert isinstance(moved, Dispatched), f"{event.value} sends a call where it runs"
        return moved

    async def _no_handler(self, unit: Unit, call: Call, *, stored: bool) -> Moved:
        """A page tool's call with nowhere to run: no open page holds the registration its
        run planned with, and without the agent file's output schema no form stands in."""
        outcome = tool_error(
            ToolErrorCode.NO_HANDLER,
            f"No open page has the tool {call.tool_name!r} as this run planned it; it was not run.",
        )
        if not stored:
            await self.store.add_call(call)
            refused = await self.settle(unit, call, CallEvent.REFUSE, outcome)
            assert refused is not None, "a call just added is where the move starts"
            return Moved(refused)  # in the step that proposed it: nothing to resume
        # Approved (or waiting for it), never dispatched: it ends as a cancelled call does.
        settled = await self.settle(unit, call, CallEvent.CANCEL, outcome)
        if settled is None:
            raise await self.not_open(call.id, deciding=True)
        return Settled(settled)

    async def _assignment(
        self, call: Call, tool: Tool, *, preferred: str | None, now: float
    ) -> dict[str, Any]:
        """The store changes that assign ``call`` to a surface, or to the form."""
        surfaces = await self.store.list_surfaces(call.conversation_id)
        target = choose(
            surfaces,
            call.tool_name,
            now=now,
            grace=self.surface_grace,
            preferred=preferred,
            digest=tool.page_digest,
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

    async def record_hits(
        self, unit: Unit, conversation_id: str, call_id: str, name: str, hits: list[Hit]
    ) -> None:
        for hit in hits:
            log.info("guardrail %r (%s, %s) matched call %s of %r",
                     hit.rule, hit.action, hit.on, call_id, name)  # fmt: skip
            await unit.emit(
                conversation_id, GuardrailMatched(call_id, hit.rule, hit.action, hit.on)
            )

    # ---- moving and settling ---------------------------------------------------------

    async def move(self, unit: Unit, call: Call, event: CallEvent, **changes: Any) -> Moved | None:
        """Make the table's move for ``event`` in the store and perform its effects in
        ``unit``; None if the call is no longer where the move starts (someone else moved
        it). ``Dispatched`` when the move sends the call where it runs."""
        assigned = (call.surface_id, call.assignment) if event in _REASSIGNING else None
        made = await self._update(call.id, event, read=call.state, assigned=assigned, **changes)
        if made is None:
            return None
        moved, move = made
        execute = await self._perform(unit, moved, move)
        if Effect.EMIT_DISPATCH in move.effects:
            return Dispatched(moved, execute=execute)
        return Moved(moved)

    async def deliver_row(
        self, call_id: str, assigned: tuple[str, int] | None = None
    ) -> Call | None:
        """The delivery UPDATE alone (a surface's claim; ``assigned`` None: a client's that
        names no surface): the call as it left ``dispatched``, or None."""
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
            move, starts = _unread_move(event)
        else:
            move = transition(read, event)
            starts = tuple(s for s in sources(event) if transition(s, event).to is move.to)
            if move.to is read:
                starts = (read,)
        moved = await self.store.transition_call(
            call_id, starts, move.to, assigned=assigned, **changes
        )
        return None if moved is None else (moved, move)

    async def _perform(self, unit: Unit, call: Call, move: Move) -> bool:
        """The move's effects in ``unit``; True if the caller must start the call's block
        (EXECUTE) once the unit commits."""
        execute = False
        for effect in move.effects:
            if effect is Effect.EMIT_APPROVAL_REQUESTED:
                view = await self.views.view(call)
                await unit.emit(call.conversation_id, ApprovalRequested(view))
            elif effect is Effect.EMIT_DISPATCH:
                await unit.emit(call.conversation_id, CallDispatched(await self.views.view(call)))
            elif effect is Effect.EXECUTE:
                tool = await self.views.tool_of(call)
                if tool is not None and tool.kind != "client":
                    # Taken in the dispatching unit: the lease commits with the dispatch, and
                    # the request starts once both are committed (it reads the dispatched call).
                    taken = await self.leases.take(call_key(call.id))
                    assert taken, "a newly dispatched call's lease is free"
                    execute = True
            # RECORD_OUTCOME is settle's (it needs the outcome); RESUME_RUN is the caller's,
            # on the Settled it gets, after the unit commits: the next step reads what this
            # one wrote.
        return execute

    async def settle(
        self,
        unit: Unit,
        call: Call,
        event: CallEvent,
        outcome: dict[str, Any],
        *,
        by: str | None = None,
    ) -> Call | None:
        """The call as settled, or None when someone else moved it first. ``by``: who
        answered, where the call's route does not say (``"operator"``)."""
        settled = await self.settle_row(call.id, event, outcome)
        if settled is None:
            return None
        tool = await self.views.tool_of(settled)
        await self.record_outcome(unit, settled, tool, outcome, by=by)
        return settled

    async def settle_row(
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

    async def record_outcome(
        self,
        unit: Unit,
        settled: Call,
        tool: Tool | None,
        outcome: dict[str, Any],
        *,
        by: str | None = None,
    ) -> None:
        """The settled call's tool message (what the model reads) and its
        ``TOOL_CALL_RESULT``, in the unit that settled it; counted and traced
        (hostcall/calls/observed.py) once the unit commits."""
        now = self.clock()
        observe_committed(unit, self.tracing, settled, tool, outcome, by=by, now=now)
        shown = settled_result(tool, outcome)
        message_id = new_id("m")
        await self.store.add_message(StoredMessage(
            id=message_id, conversation_id=settled.conversation_id, run_id=settled.run_id,
            role="tool", text=shown.content, tool_call_id=settled.id, tool_name=settled.tool_name,
        ))  # fmt: skip
        result = ToolCallResult(
            message_id=message_id,
            tool_call_id=settled.id,
            content=shown.event_content,
            state=settled.state.value,
            outcome=shown.outcome,
            simulated=True if outcome.get("simulated") else None,
            view=shown.view,
            app=await self.views.apps.ref(settled, tool),
        )
        await unit.emit(settled.conversation_id, result)

    async def reload(self, call_id: str) -> Call:
        call = await self.store.get_call(call_id)
        assert call is not None
        return call

    async def not_open(self, call_id: str, *, deciding: bool = False) -> Conflict | Gone:
        """The one refusal for a call in the wrong state, whether the request checked first
        or lost a race at the conditional UPDATE: the same situation gets the same code
        (docs/protocol.md). ``details.state`` says where the call is."""
        call = await self.reload(call_id)
        state = call.state.value
        if call.state is CallState.EXPIRED:
            return Gone(f"call {call_id} passed its deadline and has expired")
        if deciding:
            return Conflict(
                f"call {call_id} is {state}, not waiting for a decision",
                code=ErrorCode.CALL_NOT_AWAITING_DECISION,
                state=state,
            )
        if call.state.open:
            return Conflict(
                f"call {call_id} is {state}; it cannot be answered yet",
                code=ErrorCode.CALL_NOT_DISPATCHED,
                state=state,
            )
        return Conflict(
            f"call {call_id} is already {state}", code=ErrorCode.CALL_ALREADY_SETTLED, state=state
        )


@cache
def _unread_move(event: CallEvent) -> tuple[Move, tuple[CallState, ...]]:
    """``_update``'s move for a call it did not read, and the states it starts from: every
    state ``event`` leaves leads to the one move (an answer's, on its round trip)."""
    (move,) = {transition(s, event) for s in sources(event)}
    return move, tuple(sorted(sources(event)))


# Moves that take a call from its surface: only while it is still on the one we read.
_REASSIGNING = frozenset({CallEvent.REASSIGN, CallEvent.RERUN, CallEvent.TO_FORM})
