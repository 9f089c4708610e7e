"""Provider-safe function names for Hostcall tool names.

Hostcall tool names may hold spaces and non-ASCII letters ("créer tâche", "タスク作成");
OpenAI-style function names must match ``^[a-zA-Z0-9_-]{1,64}$``. A name that is already
safe is sent unchanged. Any other name is ASCII-folded, its remaining unsafe characters
replaced with ``_``, and a short hash of the *original* name appended, so two tools that
fold to the same text ("créer tâche", "creer tache!") still get distinct names, and the
same name always maps to the same function name.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

MAX_LENGTH = 64
_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE_RUN = re.compile(r"[^a-zA-Z0-9_-]+")
_HASH_LENGTHS = (8, 12, 16, 24, 32)


def is_provider_safe(name: str) -> bool:
    return _SAFE.fullmatch(name) is not None


def _fold(name: str) -> str:
    # NFKD splits "é" into "e" + a combining accent, which the ASCII encode then drops;
    # scripts with no ASCII form (Japanese) vanish and fall back to "tool".
    ascii_text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    base = _UNSAFE_RUN.sub("_", ascii_text).strip("_")
    return base or "tool"


def _suffixed(name: str, hash_length: int) -> str:
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:hash_length]
    base = _fold(name)[: MAX_LENGTH - hash_length - 1].rstrip("_") or "tool"
    return f"{base}_{digest}"


def safe_name(name: str) -> str:
    """The provider-safe name for ``name`` on its own, without regard to other tools."""
    return name if is_provider_safe(name) else _suffixed(name, _HASH_LENGTHS[0])


class ToolNameMap:
    """A two-way, collision-free map between tool names and provider function names."""

    def __init__(self, names: Iterable[str]) -> None:
        self._to_provider: dict[str, str] = {}
        self._from_provider: dict[str, str] = {}
        unique = sorted(set(names))
        # Safe names claim themselves first, so adding a tool with an awkward name never
        # renames a tool whose name the provider could already take as it is.
        for name in unique:
            if is_provider_safe(name):
                self._add(name, name)
        for name in unique:
            if not is_provider_safe(name):
                self._add(name, self._free_name(name))

    def _add(self, name: str, safe: str) -> None:
        self._to_provider[name] = safe
        self._from_provider[safe] = name

    def _free_name(self, name: str) -> str:
        for length in _HASH_LENGTHS:
            candidate = _suffixed(name, length)
            if candidate not in self._from_provider:
                return candidate
        # Only reachable if 32 hex digits of SHA-256 collide; a counter still keeps the
        # map collision-free and deterministic (names are processed in sorted order).
        counter = 2
        while (candidate := f"{_suffixed(name, 32)[: MAX_LENGTH - 4]}_{counter}") in (
            self._from_provider
        ):
            counter += 1
        return candidate

    def to_provider(self, name: str) -> str:
        """The function name to send for ``name``.

        A name outside the map (say, a tool the model made up earlier in the conversation)
        still gets a safe name, so replaying history never produces an invalid request.
        """
        known = self._to_provider.get(name)
        return known if known is not None else safe_name(name)

    def from_provider(self, safe: str) -> str | None:
        """The tool name behind a provider function name, or None if it names no tool."""
        return self._from_provider.get(safe)

    def __contains__(self, name: object) -> bool:
        return name in self._to_provider

    def __len__(self) -> int:
        return len(self._to_provider)
