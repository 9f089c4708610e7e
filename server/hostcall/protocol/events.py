"""Stream events: one frozen class per event, one encoder.

Event names and field shapes are AG-UI's (https://docs.ag-ui.com/concepts/events), and every
event's JSON carries its ``type``, so it validates against the official ``@ag-ui/core``
schemas (tests/system/test_agui_conformance.py checks it). What AG-UI has no event for — a call
that waits on a person or on a surface — is an AG-UI ``CUSTOM`` event whose ``name`` is one of
``CustomName`` and whose ``value`` is documented in docs/protocol.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from hostcall.protocol.responses import CallView, MessageAttachment
from hostcall.protocol.wire import ALWAYS, dumps, to_wire


class EventType(StrEnum):
    RUN_STARTED = "RUN_STARTED"
    RUN_FINISHED = "RUN_FINISHED"
    RUN_ERROR = "RUN_ERROR"
    TEXT_MESSAGE_START = "TEXT_MESSAGE_START"
    TEXT_MESSAGE_CONTENT = "TEXT_MESSAGE_CONTENT"
    TEXT_MESSAGE_END = "TEXT_MESSAGE_END"
    TOOL_CALL_START = "TOOL_CALL_START"
    TOOL_CALL_ARGS = "TOOL_CALL_ARGS"
    TOOL_CALL_END = "TOOL_CALL_END"
    TOOL_CALL_RESULT = "TOOL_CALL_RESULT"
    REASONING_START = "REASONING_START"
    REASONING_MESSAGE_START = "REASONING_MESSAGE_START"
    REASONING_MESSAGE_CONTENT = "REASONING_MESSAGE_CONTENT"
    REASONING_MESSAGE_END = "REASONING_MESSAGE_END"
    REASONING_END = "REASONING_END"
    CUSTOM = "CUSTOM"


class CustomName(StrEnum):
    """The ``name`` of each of Hostcall's own events (sent as AG-UI ``CUSTOM``)."""

    TOOL_CALL_APPROVAL_REQUESTED = "hostcall.tool_call_approval_requested"
    TOOL_CALL_DISPATCH = "hostcall.tool_call_dispatch"
    TOOL_CALL_STATE = "hostcall.tool_call_state"
    TOOL_CALL_GUARDRAIL = "hostcall.tool_call_guardrail"
    TEXT_MESSAGE_DISCARDED = "hostcall.text_message_discarded"
    PERSON_REQUESTED = "hostcall.person_requested"
    PERSON_JOINED = "hostcall.person_joined"
    PERSON_MESSAGE = "hostcall.person_message"
    PERSON_LEFT = "hostcall.person_left"


# ---- AG-UI's own events ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interrupt:
    """AG-UI's ``Interrupt``: a call that waits for a person, and what to send back."""

    id: str
    reason: str  # "tool_call" (an approval) or "input_required" (the tool's output)
    message: str
    tool_call_id: str
    response_schema: dict[str, Any]
    expires_at: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """``RUN_FINISHED.outcome``: ``success``, or ``interrupt`` with what waits."""

    type: str
    interrupts: tuple[Interrupt, ...] | None = None
    # A success's: calls of an earlier AG-UI run that the client runs now (an approval let
    # them go), for the client to answer in its next run.
    pending_tool_call_ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class RunStarted:
    TYPE: ClassVar[EventType] = EventType.RUN_STARTED
    thread_id: str
    run_id: str
    simulated: bool | None = None  # ours: the run returns tools' simulation results
    # AG-UI's: the run this one branches from (an edit or a regeneration replaced it).
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class RunFinished:
    TYPE: ClassVar[EventType] = EventType.RUN_FINISHED
    thread_id: str
    run_id: str
    # The AG-UI endpoint's (hostcall/interrupts.py); the widget's stream leaves it out.
    outcome: RunOutcome | None = None


@dataclass(frozen=True, slots=True)
class RunError:
    TYPE: ClassVar[EventType] = EventType.RUN_ERROR
    message: str
    code: str
    run_id: str  # ours: AG-UI's RUN_ERROR has no run id
    details: dict[str, Any] | None = None  # ours: the AG-UI endpoint's refusal's details


@dataclass(frozen=True, slots=True)
class TextMessageStart:
    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_START
    message_id: str
    role: str
    # Ours: a visitor's message's files (AG-UI's TEXT_MESSAGE_START has no such field, and
    # its schemas let one through); absent when none.
    attachments: tuple[MessageAttachment, ...] | None = None


@dataclass(frozen=True, slots=True)
class TextMessageContent:
    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_CONTENT
    message_id: str
    delta: str  # never empty (AG-UI refuses an empty delta)


@dataclass(frozen=True, slots=True)
class TextMessageEnd:
    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_END
    message_id: str
    interrupted: bool | None = None  # ours: the run failed while this message streamed


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_START
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str


@dataclass(frozen=True, slots=True)
class ToolCallArgs:
    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_ARGS
    tool_call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_END
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_RESULT
    message_id: str
    tool_call_id: str
    content: str  # what the model reads
    state: str  # ours: the call's terminal state
    outcome: dict[str, Any] | None = field(metadata=ALWAYS)  # ours: what a person may see
    role: str = "tool"
    simulated: bool | None = None
    view: dict[str, Any] | None = None  # ours: the tool's result view (docs/agents.md)
    app: dict[str, Any] | None = None  # ours: its MCP App view (hostcall/protocol/apps.py)


