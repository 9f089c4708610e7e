"""An agent file's ``attachments`` block: which files a visitor may attach, how large each
type may be, how many per message, how much per conversation, and which types the model is
given as text. Absent: the agent takes no files (the widget shows no button, an upload is
refused ``attachments_not_allowed``). docs/agents.md has the format.

The types are a closed list (``sniff.KNOWN``): each is recognised by its content, and none
is active content a browser would run (never SVG, never HTML).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hostcall.attachments.sniff import CSV, GIF, JPEG, KNOWN, PDF, PNG, TEXT, TEXTS, WEBP
from hostcall.protocol.limits import MAX_ATTACHMENTS

KB = 1024
MB = 1024 * KB
# No type may be larger: a file is read into memory whole (the upload, a model's request).
HARD_CAP_BYTES = 25 * MB
DEFAULT_MAX_FILES = 4
MAX_FILES = MAX_ATTACHMENTS
DEFAULT_MAX_TOTAL_MB = 50
MAX_TOTAL_MB = 1000

DEFAULT_TYPES = {
    PNG: 5 * MB,
    JPEG: 5 * MB,
    WEBP: 5 * MB,
    GIF: 5 * MB,
    PDF: 10 * MB,
    TEXT: 1 * MB,
    CSV: 1 * MB,
}
KEYS = frozenset({"max_files", "types", "extract_text", "max_total_mb"})
_SIZE = re.compile(r"(\d{1,9})\s*(KB|MB)")


@dataclass(frozen=True, slots=True)
class AttachmentPolicy:
    # Per message.
    max_files: int
    # Type -> the most bytes one file of it may have.
    types: dict[str, int]
    # Types the model is given as text (delimited), rather than named.
    extract_text: frozenset[str]
    # Per conversation, every file it was sent (or was uploaded and not sent yet).
    max_total_bytes: int

    def to_wire(self) -> dict[str, Any]:
        """The widget's config (``attachments``): enough to refuse early what the server
        would; the server still decides."""
        return {"maxFiles": self.max_files, "types": dict(self.types)}

    def largest(self) -> int:
        return max(self.types.values(), default=0)


def parse_size(value: Any) -> int | None:
    """``"<n>KB"`` or ``"<n>MB"`` (1024-based), or a whole number of bytes; None if neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value > 0 else None
    if isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        size = int(match[1]) * (KB if match[2] == "KB" else MB)
        return size if size > 0 else None
    return None


def parse_attachments(data: Any, where: str) -> tuple[AttachmentPolicy | None, list[str]]:
    """The block checked whole: the policy, or every problem found."""
    where = f"{where}: attachments"
    if not isinstance(data, dict):
        return None, [f"{where} must be an object"]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(data) - KEYS)]
    max_files = data.get("max_files", DEFAULT_MAX_FILES)
    if not _whole(max_files, 1, MAX_FILES):
        problems.append(f"{where}: 'max_files' must be a whole number from 1 to {MAX_FILES}")
    total_mb = data.get("max_total_mb", DEFAULT_MAX_TOTAL_MB)
    if not _whole(total_mb, 1, MAX_TOTAL_MB):
        problems.append(
            f"{where}: 'max_total_mb' must be a whole number of MB from 1 to {MAX_TOTAL_MB}"
        )
    types, found = _types(data.get("types", DEFAULT_TYPES), where)
    problems += found
    extract = data.get("extract_text", [])
    if not isinstance(extract, list) or not all(isinstance(t, str) for t in extract):
        problems.append(f"{where}: 'extract_text' must be a list of types")
        extract = []
    for kind in extract:
        if kind not in TEXTS:
            problems.append(
                f"{where}: extract_text: {kind!r} cannot be given as text; only "
                f"{', '.join(sorted(TEXTS))} can"
            )
        elif kind not in types:
            problems.append(f"{where}: extract_text: {kind!r} is not one of the block's types")
    if problems:
        return None, problems
    return AttachmentPolicy(max_files, types, frozenset(extract), total_mb * MB), []


def _types(value: Any, where: str) -> tuple[dict[str, int], list[str]]:
    if not isinstance(value, dict) or not value:
        return {}, [f"{where}: 'types' must be an object of sizes per type"]
    types: dict[str, int] = {}
    problems: list[str] = []
    for kind, raw in value.items():
        if kind not in KNOWN:
            problems.append(
                f"{where}: types: {kind!r} cannot be attached; the types are {', '.join(KNOWN)}"
            )
            continue
        size = parse_size(raw)
        if size is None:
            problems.append(
                f'{where}: types: {kind}: {raw!r} is not a size ("500KB", "5MB" or a '
                "whole number of bytes)"
            )
        elif size > HARD_CAP_BYTES:
            problems.append(
                f"{where}: types: {kind}: {raw!r} is over the {HARD_CAP_BYTES // MB} MB every "
                "file is held to"
            )
        else:
            types[kind] = size
    return types, problems


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
