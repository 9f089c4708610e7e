"""What the store keeps for the people around a conversation: the console's accounts,
sessions and audit, its lists and queries, the visitors' ratings and feedback, handoffs,
a person's history, agent versions and model usage. Plain frozen records, as
hostcall/store/records.py's, shared by every store implementation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hostcall.store.records import Conversation, RunStatus


@dataclass(frozen=True, slots=True)
class User:
    """A console account. ``password_hash`` is an argon2 hash string; never the password."""

    name: str
    role: str
    password_hash: str
    created_at: float


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in console session. ``digest`` is a hash of the id its cookie carries, so
    a copy of the database alone does not give a usable session."""

    digest: str
    user: str
    created_at: float
    expires_at: float


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
    # Only this person's conversations (``Conversation.person``).
    person: str | None = None
    # ``waiting`` (queued by the agent's ``ask_for_person``) or ``taken`` (a person holds it).
    handoff: str | None = None
    # ``up`` or ``down``: only conversations with a reply the visitor rated so.
    feedback: str | None = None
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
    # Its handoff's state (``waiting``, ``taken``) and who of the team holds it; None and ""
    # if neither. (Not ``conversation.person``, the visitor it belongs to.)
    handoff: str | None = None
    held_by: str = ""
    # How many of its replies the visitor rated up and down.
    feedback_up: int = 0
    feedback_down: int = 0


@dataclass(frozen=True, slots=True)
class Feedback:
    """A visitor's rating of one reply of the agent: one per message, the latest kept."""

    conversation_id: str
    message_id: str
    rating: str  # "up" | "down"
    comment: str
    at: float


@dataclass(frozen=True, slots=True)
class Rating:
    """A visitor's rating of a whole conversation, asked once at its end (after a handoff, or
    a reply that ends it): one per conversation, the first kept."""

    conversation_id: str
    score: int  # 1 to 5
    remark: str
    at: float


@dataclass(frozen=True, slots=True)
class Handoff:
    """A conversation's human handoff: ``waiting`` for a person (the agent's
    ``ask_for_person``), or ``taken`` by ``person``, who answers instead of the agent. No
    row: the agent answers."""

    conversation_id: str
    state: str  # "waiting" | "taken"
    person: str
    since: float

    @property
    def taken(self) -> bool:
        return self.state == "taken"


@dataclass(frozen=True, slots=True)
class PersonConversation:
    """One line of a person's history (``Conversations.person_conversations``)."""

    id: str
    # The first user message's text, cut to ``TITLE_CHARS`` ('' before the first message).
    title: str
    created_at: float
    # When a run last started in it (``Conversations.touch_conversation``, which the engine
    # calls as each run starts); its creation until then.
    updated_at: float


@dataclass(frozen=True, slots=True)
class KnownPerson:
    """A signed-in person with an agent (``Conversations.known_people``): how many of their
    conversations are kept, and when one was last written in."""

    agent_id: str
    person: str
    conversations: int
    last_at: float


# How much of the first message a person's history carries as a conversation's title.
TITLE_CHARS = 200


@dataclass(frozen=True, slots=True)
class AgentVersion:
    """One saved version of an agent file. ``version`` counts from 1 per agent (store-assigned)."""

    agent_id: str
    version: int
    body: str
    author: str
    created_at: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One model step's tokens: the provider's count (``source="provider"``) or, where it
    gave none, the engine's estimate (``"estimate"``); ``cost`` by the run's agent's prices
    (None: the model has no price). ``at``: when the step began; ``day``: its
    UTC date, which the console's daily totals group by."""

    run_id: str
    conversation_id: str
    agent_id: str
    step: int
    model: str
    input_tokens: int
    output_tokens: int
    source: str
    cost: float | None
    at: float
    seconds: float = 0.0

    @property
    def day(self) -> str:
        return time.strftime("%Y-%m-%d", time.gmtime(self.at))


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Steps' usage added up under ``key`` (a day, a conversation or a run) for one agent.
    ``estimated``: how many of the steps were estimated; ``cost`` None if none was priced."""

    key: str
    agent_id: str
    input_tokens: int
    output_tokens: int
    cost: float | None
    steps: int
    estimated: int
    first_at: float
    last_at: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens
