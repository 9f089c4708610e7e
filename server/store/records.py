"""What the store keeps: plain frozen records, shared by every store implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from server.calls.transitions import OPEN_STATES, CallState

__all__ = [
    "ANONYMOUS_SURFACE",
    "OPEN_STATES",
    "Call",
    "CallState",
    "Conversation",
    "Run",
    "RunStatus",
    "StoredMessage",
    "Surface",
]


class RunStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    FINISHED = "finished"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    agent_id: str
    created_at: float
    locale: str = ""
    handled_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str
    conversation_id: str
    run_id: str
    role: str
    text: str = ""
    # Each: {"id", "name", "arguments"} — our call ids, so tool answers match them.
    tool_calls: tuple[dict[str, str], ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    conversation_id: str
    agent: dict[str, Any]
    status: RunStatus
    step: int = 0
    error: dict[str, Any] | None = None
    simulate: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    conversation_id: str
    run_id: str
    step: int
    tool_name: str
    state: CallState
    input: Any
    arguments: str
    deadline: float
    route: str = "form"
    outcome: dict[str, Any] | None = None
    delivered: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # The surface the call is assigned to (route "handler"); None while the form answers it.
    surface_id: str | None = None
    # How many times it was assigned to a surface: a stream delivers only the latest.
    assignment: int = 0


# A client that names no surface speaks for the whole conversation (docs/protocol.md): it is
# always present, and a call is never taken away from it.
ANONYMOUS_SURFACE = "conversation"


@dataclass(frozen=True, slots=True)
class Surface:
    """One attached place a person is: a widget in a tab, a console, a custom client."""

    id: str
    conversation_id: str
    tools: tuple[str, ...] = ()
    last_active: float = 0.0
    # Open event streams of this surface (a page may briefly have two while reconnecting).
    streams: int = 0
    # When its last stream closed; a surface reconnecting within the grace period is kept.
    detached_at: float | None = None
    # The page said it is going away (reload, navigation, closed tab): no grace period.
    left: bool = False

    def present(self, now: float, grace: float) -> bool:
        if self.id == ANONYMOUS_SURFACE:
            return True
        if self.left:
            return False
        return self.streams > 0 or (self.detached_at is not None and now - self.detached_at < grace)
