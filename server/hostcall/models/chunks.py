"""What the chunks of a streamed Chat Completions reply carry, read leniently: tool calls
arrive in fragments, token usage comes in the shape each kind of server sends, and so does
the model's reasoning."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from .base import ModelEvent, ReasoningDelta, ReasoningEncrypted


@dataclass(slots=True)
class PendingCall:
    call_id: str = ""
    name: str = ""
    arguments: str = ""


def merge_fragment(fragment: dict[str, Any], calls: dict[int, PendingCall]) -> None:
    index = fragment.get("index")
    call_id = fragment.get("id")
    if not isinstance(index, int) or isinstance(index, bool):
        # Tolerate servers that omit "index": a new id opens a call, anything else
        # continues the latest one.
        known = any(call.call_id == call_id for call in calls.values())
        if (call_id and not known) or not calls:
            index = len(calls)
        else:
            index = max(calls)
    call = calls.setdefault(index, PendingCall())
    if isinstance(call_id, str) and call_id and not call.call_id:
        call.call_id = call_id
    function = fragment.get("function")
    if not isinstance(function, dict):
        return
    name = function.get("name")
    # The name arrives whole in the first fragment; some servers repeat it later.
    if isinstance(name, str) and name and not call.name:
        call.name = name
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call.arguments += arguments
    elif isinstance(arguments, dict):
        call.arguments += json.dumps(arguments)  # tolerate an object instead of a string


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event; comments (``: ping``) and other fields skipped."""
    buffer: list[str] = []
    async for line in lines:
        if not line:
            if buffer:
                yield "\n".join(buffer)
                buffer = []
        elif line.startswith("data:"):
            value = line[5:]
            buffer.append(value.removeprefix(" "))
    if buffer:
        yield "\n".join(buffer)


def read_usage(chunk: Mapping[str, Any]) -> tuple[int, int] | None:
    """The (input, output) tokens a chunk reports, or None if it reports none.

    - OpenAI and Azure (``stream_options.include_usage``), vLLM, Ollama's ``/v1``: a
      ``usage`` object with ``prompt_tokens`` and ``completion_tokens`` (``null`` in the other
      chunks); vLLM's continuous usage repeats it, growing, in every chunk: the caller keeps
      the last one, never a sum.
    - Servers that follow the Responses or Anthropic naming: ``input_tokens``/``output_tokens``.
    - Ollama's native shape, which some proxies pass through: ``prompt_eval_count`` and
      ``eval_count`` beside the choices; llama.cpp's ``timings`` (``prompt_n``,
      ``predicted_n``) when it sends no ``usage``.
    """
    usage = chunk.get("usage")
    if isinstance(usage, Mapping):
        found = _pair(
            usage, ("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")
        )
        if found is not None:
            return found
    found = _pair(chunk, ("prompt_eval_count",), ("eval_count",))
    if found is not None:
        return found
    timings = chunk.get("timings")
    if isinstance(timings, Mapping):
        return _pair(timings, ("prompt_n",), ("predicted_n",))
    return None


def _pair(
    fields: Mapping[str, Any], inputs: tuple[str, ...], outputs: tuple[str, ...]
) -> tuple[int, int] | None:
    read = _count(fields, inputs)
    written = _count(fields, outputs)
    return None if read is None or written is None else (read, written)


def _count(fields: Mapping[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = fields.get(name)
        # A bool is an int to Python, and a negative or fractional count is no count.
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def read_reasoning(delta: dict[str, Any]) -> list[ModelEvent]:
    """The reasoning a chunk's delta carries: ``reasoning_content`` (vLLM, DeepSeek) or
    ``reasoning`` (Ollama, newer vLLM) in plain text, or ``reasoning_details`` items
    (OpenRouter), whose ``reasoning.encrypted`` ones are opaque: only their presence is
    kept (``ReasoningEncrypted``)."""
    for key in ("reasoning_content", "reasoning"):
        text = delta.get(key)
        if isinstance(text, str) and text:
            return [ReasoningDelta(text)]
    found: list[ModelEvent] = []
    for item in delta.get("reasoning_details") or ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning.encrypted":
            found.append(ReasoningEncrypted())
        elif isinstance(text := item.get("text") or item.get("summary"), str) and text:
            found.append(ReasoningDelta(text))
    return found