# The model's reasoning before its answer, as the provider streamed it in plain text (a
# provider that encrypts it sends none: only its START and END). ``message_id`` names the
# reasoning, not the answer it leads to.


@dataclass(frozen=True, slots=True)
class ReasoningStart:
    TYPE: ClassVar[EventType] = EventType.REASONING_START
    message_id: str


@dataclass(frozen=True, slots=True)
class ReasoningMessageStart:
    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_START
    message_id: str
    role: str = "reasoning"


@dataclass(frozen=True, slots=True)
class ReasoningMessageContent:
    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_CONTENT
    message_id: str
    delta: str  # never empty


@dataclass(frozen=True, slots=True)
class ReasoningMessageEnd:
    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_END
    message_id: str


@dataclass(frozen=True, slots=True)
class ReasoningEnd:
    TYPE: ClassVar[EventType] = EventType.REASONING_END
    message_id: str


# ---- Hostcall's own events (AG-UI CUSTOM) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A person must approve, edit or reject the call; ``value`` is the CALL, with its
    ``decisionToken``."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.TOOL_CALL_APPROVAL_REQUESTED
    call: CallView

    def value(self) -> dict[str, Any]:
        return to_wire(self.call)


@dataclass(frozen=True, slots=True)
class CallDispatched:
    """The call goes to a surface now; ``value`` is the CALL, with its ``resultToken``."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.TOOL_CALL_DISPATCH
    call: CallView

    def value(self) -> dict[str, Any]:
        return to_wire(self.call)


@dataclass(frozen=True, slots=True)
class CallStateChanged:
    """An open call moved without settling. No longer emitted (a delivery is a
    surface's claim, recorded silently); kept so logs written before it still decode."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.TOOL_CALL_STATE
    tool_call_id: str
    state: str

    def value(self) -> dict[str, Any]:
        return to_wire(self)


@dataclass(frozen=True, slots=True)
class GuardrailMatched:
    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.TOOL_CALL_GUARDRAIL
    tool_call_id: str
    rule: str
    action: str
    on: str

    def value(self) -> dict[str, Any]:
        return to_wire(self)


@dataclass(frozen=True, slots=True)
class MessageDiscarded:
    """A message cut off by a crash mid-answer: surfaces remove it; the step that runs again
    streams the answer anew. Its ``TEXT_MESSAGE_END`` comes just before."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.TEXT_MESSAGE_DISCARDED
    message_id: str

    def value(self) -> dict[str, Any]:
        return to_wire(self)


# ---- a person of the operator's team (human handoff, docs/console.md) ---------------------


@dataclass(frozen=True, slots=True)
class PersonRequested:
    """The agent's built-in ``ask_for_person`` queued the conversation for a person."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.PERSON_REQUESTED

    def value(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True)
class PersonJoined:
    """An operator took the conversation over: the agent answers no more until they leave."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.PERSON_JOINED
    name: str

    def value(self) -> dict[str, Any]:
        return to_wire(self)


@dataclass(frozen=True, slots=True)
class PersonMessage:
    """What the operator holding the conversation wrote, whole (a person's message is not
    streamed). A ``CUSTOM`` event: AG-UI's ``TEXT_MESSAGE_START`` has no author's name."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.PERSON_MESSAGE
    message_id: str
    name: str
    text: str

    def value(self) -> dict[str, Any]:
        return to_wire(self)


@dataclass(frozen=True, slots=True)
class PersonLeft:
    """The operator handed the conversation back to the agent."""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    NAME: ClassVar[CustomName] = CustomName.PERSON_LEFT
    name: str

    def value(self) -> dict[str, Any]:
        return to_wire(self)


StandardEvent = (
    RunStarted
    | RunFinished
    | RunError
    | TextMessageStart
    | TextMessageContent
    | TextMessageEnd
    | ToolCallStart
    | ToolCallArgs
    | ToolCallEnd
    | ToolCallResult
    | ReasoningStart
    | ReasoningMessageStart
    | ReasoningMessageContent
    | ReasoningMessageEnd
    | ReasoningEnd
)
CustomEvent = (
    ApprovalRequested
    | CallDispatched
    | CallStateChanged
    | GuardrailMatched
    | MessageDiscarded
    | PersonRequested
    | PersonJoined
    | PersonMessage
    | PersonLeft
)
ProtocolEvent = StandardEvent | CustomEvent


def encode(event: ProtocolEvent) -> tuple[str, str]:
    """The event's SSE ``event:`` name and its JSON.

    The name is the ``type``, or a custom event's ``name``, so an ``EventSource`` listener
    can follow one kind of event; AG-UI clients read only the JSON.
    """
    if isinstance(event, CustomEvent):
        name = event.NAME.value
        return name, dumps({"type": "CUSTOM", "name": name, "value": event.value()})
    return event.TYPE.value, dumps({"type": event.TYPE.value, **to_wire(event)})
