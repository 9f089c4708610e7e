"""Turn an agent file's ``model`` object into a model adapter."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from hostcall.models.base import Model
from hostcall.models.scripted import ScriptedModel

KINDS = ("scripted", "openai")


def build_model(
    config: Mapping[str, Any], *, environ: Mapping[str, str], tools: Collection[str] | None = None
) -> Model:
    if not isinstance(config, Mapping):
        raise ValueError("must be a JSON object with a 'kind'")
    kind = config.get("kind")
    if kind == "scripted":
        return ScriptedModel.from_config(config, tools=tools)
    if kind == "openai":
        from hostcall.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel.from_config(config, environ=environ)
    raise ValueError(f"'kind' must be one of {', '.join(KINDS)} (got {kind!r})")


def model_problems(config: Any, *, tools: Collection[str], environ: Mapping[str, str]) -> list[str]:
    """Every problem of a ``model`` object (a ValueError may carry several, one per arg)."""
    try:
        build_model(config, environ=environ, tools=tools)
    except ValueError as exc:
        return [str(arg) for arg in exc.args] or ["is not valid"]
    return []
