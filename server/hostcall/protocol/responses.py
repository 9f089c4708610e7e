"""Response bodies (docs/protocol.md), as typed objects; ``to_wire`` writes their JSON and
``schema`` derives the OpenAPI description (/openapi.json) from the same fields.

Every JSON body the API answers with is one of these (``ResponseBody``); the console's
JSON bodies are in ``protocol.console``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.wire import ALWAYS

# ---- errors ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    code: ErrorCode
    message: str
    details: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """Every error, from one place (``hostcall.responses``)."""

    error: ErrorDetail


# ---- calls -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallView:
    """The ``CALL`` shape: in the snapshot, and the value of the dispatch and approval events.

    ``outcome`` is null while the call is open. A token is present only in the states that
    need it (``resultToken`` for an answerable client-side call, ``decisionToken`` while
    awaiting confirmation).
    """

    tool_call_id: str
    tool_call_name: str
    kind: str
    run_id: str
    state: str
    input: Any = field(metadata=ALWAYS)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    deadline: str
    route: str
    delivered: bool
    outcome: dict[str, Any] | None = field(metadata=ALWAYS)
    approval: dict[str, Any] | None = None
    simulated: bool | None = None
    result_token: str | None = None
    decision_token: str | None = None
    # Surfaces: the surface the call is assigned to, null while the form answers
    # it (then ``form_reason`` says why); ``assignment`` counts its assignments to surfaces.
    surface_id: str | None = field(default=None, metadata=ALWAYS)
    assignment: int = 0
    title: str | None = None
    form_reason: str | None = None
    # A tool the page registered itself (hostcall/page_tools.py): the widget runs it with
    # the page's ``executeTool``, not a handler of Hostcall's.
    page_tool: bool | None = None
    # The tool's result view of its output (docs/agents.md "Views"), once answered.
    view: dict[str, Any] | None = None
    # Its MCP App view, once answered (hostcall/protocol/apps.py): a fresh view URL each time.
    app: dict[str, Any] | None = None
    # ``"app"``: a call an MCP App view made of its own server (never the model's), and
    # ``view_call`` the call whose view made it.
    origin: str | None = None
    view_call: str | None = None


@dataclass(frozen=True, slots=True)
class CallStatus:
    """The answer to a result or a decision: the call's state after it."""

    state: str


@dataclass(frozen=True, slots=True)
class DeliveryAck:
    state: Literal["delivered"]
    first: bool  # this request moved the call from dispatched to delivered


# ---- conversations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCard:
    """What the widget and the page may know of a tool."""

    name: str
    kind: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    require_confirmation: bool
    title: str
    effect: str
    rerunnable: bool


@dataclass(frozen=True, slots=True)
class AgentCard:
    id: str
    name: str
    greeting: str
    tools: tuple[ToolCard, ...]


@dataclass(frozen=True, slots=True)
class ConversationOpened:
    """Creating or resuming a conversation: its tokens and the agent."""

    conversation_id: str
    session_token: str
    stream_token: str
    agent: AgentCard
    # The verified ``sub`` of the person it belongs to; absent for an anonymous conversation.
    person: str | None = None
    # ``identify`` only: true when it made this browser's anonymous conversation theirs.
    adopted: bool | None = None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One conversation of a visitor's history."""

    conversation_id: str
    title: str  # its first message, cut ("" before the first)
    created_at: str  # ISO 8601, UTC
    updated_at: str  # when a run last started in it (its start until then)


@dataclass(frozen=True, slots=True)
class History:
    """A visitor's conversations with the agent, last written in first: the signed-in
    person's, else this browser's anonymous ones (``GET .../history``)."""

    conversations: tuple[HistoryEntry, ...]
    # Pass as ``before`` for the next page; absent on the last.
    next: str | None = None


@dataclass(frozen=True, slots=True)
class StreamToken:
    stream_token: str


@dataclass(frozen=True, slots=True)
class AdmittedPageTool:
    """A page tool the agent admitted, and the digest of its registration: a run that plans
    with it calls only a surface holding the same."""

    name: str
    digest: str


@dataclass(frozen=True, slots=True)
class RefusedPageTool:
    """A page tool the agent refused, and why (a ``PageToolRefusal``)."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class SurfaceTools:
    """The answer to ``capabilities``: the surface and the tools it handles; the page tools
    admitted (``{name, digest}``) and those refused (``{name, reason}``)."""

    surface_id: str
    tools: tuple[str, ...]
    page_tools: tuple[AdmittedPageTool, ...] = ()
    refused: tuple[RefusedPageTool, ...] = ()


@dataclass(frozen=True, slots=True)
class RunAccepted:
    run_id: str


@dataclass(frozen=True, slots=True)
class MessageHeld:
    """A visitor's message while a person holds the conversation: kept for them, no run."""

    message_id: str
    person: str


