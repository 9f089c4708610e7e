"""Turn an agent file's ``model`` object into a model adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any

from hostcall.models.base import Message, Model, ModelError, ModelEvent, ToolDescriptor
from hostcall.models.scripted import ScriptedModel
from hostcall.protocol.codes import RunErrorCode

KINDS = ("scripted", "openai")


def build_model(
    config: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    tools: Collection[str] | None = None,
    allowed_env: Collection[str] | None = None,
    allowed_hosts: Callable[[], Collection[str]] | None = None,
) -> Model:
    """``allowed_env``: the variables the model may read (``_platform.json``); ``allowed_hosts``:
    the agent environment's hosts, read live. None for either: no such limit (a model
    built on its own, not for an agent of an agents directory)."""
    if not isinstance(config, Mapping):
        raise ValueError("must be a JSON object with a 'kind'")
    kind = config.get("kind")
    if kind == "scripted":
        return ScriptedModel.from_config(config, tools=tools)
    if kind == "openai":
        from hostcall.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel.from_config(
            config, environ=environ, allowed_env=allowed_env, allowed_hosts=allowed_hosts
        )
    raise ValueError(f"'kind' must be one of {', '.join(KINDS)} (got {kind!r})")


def model_problems(
    config: Any,
    *,
    tools: Collection[str] | None,
    environ: Mapping[str, str],
    allowed_env: Collection[str] | None = None,
    allowed_hosts: Callable[[], Collection[str]] | None = None,
) -> list[str]:
    """Every problem of a ``model`` object (a ValueError may carry several, one per arg)."""
    try:
        build_model(
            config,
            environ=environ,
            tools=tools,
            allowed_env=allowed_env,
            allowed_hosts=allowed_hosts,
        )
    except ValueError as exc:
        return [str(arg) for arg in exc.args] or ["is not valid"]
    return []


class RefusedModel:
    """A run's model its platform no longer allows (a variable or host taken off a list since
    the run's definition was accepted): every step fails, before any connection."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def stream(
        self,
        messages: list[Message],
        tools: list[ToolDescriptor],
        *,
        instructions: str = "",
    ) -> AsyncIterator[ModelEvent]:
        raise ModelError(f"model refused: {self.reason}", code=RunErrorCode.MODEL_UNREACHABLE)
        yield  # an async generator, as the engine iterates it
