"""A tool the page registered (WebMCP's ``registerTool``, as ``getTools()`` lists it), as the
wire carries it; hostcall/page_tools.py admits it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PageTool:
    """One tool as the page registered it (title aside: it is not the model's)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only_hint: bool = False
    untrusted_content_hint: bool = False
    title: str = ""

    @property
    def digest(self) -> str:
        """Hex sha256 of the registration's compact, sorted-keys JSON (docs/protocol.md)."""
        canonical = json.dumps(self.signed(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def signed(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {
                "readOnlyHint": self.read_only_hint,
                "untrustedContentHint": self.untrusted_content_hint,
            },
        }

    def stored(self) -> dict[str, Any]:
        """As a surface keeps it (hostcall/store/records.py ``Surface.page_tools``)."""
        return {**self.signed(), "digest": self.digest, "title": self.title}

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> PageTool:
        hints = data.get("annotations") or {}
        return cls(
            name=data["name"],
            description=data["description"],
            input_schema=data["inputSchema"],
            read_only_hint=hints.get("readOnlyHint") is True,
            untrusted_content_hint=hints.get("untrustedContentHint") is True,
            title=str(data.get("title") or ""),
        )
