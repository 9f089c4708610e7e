"""What the store keeps: plain frozen records, shared by every store implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class CallState(StrEnum):
    """A tool call's life (docs/protocol.md). Terminal states never change again."""

    PROPOSED = "proposed"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    DISPATCHED = "dispatched"
    DELIVERED = "delivered"
    ANSWERED = "answered"
    REJECTED = "rejected"
    FAILED = "failed"
    EXPIRED = "expired"

    @property
    def open(self) -> bool:
        return self in OPEN_STATES

    @property
    def answerable(self) -> bool:
        return self in (CallState.DISPATCHED, CallState.DELIVERED)


OPEN_STATES = frozenset(
    {CallState.PROPOSED, CallState.AWAITING_CONFIRMATION, CallState.DISPATCHED, CallState.DELIVERED}
)


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
