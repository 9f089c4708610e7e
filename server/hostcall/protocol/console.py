"""The console's JSON bodies (docs/console.md), typed as the API's are (``responses``).

The console is not the visitor's API, but its JSON routes answer scripts and the console's
own pages, so their shapes are described in /openapi.json too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hostcall.protocol.responses import CallStatus, CallView
from hostcall.protocol.wire import ALWAYS


@dataclass(frozen=True, slots=True)
class ConversationItem:
    id: str
    agent_id: str
    created_at: float
    run_status: str | None = field(metadata=ALWAYS)  # None before its first message
    waiting: int  # calls waiting for a person
    first_message: str
    person: str | None = field(metadata=ALWAYS)  # the signed-in person's id; null: anonymous
    handoff: str | None = field(metadata=ALWAYS)  # "waiting" for a person, or "taken"
    held_by: str  # who of the team holds it ("" if nobody)
    feedback_up: int  # replies the visitor rated up
    feedback_down: int


@dataclass(frozen=True, slots=True)
class ConversationList:
    """``GET /console/api/conversations``: one page, newest first."""

    items: tuple[ConversationItem, ...]
    page: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class ConsoleCall:
    """A call as the console shows it: the fields of ``CallView`` that may be shown, never
    its tokens (a list of what to show, not of what to hide), and who answered it."""

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
    approval: dict[str, Any] | None
    simulated: bool | None
    surface_id: str | None = field(metadata=ALWAYS)
    form_reason: str | None
    title: str | None
    answered_by: dict[str, str] | None = field(metadata=ALWAYS)  # {actor, action}
    view: dict[str, Any] | None = None  # the tool's result view (docs/agents.md "Views")
    # A tool the page registered itself (hostcall/page_tools.py): the digest of the
    # registration its run planned with, which the surface that ran it held. Null: a tool
    # of the agent file's.
    page_digest: str | None = field(default=None, metadata=ALWAYS)

    @classmethod
    def of(
        cls, view: CallView, answered_by: dict[str, str] | None, *, page_digest: str = ""
    ) -> ConsoleCall:
        return cls(
            tool_call_id=view.tool_call_id,
            tool_call_name=view.tool_call_name,
            kind=view.kind,
            run_id=view.run_id,
            state=view.state,
            input=view.input,
            input_schema=view.input_schema,
            output_schema=view.output_schema,
            deadline=view.deadline,
            # A block ran on the server: it never went to a page or a form, whatever the
            # stored route's default says.
            route=view.route if view.kind == "client" else "server",
            delivered=view.delivered,
            outcome=view.outcome,
            approval=view.approval,
            simulated=view.simulated,
            surface_id=view.surface_id,
            form_reason=view.form_reason,
            title=view.title,
            answered_by=answered_by,
            view=view.view,
            page_digest=page_digest or None,
        )


@dataclass(frozen=True, slots=True)
class ConsoleFeedback:
    rating: str  # "up" | "down"
    comment: str
    at: float


@dataclass(frozen=True, slots=True)
class ConsoleRating:
    """The visitor's rating of the whole conversation, asked at its end."""

    score: int  # 1 to 5
    remark: str
    at: float


@dataclass(frozen=True, slots=True)
class ConsoleHandoff:
    state: str  # "waiting" (the agent asked for a person) | "taken"
    person: str  # who holds it ("" while it waits)
    since: float


@dataclass(frozen=True, slots=True)
class ConsoleAttachment:
    """A file a visitor's message sent: named, never drawn (its bytes are the visitor's)."""

    id: str
    name: str
    type: str
    size: int


@dataclass(frozen=True, slots=True)
class ConsoleMessage:
    id: str
    role: str
    text: str
    run_id: str
    tool_calls: tuple[str, ...]  # the names of the tools it called
    tool_call_id: str | None = field(metadata=ALWAYS)  # a tool message's call
    author: str | None = field(metadata=ALWAYS)  # role "operator": the person who wrote it
    feedback: ConsoleFeedback | None = field(metadata=ALWAYS)  # the visitor's, on a reply
    # Role ``user``: the page's context it was sent with (hostcall/page_context.py).
    context: dict[str, Any] | None = None
    # An old branch's: the run of the visitor's edit or regeneration that replaced it.
    superseded_by: str | None = None
    # Role ``user``: the files it sent; absent when none.
    attachments: tuple[ConsoleAttachment, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConsoleRun:
    id: str
    status: str
    step: int
    error: dict[str, Any] | None = field(metadata=ALWAYS)
    simulated: bool


@dataclass(frozen=True, slots=True)
class ConsoleEvent:
    seq: int
    type: str  # the SSE event name: the type, or a custom event's name
    data: dict[str, Any]  # the event's JSON, without its tokens


@dataclass(frozen=True, slots=True)
class AuditItem:
    at: float
    actor: str
    action: str
    call_id: str | None = field(metadata=ALWAYS)


@dataclass(frozen=True, slots=True)
class ConversationDetail:
    """``GET /console/api/conversations/{id}``."""

    id: str
    agent_id: str
    created_at: float
    locale: str
    handled_tools: tuple[str, ...]
    last_seq: int
    messages: tuple[ConsoleMessage, ...]
    runs: tuple[ConsoleRun, ...]
    calls: tuple[ConsoleCall, ...]
    events: tuple[ConsoleEvent, ...]  # the latest, oldest first
    audit: tuple[AuditItem, ...]  # the latest console actions on it, newest first
    handoff: ConsoleHandoff | None = field(metadata=ALWAYS)
    rating: ConsoleRating | None = field(default=None, metadata=ALWAYS)


@dataclass(frozen=True, slots=True)
class HandoffChanged:
    """A takeover or a hand-back: the conversation's handoff now (None: the agent's)."""

    handoff: ConsoleHandoff | None = field(metadata=ALWAYS)


@dataclass(frozen=True, slots=True)
class PersonMessageSent:
    message_id: str


@dataclass(frozen=True, slots=True)
class RunCancelled:
    status: Literal["failed"]


@dataclass(frozen=True, slots=True)
class AgentProblems:
    """The designer's live check: what ``hostcall check`` would print (none: it is valid)."""

    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AgentSaved:
    version: int


@dataclass(frozen=True, slots=True)
class McpToolItem:
    name: str
    title: str
    description: str
    # The tool's default effect is read: its server's readOnlyHint without destructiveHint,
    # in an environment that is not protected (blocks/mcp/binding.py).
    read_only: bool


@dataclass(frozen=True, slots=True)
class McpServerTools:
    """The designer's view of an MCP server: its tools as it lists them now, or why not
    (the environment does not allow it: then nothing was asked of it; or it is unreachable)."""

    server: str
    environment: str
    tools: tuple[McpToolItem, ...]
    problem: str | None = field(metadata=ALWAYS)


ConsoleBody = (
    ConversationList
    | ConversationDetail
    | CallStatus
    | RunCancelled
    | AgentProblems
    | AgentSaved
    | McpServerTools
    | HandoffChanged
    | PersonMessageSent
)
