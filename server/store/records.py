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
    # Bumped each time a widget resumes the conversation from its cookie; session tokens
    # of an older generation are refused (session fixation, issue 7).
    session_generation: int = 0


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
    # An assistant message cut off by a failed run: kept, since the person saw it (issue 8).
    interrupted: bool = False


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


# ---- the operator console (issue 11) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class User:
    """A console account. ``password_hash`` is an argon2 hash string; never the password."""

    name: str
    role: str
    password_hash: str
    created_at: float


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One console action: who, what, when, on which conversation / call / agent.

    ``id`` is assigned by the store (increasing); pass 0 when adding.
    """

    at: float
    actor: str
    action: str
    conversation_id: str | None = None
    call_id: str | None = None
    agent_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    id: int = 0


@dataclass(frozen=True, slots=True)
class ConversationQuery:
    """Filters for ``Store.list_conversations`` (all optional; combined with AND).

    ``waiting``: only conversations with a call waiting for a person — a call awaiting
    confirmation, or a dispatched/delivered call whose route is ``form``.
    ``text``: case-insensitive substring of any message's text, or of the conversation id.
    """

    agent_id: str | None = None
    run_status: RunStatus | None = None
    waiting: bool = False
    text: str = ""
    limit: int = 50
    offset: int = 0


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    conversation: Conversation
    # The status of the conversation's latest run; None before its first message.
    run_status: RunStatus | None
    # How many of its calls wait for a person (the definition of ``ConversationQuery.waiting``).
    waiting_calls: int
    # The text of its first user message ('' if none), for the list.
    first_message: str


@dataclass(frozen=True, slots=True)
class AgentVersion:
    """One saved version of an agent file. ``version`` counts from 1 per agent (store-assigned)."""

    agent_id: str
    version: int
    body: str
    author: str
    created_at: float
    note: str = ""