@dataclass(frozen=True, slots=True)
class FeedbackSaved:
    message_id: str
    rating: str
    comment: str


@dataclass(frozen=True, slots=True)
class RatingSaved:
    conversation_id: str
    score: int
    remark: str


@dataclass(frozen=True, slots=True)
class RunStopped:
    """A run the visitor stopped: it ended ``stopped``, its ``RUN_ERROR`` code ``cancelled``."""

    run_id: str
    status: Literal["stopped"]
    code: str


# ---- the snapshot ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageAttachment:
    """A file a visitor attached: in the upload's answer, the snapshot's messages and the
    user message's ``TEXT_MESSAGE_START``. ``type`` is what its content showed (never the
    name's or the browser's guess); ``url`` is ``GET`` of its bytes, a path under the API's
    base like every route (``/api/conversations/{id}/attachments/{attachmentId}``)."""

    id: str
    name: str
    type: str
    size: int
    url: str


@dataclass(frozen=True, slots=True)
class AttachmentSaved:
    """``POST /api/conversations/{conversationId}/attachments`` (201)."""

    attachment: MessageAttachment


@dataclass(frozen=True, slots=True)
class SurfaceView:
    surface_id: str
    tools: tuple[str, ...]
    present: bool


@dataclass(frozen=True, slots=True)
class SnapshotRun:
    run_id: str
    status: str
    error: dict[str, Any] | None = field(metadata=ALWAYS)  # {code, message} of a failed run


@dataclass(frozen=True, slots=True)
class SnapshotMessage:
    id: str
    role: str
    text: str
    run_id: str
    interrupted: bool | None = None  # true when a failure cut it off while it streamed
    tool_call_ids: tuple[str, ...] | None = None  # absent when it called no tool
    name: str | None = None  # an operator's message: who wrote it
    feedback: str | None = None  # the visitor's rating of this reply, "up" or "down"
    # The run of an edit or a regeneration that replaced it: an old branch, not drawn.
    superseded_by: str | None = None
    # What the model reasoned before this message (or its calls), as it was shown while it
    # streamed: absent when it did not reason or its agent hides reasoning.
    reasoning: str | None = None
    # A visitor's message: the files sent with it; absent when none.
    attachments: tuple[MessageAttachment, ...] | None = None


@dataclass(frozen=True, slots=True)
class SnapshotRating:
    """The visitor's rating of the whole conversation: given once, so a reloaded widget that
    sees it never asks again."""

    score: int
    remark: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a reloaded widget renders (``GET /api/conversations/{id}``)."""

    conversation_id: str
    agent_id: str
    last_event_id: str
    surfaces: tuple[SurfaceView, ...]
    run: SnapshotRun | None = field(metadata=ALWAYS)  # the latest run
    messages: tuple[SnapshotMessage, ...]
    calls: tuple[CallView, ...]
    # The person of the operator's team holding the conversation (human handoff), if any.
    person: str | None = None
    rating: SnapshotRating | None = field(default=None, metadata=ALWAYS)


# ---- the rest --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Health:
    ok: bool
    agents: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EmbedAllowed:
    ok: Literal[True]


@dataclass(frozen=True, slots=True)
class EmbedRefused:
    """Why a page cannot embed an agent (``GET /embed/check``), for the page's developer."""

    code: ErrorCode
    message: str


# ---- MCP App views ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppCallResult:
    """A view's ``tools/call``, answered: the MCP ``CallToolResult`` its server gave, with
    the tool's guardrails applied (``isError``: the server's tool failed)."""

    content: tuple[Any, ...] | list[Any] = field(metadata=ALWAYS)
    structured_content: Any = None
    is_error: bool | None = None


@dataclass(frozen=True, slots=True)
class AppContextSaved:
    """A view's ``ui/update-model-context``, kept: the page-context key it is under."""

    key: str


ResponseBody = (
    ErrorBody
    | AppCallResult
    | AppContextSaved
    | CallStatus
    | DeliveryAck
    | ConversationOpened
    | StreamToken
    | History
    | SurfaceTools
    | RunAccepted
    | MessageHeld
    | FeedbackSaved
    | RatingSaved
    | AttachmentSaved
    | RunStopped
    | Snapshot
    | Health
    | EmbedAllowed
    | EmbedRefused
)
