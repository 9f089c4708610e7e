"""What the store keeps: plain frozen records, shared by every store implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hostcall.calls.transitions import OPEN_STATES, CallState
from hostcall.visitors.visitor import Visitor

__all__ = [
    "ANONYMOUS_SURFACE",
    "OPEN_STATES",
    "Attachment",
    "AttachmentRef",
    "Call",
    "CallState",
    "ClaimedRun",
    "Conversation",
    "OpenedStream",
    "Run",
    "RunStart",
    "RunStatus",
    "StoredMessage",
    "Surface",
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
