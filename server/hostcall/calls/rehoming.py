"""Where a client-side call runs: a surface's stream claims the dispatch it passes on, and
calls whose surface is gone move to another surface or the form (the rules are in
hostcall/calls/assignment.py; docs/protocol.md "Surfaces").
"""

from __future__ import annotations

from typing import Any, Protocol

from hostcall.calls.assignment import rehome
from hostcall.calls.moves import MAY_HAVE_RUN, CallMoves, tool_error
from hostcall.calls.outcomes import Moved, Settled
from hostcall.calls.transitions import CallEvent
from hostcall.errors import ToolErrorCode
from hostcall.store.interfaces import Calls, Database, Surfaces
from hostcall.store.records import Call, CallState, Surface


class _RehomingStore(Calls, Database, Surfaces, Protocol):
    """What moving calls between surfaces reads: calls and surfaces, in a transaction."""


class Rehoming:
    def __init__(self, moves: CallMoves, *, store: _RehomingStore) -> None:
        self.moves = moves
        self.store = store

    async def claim(self, call_id: str, surface_id: str, assignment: int) -> bool:
        """Record that assignment ``assignment`` of the call reached surface ``surface_id``.

        Called by that surface's stream just before it writes the dispatch (or by its
        snapshot): from here on the surface may run the handler, with no request of its
        own. False when the call was settled or assigned elsewhere since: the stream then
        does not pass the stale dispatch on.
        """
        async with self.store.transaction():
            if await self.moves.deliver_row(call_id, (surface_id, assignment)):
                return True
        call = await self.store.get_call(call_id)
        return (
            call is not None
            and call.state is CallState.DELIVERED
            and (call.surface_id, call.assignment) == (surface_id, assignment)
        )

    async def rehome(self, conversation_id: str) -> list[Moved]:
        """Move the open client calls of a conversation whose surface is gone (see
        hostcall/calls/assignment.py); the calls moved. A page tool's call that no form may
        answer fails ``no_handler`` instead: a ``Settled``, whose run the caller resumes."""
        now = self.moves.clock()
        calls = [
            c for c in await self.store.list_calls(conversation_id)
            if c.state in (CallState.DISPATCHED, CallState.DELIVERED)
        ]  # fmt: skip
        if not calls:
            return []
        surfaces = await self.store.list_surfaces(conversation_id)
        by_id = {s.id: s for s in surfaces}
        moved: list[Moved] = []
        for call in calls:
            tool = await self.moves.views.tool_of(call)
            if tool is None or tool.kind != "client":
                continue
            plan = rehome(
                call, by_id.get(call.surface_id or ""), surfaces,
                rerunnable=tool.rerunnable, now=now, grace=self.moves.surface_grace,
                digest=tool.page_digest,
            )  # fmt: skip
            if plan is None:
                continue
            if plan.surface is None and not tool.has_form:
                if _may_come_back(call, by_id.get(call.surface_id or ""), tool.rerunnable,
                                  now=now, grace=self.moves.surface_grace):  # fmt: skip
                    continue
                async with self.moves.journal.unit() as unit:
                    settled = await self.moves.settle(unit, call, CallEvent.FAIL, _gone(call))
                moved += [Settled(settled)] if settled is not None else []
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
            async with self.moves.journal.unit() as unit:
                made = await self.moves.move(unit, call, plan.event, **changes)
            moved += [made] if made is not None else []
        return moved

    async def rehome_due(self) -> list[Settled]:
        """The sweeper's pass: every conversation with a call on a surface or the form."""
        conversations = {
            c.conversation_id
            for c in await self.store.calls_in_states([CallState.DISPATCHED, CallState.DELIVERED])
        }
        moved = [m for cid in sorted(conversations) for m in await self.rehome(cid)]
        return [m for m in moved if isinstance(m, Settled)]


def _may_come_back(
    call: Call, gone: Surface | None, rerunnable: bool, *, now: float, grace: float
) -> bool:
    """Whether a page tool's call with no form waits for its page a while longer: a reload
    (a new surface, the same registration) may take it within the grace period after its
    page went, if it never ran or may run again; a delivered write never runs twice."""
    if gone is None or gone.detached_at is None or (call.delivered and not rerunnable):
        return False
    return now - gone.detached_at < grace


def _gone(call: Call) -> dict[str, Any]:
    """Why a page tool's call with no page left to run it failed; a delivered one may have
    run before its page went."""
    said = (
        f"Its page went away after receiving it: {MAY_HAVE_RUN}"
        if call.delivered
        else ("It was not run.")
    )
    details: dict[str, Any] = {"mayHaveRun": True} if call.delivered else {}
    return tool_error(
        ToolErrorCode.NO_HANDLER,
        f"No open page has the tool {call.tool_name!r} as this run planned it. {said}",
        **details,
    )
