"""What an MCP tool's result becomes for the model: one shape for every result a server can
give, so a reply that reads ``result.content[0].text`` is never met by a missing field::

    {"content": [
       {"type": "text", "text": "..."},
       {"type": "image", "text": "", "mimeType": "image/png", "bytes": 48213},
       {"type": "audio", "text": "", "mimeType": "audio/wav", "bytes": 91022},
       {"type": "resource", "text": "...", "uri": "file:///notes.md", "mimeType": "text/markdown"},
       {"type": "resource", "text": "", "uri": "file:///logo.png", "mimeType": "image/png",
        "bytes": 5120},
       {"type": "resource_link", "text": "", "uri": "file:///big.csv", "name": "big.csv"}
     ],
     "structuredContent": {...},
     "truncated": {"bytes": 1893422, "note": "..."}}

``content`` is never empty and every part has a ``text`` (``""`` for what is not text): a
result with no content says its structured content as JSON text, as the MCP specification
asks servers to, or one empty text. ``structuredContent`` is the server's, as it sent it; a
tool that declares an ``outputSchema`` must send it, and the schema the run froze checks it
(``result_schema``), so a reply's ``result.structuredContent.x`` is checked against the
server's own fields.

Images, audio and binary resources are described, never passed on: their base64 would fill
the model's context with nothing it can read. Texts share the tool's ``max_response_kb``
(in UTF-8 bytes): past it a text is cut, and ``truncated`` tells the model how much was left
out. ``isError`` results become ``block_failed`` with the server's text.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

_PART_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "text": {"type": "string"},
        "mimeType": {"type": "string"},
        "bytes": {"type": "integer"},
        "uri": {"type": "string"},
        "name": {"type": "string"},
        "description": {"type": "string"},
    },
    "required": ["type", "text"],
}
_TRUNCATED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"bytes": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["bytes", "note"],
}
MAX_ERROR_CHARS = 500


def result_schema(structured: Mapping[str, Any] | None) -> dict[str, Any]:
    """The output schema of an MCP tool whose server declares ``structured`` as its
    ``outputSchema`` (None: it declares none, and any structured content is free-form)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "content": {"type": "array", "items": _PART_SCHEMA, "minItems": 1},
            "structuredContent": _root(structured) if structured is not None else {},
            "truncated": _TRUNCATED_SCHEMA,
        },
        "required": ["content"] if structured is None else ["content", "structuredContent"],
    }
    return schema


def _rebased(schema: Any) -> Any:
    """The server's schema, moved under ``properties.structuredContent``: its local ``$ref``s
    (``#/$defs/Contact``, as pydantic writes them) are made to point where it now is, and its
    ``$id`` and ``$schema``, which would start a document of their own there, are left out."""
    if isinstance(schema, Mapping):
        return {
            key: (
                f"#/properties/structuredContent{value[1:]}"
                if key == "$ref" and isinstance(value, str) and value.startswith("#")
                else _rebased(value)
            )
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_rebased(item) for item in schema]
    return schema


def _root(schema: Mapping[str, Any]) -> Any:
    return _rebased({k: v for k, v in schema.items() if k not in ("$id", "$schema")})


RESULT_FIELDS = frozenset(result_schema(None)["properties"])


# What a rule may read of any MCP tool's result before a run has read the server's list.
CONTENT_OUTPUT_SCHEMA = result_schema(None)


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
    """The bounded form of a result (``mcp_types`` content blocks and structured content)."""
    budget = _Budget(limit)
    parts = [_part(block, budget) for block in content]
    if not parts:
        # The specification asks a server that sends structured content to send it as JSON
        # text too; one that sent nothing at all still gives a reply its first text.
        text = "" if structured is None else json.dumps(structured, ensure_ascii=False)
        parts.append({"type": "text", "text": budget.take(text)})
    output: dict[str, Any] = {"content": parts}
    if structured is not None:
        output["structuredContent"] = structured
    if budget.cut:
        output["truncated"] = {
            "bytes": budget.cut,
            "note": (
                f"{budget.cut} bytes of the tool's text were left out: the result is longer "
                f"than this tool's limit of {limit} bytes."
            ),
        }
    return output


def _part(block: Any, budget: _Budget) -> dict[str, Any]:
    kind = getattr(block, "type", None)
    part: dict[str, Any]
    if kind == "text":
        return {"type": "text", "text": budget.take(block.text)}
    if kind in ("image", "audio"):
        part = {"type": kind, "text": "", "mimeType": block.mime_type, "bytes": _size(block.data)}
    elif kind == "resource":
        inner = block.resource
        part = {"type": "resource", "text": "", "uri": str(inner.uri), "mimeType": inner.mime_type}
        if isinstance(getattr(inner, "text", None), str):
            part["text"] = budget.take(inner.text)
        else:
            part["bytes"] = _size(getattr(inner, "blob", None))
    elif kind == "resource_link":
        part = {"type": "resource_link", "text": "", "uri": str(block.uri), "name": block.name}
        if block.description:
            part["description"] = budget.take(block.description)
    else:
        part = {"type": str(kind), "text": ""}  # a kind newer than this reader: named only
    return {k: v for k, v in part.items() if v is not None}


def redacted_texts(whole: Any, redacted: Any) -> Any:
    """``redacted`` (a result whose ``structuredContent`` a guardrail redacted) with its texts
    following suit: a text that is the structured content as JSON (as the specification asks
    a server to send it) is written again from the redacted content, and any other text,
    which may say the same fields in words, becomes ``[redacted]``. A redacted field must not
    stay readable in the text beside it."""
    if not isinstance(whole, Mapping) or not isinstance(redacted, Mapping):
        return redacted
    before, after = whole.get("structuredContent"), redacted.get("structuredContent")
    if before == after or not isinstance(redacted.get("content"), list):
        return redacted
    parts = []
    for part in redacted["content"]:
        if isinstance(part, Mapping) and part.get("text"):
            text = json.dumps(after, ensure_ascii=False) if _says(part["text"], before) else None
            part = {**part, "text": text if text is not None else "[redacted]"}
        parts.append(part)
    return {**redacted, "content": parts}


def _says(text: Any, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except (TypeError, ValueError):
        return False


def error_text(content: Sequence[Any]) -> str:
    """What an ``isError`` result says, for the model: its texts, joined and bounded."""
    texts = [block.text for block in content if getattr(block, "type", None) == "text"]
    text = " ".join(" ".join(texts).split())
    return text[:MAX_ERROR_CHARS] or "the tool reported an error without a message"
