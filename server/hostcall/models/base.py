"""The model interface the run engine drives.

A model receives the conversation so far and the tools it may call, and streams back text
deltas and tool-call requests. Tool-call arguments stay a raw string: parsing and validating
them is the engine's job, so a model that sends malformed JSON is answered with
``invalid_arguments`` instead of crashing the run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hostcall.protocol.codes import RunErrorCode

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call as the model asked for it (arguments not yet parsed)."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Attached:
    """A file sent with a user message, as a model is given it (hostcall/attachments/
    for_model.py): an image with its bytes, a file the agent gives as text with that text
    (cut to a cap), any other named only."""

    name: str
    type: str
    size: int
    data: bytes | None = None
    text: str | None = None
    cut: bool = False  # ``text`` is the file's start only


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the model's view of a conversation.

    ``user``: ``text``, the page's ``context`` it was sent with (data, never
    instructions: hostcall/page_context.py), and the files it carries (``attachments``).
    ``assistant``: ``text`` and/or ``tool_calls``.
    ``tool``: the answer to ``tool_call_id``, with ``text`` holding the JSON the model reads.
    """

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    context: Mapping[str, Any] | None = None
    attachments: tuple[Attached, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolDescriptor:
    """What a model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """Some of the model's reasoning, as the provider streams it in plain text (vLLM's,
    DeepSeek's and Ollama's ``reasoning_content`` or ``reasoning``)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningEncrypted:
    """The provider reasoned, and sent its reasoning only encrypted (an opaque blob for the
    provider itself to read back). Carries nothing: the blob is neither relayed nor
    stored, so no reasoning a provider chose to hide is ever kept."""


@dataclass(frozen=True, slots=True)
class StepEnd:
    """How the provider says a step ended: its ``finish_reason`` and, when it counted them,
    the tokens it read and wrote (what it bills), and which model and reply it was. An
    adapter yields it last, once; a model that yields none (the scripted one) leaves the
    engine to estimate the tokens."""

    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    # What the provider says of its reply, when it says it (the traces' ``gen_ai.response.*``):
    # the model that answered (an alias resolved to a version) and the reply's id.
    # Not compared: they name the reply, they do not say how the step ended.
    response_model: str | None = field(default=None, compare=False)
    response_id: str | None = field(default=None, compare=False)

    @property
    def counted(self) -> bool:
        return self.input_tokens is not None and self.output_tokens is not None


ModelEvent = TextDelta | ReasoningDelta | ReasoningEncrypted | ToolCallRequest | StepEnd


class ModelError(Exception):
    """The model could not produce a step (unreachable, bad reply, refused)."""

    def __init__(self, message: str, *, code: RunErrorCode = RunErrorCode.MODEL_BAD_REPLY) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Model(Protocol):
    def stream(
        self,
        messages: list[Message],
        tools: list[ToolDescriptor],
        *,
        instructions: str = "",
    ) -> AsyncIterator[ModelEvent]:
        """Stream one step: reasoning, text deltas, then zero or more tool-call requests."""
        ...
