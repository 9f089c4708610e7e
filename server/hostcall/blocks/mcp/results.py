"""What an MCP tool's result becomes for the model.

A tool that declares an ``outputSchema`` answers with its structured content, which must
match the schema frozen with the run (the ledger checks it like any tool's output). Any
other tool answers with its content, in this bounded form::

    {"content": [
       {"type": "text", "text": "..."},
       {"type": "image", "mimeType": "image/png", "bytes": 48213},
       {"type": "audio", "mimeType": "audio/wav", "bytes": 91022},
       {"type": "resource", "uri": "file:///notes.md", "mimeType": "text/markdown", "text": "..."},
       {"type": "resource", "uri": "file:///logo.png", "mimeType": "image/png", "bytes": 5120},
       {"type": "resource_link", "uri": "file:///big.csv", "name": "big.csv"}
     ],
     "structured": {...},
     "truncated": {"bytes": 1893422, "note": "..."}}

Images, audio and binary resources are described, never passed on: their base64 would fill
the model's context with nothing it can read. Texts share the tool's ``max_response_kb``
(in UTF-8 bytes): past it a text is cut, and ``truncated`` tells the model how much was left
out. ``isError`` results become ``block_failed`` with the server's text.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

CONTENT_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "array", "items": {"type": "object"}},
        "structured": {},
        "truncated": {"type": "object"},
    },
    "required": ["content"],
}
MAX_ERROR_CHARS = 500


def _size(data: str | None) -> int:
    try:
        return len(base64.b64decode(data or "", validate=False))
    except (binascii.Error, ValueError):
        return len(data or "")


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.cut = 0

    def take(self, text: str) -> str:
        raw = text.encode()
        if len(raw) <= self.left:
            self.left -= len(raw)
            return text
        kept = raw[: max(self.left, 0)].decode(errors="ignore")
        self.cut += len(raw) - len(kept.encode())
        self.left = 0
        return kept


def content_output(content: Sequence[Any], structured: Any, *, limit: int) -> dict[str, Any]:
    """The bounded form of a result's content (``mcp_types`` content blocks)."""
    budget = _Budget(limit)
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append({"type": "text", "text": budget.take(block.text)})
        elif kind in ("image", "audio"):
            parts.append({"type": kind, "mimeType": block.mime_type, "bytes": _size(block.data)})
        elif kind == "resource":
            inner = block.resource
            part = {"type": "resource", "uri": str(inner.uri), "mimeType": inner.mime_type}
            if isinstance(getattr(inner, "text", None), str):
                part["text"] = budget.take(inner.text)
            else:
                part["bytes"] = _size(getattr(inner, "blob", None))
            parts.append({k: v for k, v in part.items() if v is not None})
        elif kind == "resource_link":
            link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
            if block.description:
                link["description"] = budget.take(block.description)
            parts.append(link)
        else:
            parts.append({"type": str(kind)})  # a kind newer than this reader: named only
    output: dict[str, Any] = {"content": parts}
    if structured is not None:
        output["structured"] = structured
    if budget.cut:
        output["truncated"] = {
            "bytes": budget.cut,
            "note": (
                f"{budget.cut} bytes of the tool's text were left out: the result is longer "
                f"than this tool's limit of {limit} bytes."
            ),
        }
    return output


def error_text(content: Sequence[Any]) -> str:
    """What an ``isError`` result says, for the model: its texts, joined and bounded."""
    texts = [block.text for block in content if getattr(block, "type", None) == "text"]
    text = " ".join(" ".join(texts).split())
    return text[:MAX_ERROR_CHARS] or "the tool reported an error without a message"
