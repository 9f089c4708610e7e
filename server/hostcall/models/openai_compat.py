"""A model adapter for OpenAI-compatible Chat Completions APIs (OpenAI, Azure, Ollama, vLLM,
llama.cpp, LM Studio…), streaming text and tool calls.

Errors all surface as ``ModelError`` naming the base URL, with one code per cause::

    ModelError
      code="model_unreachable"   connection refused, DNS failure, connection dropped, or
                                 the base URL's host not (or no longer) in the agent
                                 environment's allowed_hosts (refused before connecting)
      code="model_timeout"       no byte within ``timeout`` seconds
      code="model_http_error"    HTTP status >= 400 (status and a body excerpt quoted)
      code="model_bad_reply"     a data line that is not a JSON object, an error event,
                                 a reply with no data event at all, or one that stops
                                 with neither ``[DONE]`` nor a ``finish_reason`` (truncated)

The API key is sent only in the ``Authorization`` header and never appears in a message.

Each step asks for the provider's token count (``stream_options.include_usage``) and ends
with a ``StepEnd`` carrying it, in whichever shape the server sends it (``chunks.read_usage``);
``"stream_usage": false`` in the config stops asking, for a server that refuses the option.
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from hostcall import envvars, strictjson
from hostcall.attachments.for_model import as_text
from hostcall.blocks.http_request import host_port
from hostcall.page_context import model_block
from hostcall.protocol.codes import RunErrorCode

from .base import (
    Message,
    ModelError,
    ModelEvent,
    StepEnd,
    TextDelta,
    ToolCallRequest,
    ToolDescriptor,
)
from .chunks import PendingCall, merge_fragment, read_reasoning, read_usage, sse_data
from .names import ToolNameMap

CONFIG_KEYS = frozenset(
    {
        "kind",
        "base_url",
        "model",
        "api_key_env",
        "api_key_header",
        "query",
        "timeout",
        "temperature",
        "stream_usage",
    }
)
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
_EXCERPT_CHARS = 200
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class OpenAICompatModel:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60,
        temperature: float | None = None,
        api_key_header: str = "Authorization",
        query: Mapping[str, str] | None = None,
        allowed_hosts: Callable[[], Collection[str]] | None = None,
        stream_usage: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.temperature = temperature
        # Azure takes the key as the whole value of an `api-key` header (docs/models.md).
        self.api_key_header = api_key_header
        self.query = dict(query or {})
        self.stream_usage = stream_usage
        self._api_key = api_key
        # Read on every step (the platform is live): None for a model built directly, with
        # no agent environment to answer to.
        self._allowed_hosts = allowed_hosts
        self.target = host_port(self.base_url)

    def __repr__(self) -> str:
        return f"OpenAICompatModel(base_url={self.base_url!r}, model={self.model!r})"

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        environ: Mapping[str, str],
        allowed_env: Collection[str] | None = None,
        allowed_hosts: Callable[[], Collection[str]] | None = None,
    ) -> OpenAICompatModel:
        """Build from ``{"kind": "openai", "base_url", "model", "api_key_env"?, "timeout"?,
        "temperature"?}``; the key itself is read from ``environ``, never from the config,
        and only if ``api_key_env`` is in ``allowed_env`` (never a ``HOSTCALL_*`` variable).
        With ``allowed_hosts`` (the agent environment's), the base URL's ``host:port`` must
        be in it, now and before every request."""
        if "api_key" in config:
            # Agent files get copied and committed; a key belongs in the environment.
            raise ValueError(
                "'api_key' is not accepted in the config of an openai model: put the key in an "
                "environment variable and name it with 'api_key_env'"
            )
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ValueError(f"unknown key {min(unknown)!r} for an openai model")
        kind = config.get("kind", "openai")
        if kind != "openai":
            raise ValueError(f"'kind' must be 'openai' for an openai model (got {kind!r})")
        base_url = config.get("base_url")
        if not isinstance(base_url, str) or not base_url:
            raise ValueError(
                "'base_url' is required for an openai model (e.g. 'http://127.0.0.1:11434/v1')"
            )
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"'base_url' must be an http(s) URL (got {base_url!r})")
        try:
            target = host_port(base_url)
        except ValueError:
            raise ValueError(f"'base_url' must be an http(s) URL (got {base_url!r})") from None
        if allowed_hosts is not None and target not in allowed_hosts():
            raise ValueError(
                f"'base_url' goes to {target}, which is not in the 'allowed_hosts' of the "
                "agent's environment (_platform.json)"
            )
        model = config.get("model")
        if not isinstance(model, str) or not model:
            raise ValueError("'model' (the provider's model name) is required for an openai model")
        timeout = config.get("timeout", 60)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"'timeout' must be a positive number of seconds (got {timeout!r})")
        temperature = config.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, int | float)
        ):
            raise ValueError(f"'temperature' must be a number (got {temperature!r})")
        header = config.get("api_key_header", "Authorization")
        if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
            raise ValueError(f"'api_key_header' must be a header name (got {header!r})")
        query = config.get("query", {})
        if not isinstance(query, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in query.items()
        ):
            raise ValueError(f"'query' must map parameter names to strings (got {query!r})")
        stream_usage = config.get("stream_usage", True)
        if not isinstance(stream_usage, bool):
            raise ValueError(f"'stream_usage' must be true or false (got {stream_usage!r})")
        api_key: str | None = None
        key_env = config.get("api_key_env")
        if key_env is not None:
            if not isinstance(key_env, str) or not key_env:
                raise ValueError(f"'api_key_env' must be a variable name (got {key_env!r})")
            why = envvars.refusal(key_env, allowed_env)
            if why is not None:
                raise ValueError(f"'api_key_env': {why}")
            # A named but unset variable is a misconfiguration; failing at load time beats a
            # 401 on the first user message.
            api_key = environ.get(key_env) or None
            if api_key is None:
                raise ValueError(
                    f"environment variable {key_env!r} (named by 'api_key_env') is not set"
                )
        return cls(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout=float(timeout),
            temperature=None if temperature is None else float(temperature),
            api_key_header=header,
            query=query,
            allowed_hosts=allowed_hosts,
            stream_usage=stream_usage,
        )

    async def stream(
        self,
        messages: list[Message],
        tools: list[ToolDescriptor],
        *,
        instructions: str = "",
    ) -> AsyncIterator[ModelEvent]:
        if self._allowed_hosts is not None and self.target not in self._allowed_hosts():
            # Before any connection: the environment may have been narrowed since the run's
            # definition was accepted.
            raise self._error(
                f"is not in the allowed_hosts of the agent's environment ({self.target}): "
                "not contacted",
                code=RunErrorCode.MODEL_UNREACHABLE,
            )
        names = ToolNameMap(tool.name for tool in tools)
        body = self._request_body(messages, tools, instructions=instructions, names=names)
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            bearer = self.api_key_header.lower() == "authorization"
            headers[self.api_key_header] = f"Bearer {self._api_key}" if bearer else self._api_key
        calls: dict[int, PendingCall] = {}
        end = _Ending()
        # A client per step: steps are seconds apart, and a client bound to no long-lived
        # state cannot leak connections or outlive the event loop that made it.
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            try:
                async with client.stream(
                    "POST",
                    f"{self.base_url}/chat/completions",
                    json=body,
                    headers=headers,
                    params=self.query or None,
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise self._error(
                            f"answered HTTP {response.status_code}: "
                            f"{_excerpt(response.text) or response.reason_phrase}",
                            code=RunErrorCode.MODEL_HTTP_ERROR,
                        )
                    events_seen = 0
                    finished = False
                    async for data in sse_data(response.aiter_lines()):
                        events_seen += 1
                        if data == "[DONE]":
                            finished = True
                            break
                        events = self._read_chunk(data, calls, end)
                        finished = finished or end.reason is not None
                        for event in events:
                            yield event
                    if not events_seen:
                        raise self._error(
                            "ended its reply without a single data event",
                            code=RunErrorCode.MODEL_BAD_REPLY,
                        )
                    if not finished:
                        # A dropped connection can look like a clean end of the body: only
                        # [DONE] or a finish_reason says the model meant to stop.
                        raise self._error(
                            "stopped mid-reply (neither [DONE] nor a finish_reason): the "
                            "reply is truncated",
                            code=RunErrorCode.MODEL_BAD_REPLY,
                        )
            except httpx.TimeoutException as exc:
                raise self._error(
                    f"did not answer within {self.timeout:g}s ({type(exc).__name__})",
                    code=RunErrorCode.MODEL_TIMEOUT,
                ) from exc
            except httpx.HTTPError as exc:
                raise self._error(
                    f"connection failed ({type(exc).__name__}: {exc})",
                    code=RunErrorCode.MODEL_UNREACHABLE,
                ) from exc
        for index in sorted(calls):
            call = calls[index]
            yield ToolCallRequest(
                call_id=call.call_id or f"call_{index}_{secrets.token_hex(6)}",
                # An unmapped name goes through unchanged so the engine answers unknown_tool.
                name=names.from_provider(call.name) or call.name,
                arguments=call.arguments,
            )
        read, wrote = end.usage or (None, None)
        yield StepEnd(end.reason, read, wrote, response_model=end.model, response_id=end.reply_id)

    def _request_body(
        self,
        messages: list[Message],
        tools: list[ToolDescriptor],
        *,
        instructions: str,
        names: ToolNameMap,
    ) -> dict[str, Any]:
        chat: list[dict[str, Any]] = []
        if instructions:
            chat.append({"role": "system", "content": instructions})
        # The page's context of the visitor's latest message only, just before it: what the
        # page shows now, not a copy per turn.
        latest = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        for index, message in enumerate(messages):
            if index == latest and message.context:
                chat.append({"role": "system", "content": model_block(message.context)})
            chat.append(_chat_message(message, names))
        body: dict[str, Any] = {"model": self.model, "stream": True, "messages": chat}
        if self.stream_usage:
            # The count the provider bills, in a last chunk (with no choices); without it
            # the engine can only estimate.
            body["stream_options"] = {"include_usage": True}
        if tools:
            # OpenAI rejects an empty "tools" array ("[] is too short"), so leave it out.
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": names.to_provider(tool.name),
                        "description": tool.description,
                        "parameters": tool.input_schema or _EMPTY_SCHEMA,
                    },
                }
                for tool in tools
            ]
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def _read_chunk(
        self, data: str, calls: dict[int, PendingCall], end: _Ending
    ) -> list[ModelEvent]:
        """The chunk's events; its finish_reason and token usage, if any, go in ``end``."""
        try:
            chunk = strictjson.loads(data)
        except strictjson.StrictJSONError as exc:
            raise self._error(
                f"sent a data line that is not JSON ({exc.message}): {_excerpt(data)!r}",
                code=RunErrorCode.MODEL_BAD_REPLY,
            ) from None
        if not isinstance(chunk, dict):
            raise self._error(
                f"sent a data line that is not a JSON object: {_excerpt(data)!r}",
                code=RunErrorCode.MODEL_BAD_REPLY,
            )
        if "error" in chunk:
            # A failure after the 200 status line can only arrive as an error event.
            error = chunk["error"]
            detail = error.get("message", error) if isinstance(error, dict) else error
            raise self._error(
                f"reported an error: {_excerpt(str(detail))}", code=RunErrorCode.MODEL_BAD_REPLY
            )
        usage = read_usage(chunk)
        if usage is not None:
            end.usage = usage  # the last one counts: some servers repeat a growing total
        reply_id, model = chunk.get("id"), chunk.get("model")
        if isinstance(reply_id, str) and reply_id:
            end.reply_id = reply_id
        if isinstance(model, str) and model:
            end.model = model
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return []  # usage-only and keep-alive chunks carry no choices
        reason = choices[0].get("finish_reason")
        if isinstance(reason, str):
            end.reason = reason
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            return []
        events: list[ModelEvent] = read_reasoning(delta)
        content = delta.get("content")
        if isinstance(content, str) and content:
            events.append(TextDelta(content))
        for fragment in delta.get("tool_calls") or ():
            if isinstance(fragment, dict):
                merge_fragment(fragment, calls)
        return events

    def _error(self, what: str, *, code: RunErrorCode) -> ModelError:
        message = f"model at {self.base_url} {what}"
        if self._api_key:
            # Some providers echo the rejected key back in their error body.
            message = message.replace(self._api_key, "***")
        return ModelError(message, code=code)


@dataclass(slots=True)
class _Ending:
    reason: str | None = None
    usage: tuple[int, int] | None = None
    model: str | None = None  # the ``model`` the chunks name, the ``id`` they share
    reply_id: str | None = None


def _chat_message(message: Message, names: ToolNameMap) -> dict[str, Any]:
    if message.role == "user":
        if not message.attachments:
            return {"role": "user", "content": message.text}
        return {"role": "user", "content": _user_parts(message)}
    if message.role == "tool":
        assert message.tool_call_id is not None, "a tool message answers a call id"
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    chat: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        chat["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": names.to_provider(call.name), "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    elif not message.text:
        chat["content"] = ""
    return chat


def _user_parts(message: Message) -> list[dict[str, Any]]:
    """A message with files as content parts: its text, then each image as an ``image_url``
    part (a data URL: the provider never fetches anything of ours), each other file as text
    (hostcall/attachments/for_model.py)."""
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "text": message.text})
    for file in message.attachments:
        if file.data is not None:
            url = f"data:{file.type};base64,{base64.b64encode(file.data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": as_text(file)})
    return parts


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "…"
