"""Which surface runs a call: the rules of docs/protocol.md "Surfaces", as pure functions.

At dispatch a client-side call is assigned to exactly one surface:
1. the surface on which the person approved or edited it (the decision names it);
2. else the most recently active surface with a handler for the tool (for a page tool, one
   holding the registration the run planned with: same name and digest);
3. else none: every surface shows the form, and the first answer wins.

When the assigned surface goes away before answering, ``rehome`` says what happens: a call
it never received goes to another surface; a delivered call runs again elsewhere only if
the tool may run more than once (``effect: read`` or ``idempotent``), else the form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from hostcall.calls.transitions import CallEvent, CallState
from hostcall.store.records import Call, Surface


class FormReason(StrEnum):
    """Why the form answers a call (shown to the person, translated by the widget)."""

    NO_HANDLER = "no_handler"  # no present surface has a handler for the tool
    SURFACE_GONE = "surface_gone"  # its page went away mid-call, and a write never runs twice


def choose(
    surfaces: Iterable[Surface],
    tool_name: str,
    *,
    now: float,
    grace: float,
    preferred: str | None = None,
    digest: str = "",
) -> Surface | None:
    """The surface a call of ``tool_name`` goes to, or None for the form. ``digest``: a page
    tool's, as its run planned it (hostcall/page_tools.py)."""
    able = [s for s in surfaces if s.present(now, grace) and _handles(s, tool_name, digest)]
    for surface in able:
        if surface.id == preferred:
            return surface
    return max(able, key=lambda s: s.last_active, default=None)


def _handles(surface: Surface, tool_name: str, digest: str) -> bool:
    return surface.holds(tool_name, digest) if digest else tool_name in surface.tools


@dataclass(frozen=True, slots=True)
class Rehome:
    event: CallEvent
    surface: Surface | None
    reason: FormReason | None = None


def rehome(
    call: Call,
    assigned: Surface | None,
    surfaces: Iterable[Surface],
    *,
    rerunnable: bool,
    now: float,
    grace: float,
    digest: str = "",
) -> Rehome | None:
    """What to do with an open client call whose surface may be gone; None: leave it."""
    if call.state not in (CallState.DISPATCHED, CallState.DELIVERED):
        return None
    if call.surface_id is None:
        # On the form. A read may still go to a handler that appeared (a reloaded page):
        # running it is harmless, and nobody has to type what the page can read.
        if not rerunnable:
            return None
        target = choose(surfaces, call.tool_name, now=now, grace=grace, digest=digest)
        event = CallEvent.REASSIGN if call.state is CallState.DISPATCHED else CallEvent.RERUN
        return Rehome(event, target) if target else None
    if assigned is not None and assigned.present(now, grace):
        return None
    others = [s for s in surfaces if s.id != call.surface_id]
    target = choose(others, call.tool_name, now=now, grace=grace, digest=digest)
    if call.state is CallState.DISPATCHED:
        # Never written to its stream: it cannot have run, whatever the tool does.
        if target:
            return Rehome(CallEvent.REASSIGN, target)
        return Rehome(CallEvent.TO_FORM, None, FormReason.NO_HANDLER)
    if rerunnable and target:
        return Rehome(CallEvent.RERUN, target)
    if rerunnable:
        # No handler anywhere right now: the form, until a page with a handler comes back.
        return Rehome(CallEvent.TO_FORM, None, FormReason.NO_HANDLER)
    return Rehome(CallEvent.TO_FORM, None, FormReason.SURFACE_GONE)
