"""What the store keeps: plain frozen records, shared by every store implementation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hostcall.calls.transitions import OPEN_STATES, CallState
from hostcall.visitors.visitor import Visitor

__all__ = [
    "ANONYMOUS_SURFACE",
    "OPEN_STATES",
    "AgentVersion",
    "Attachment",
    "AttachmentRef",
    "AuditEntry",
    "Call",
    "CallState",
    "ClaimedRun",
    "ConsoleSession",
    "Conversation",
    "ConversationQuery",
    "ConversationSummary",
    "Feedback",
    "Handoff",
    "OpenedStream",
    "PersonConversation",
    "Rating",
    "Run",
    "RunStart",
    "RunStatus",
    "StoredMessage",
    "Surface",
    "User",
]


class RunStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    FINISHED = "finished"
    FAILED = "failed"
    # The visitor's Stop (``cancelled``): ended on purpose, not a failure; it may be retried
    # as a failed run may.
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    agent_id: str
    created_at: float
    locale: str = ""
    handled_tools: tuple[str, ...] = ()
    # Bumped each time a widget resumes the conversation from its cookie; session tokens
    # of an older generation are refused (session fixation).
    session_generation: int = 0
    # The person it belongs to: the verified ``sub`` of the identity token (docs/identity.md)
    # the widget presented for this agent; None for an anonymous conversation. Set when the
    # conversation is created by an identified visitor, or when an identified visitor adopts
    # the anonymous conversation they were in (``Conversations.set_person``); never changed
    # from one person to another.
    person: str | None = None
    # The browser it was started in: the random id its HttpOnly resume cookie carries, never
    # derived from the page's resume key (hostcall/visitors/sessions.py); None without a key. An
    # anonymous visitor's history is the anonymous conversations of their browser
    # (``Conversations.browser_conversations``). Rows from before browsers had ids hold a
    # digest of the key, which no browser's id equals: they are in no history.
    browser: str | None = None


@dataclass(frozen=True, slots=True)
class OpenedStream:
    """What ``Store.open_stream`` found: the conversation (None: there is none), whether the
    ticket was redeemed, and the conversation's last seq as the same read saw it (0 with no
    conversation): a stream that subscribed before it needs no backlog read when nothing
    is past its position."""

    conversation: Conversation | None
    redeemed: bool
    last_seq: int = 0


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """A file a visitor's message carries, as the message keeps it (its bytes and digest are
    the ``attachments`` table's: ``Attachment``)."""

    id: str
    name: str
    type: str  # as its content showed it (hostcall/attachments/sniff.py)
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "type": self.type, "size": self.size}


@dataclass(frozen=True, slots=True)
class Attachment:
    """An uploaded file, kept apart from the message rows; ``message_id`` is None until a
    message is sent with it (an unsent one is purged after an hour: hostcall/retention.py)."""

    id: str
    conversation_id: str
    name: str
    type: str
    size: int
    sha256: str
    created_at: float
    message_id: str | None = None

    def ref(self) -> AttachmentRef:
        return AttachmentRef(self.id, self.name, self.type, self.size)


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
    # An assistant message cut off by a failed run: kept, since the person saw it.
    interrupted: bool = False
    # Role ``operator``: the name of the person of the team who wrote it (human handoff).
    author: str | None = None
    # Role ``user``: the page's context the message was sent with (hostcall/page_context.py),
    # as its agent admitted it; None when the page sent none. The model reads it with the
    # message, so a recovered or retried run reads what the first one did.
    context: dict[str, Any] | None = None
    # The run of an edit or a regeneration that replaced it (a branch); None: current.
    superseded_by: str | None = None
    # Role ``user``: the files sent with it, in the order the visitor gave them.
    attachments: tuple[AttachmentRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    conversation_id: str
    agent: dict[str, Any]
    status: RunStatus
    step: int = 0
    error: dict[str, Any] | None = None
    simulate: bool = False
    # Names ``agent`` in the store (hostcall/store/definitions.py); "" for a run not stored
    # yet, whose store computes it. Derived from ``agent``, so not compared.
    agent_digest: str = field(default="", compare=False)
    # Who the run acts for: the signed-in visitor who started it (hostcall/visitors/visitor.py; the
    # ``identity`` column holds its ``to_json``), frozen with it; None for an anonymous
    # visitor. Its tools' ``$user`` parameters and guardrails read it; nothing the model says
    # changes it.
    visitor: Visitor | None = None


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """A run as ``Store.claim_ready_run`` left it, and its conversation's messages as they
    were then, oldest first: its next step's history. Nothing adds a message to the
    conversation while its run is running but the run's own step (read in the
    claim's statement on PostgreSQL, the step's own read of them is gone)."""

    run: Run
    history: tuple[StoredMessage, ...]


@dataclass(frozen=True, slots=True)
class Branch:
    """An edit of the visitor's last message or a regeneration of the last answer: the new
    run supersedes the messages from ``first_message_id`` on, and names ``parent_run_id``,
    the run of that message, as AG-UI's ``parentRunId``."""

    parent_run_id: str
    first_message_id: str


@dataclass(frozen=True, slots=True)
class RunStart:
    """What ``Store.create_run_alone`` found: the person of the team holding the
    conversation (``held``), or the run in progress, as (id, status), if any (then nothing
    was stored); else the conversation's messages, oldest first, the new run's first message
    (added before, in the same transaction) the last: its first step's history (read in the
    same statement on PostgreSQL)."""

    busy: tuple[str, RunStatus] | None
    history: tuple[StoredMessage, ...] = ()
    held: str | None = None


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
    # The page tools it registered and its agent admitted (hostcall/page_tools.py), each
    # ``{name, description, inputSchema, annotations, digest}``.
    page_tools: tuple[dict[str, Any], ...] = ()

    def holds(self, name: str, digest: str) -> bool:
        """Whether it holds the page tool ``name`` registered as ``digest``."""
        return any(t["name"] == name and t["digest"] == digest for t in self.page_tools)

    def present(self, now: float, grace: float) -> bool:
        if self.id == ANONYMOUS_SURFACE:
            return True
        if self.left:
            return False
        return self.streams > 0 or (self.detached_at is not None and now - self.detached_at < grace)


# ---- the operator console -------------------------------------------------------


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
class CallApp:
    """A call's MCP App view (hostcall/apps/): the resource its server gave after the call,
    kept with the call so that the view comes back after a reload, and what the view last
    told the model (``context``, its ``ui/update-model-context``). ``failed`` (then no
    ``html``): why it could not be read (protocol/apps.py's ``AppFailure``)."""

    call_id: str
    conversation_id: str
    server: str
    resource_uri: str
    html: str | None = None
    # The resource's ``_meta.ui``: its declared ``csp`` domains and ``prefersBorder``.
    meta: dict[str, Any] = field(default_factory=dict)
    failed: str | None = None
    context: dict[str, Any] | None = None
    created_at: float = 0.0


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
