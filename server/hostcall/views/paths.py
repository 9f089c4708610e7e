"""The path language of views: a small, bounded subset of JSONPath.

A path starts at ``$`` (the tool's result) or ``@`` (the item of a list or table being
drawn), then names at most ``MAX_STEPS`` steps: ``.name`` (letters, digits, ``_`` and
``-``) or ``[n]`` (an index, from 0). ``$.tasks``, ``@.title``, ``$.rows[0].name``. No
wildcards, filters, recursion or expressions: reading a path is a walk of at most
``MAX_STEPS`` lookups, whatever the result holds, and a step that finds nothing gives
``None`` (the view leaves the value out) rather than an error.

A message template is text with paths in braces: ``"Mark {@.title} as done"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_STEPS = 8
MAX_PATH_CHARS = 200
MAX_TEMPLATE_CHARS = 300
MAX_PLACEHOLDERS = 8
MAX_INDEX = 9999

_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]{0,63})|\[(\d{1,4})\]")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class PathError(ValueError):
    """A path or template the language does not admit; the message quotes it."""


@dataclass(frozen=True, slots=True)
class Path:
    root: str  # "$" or "@"
    steps: tuple[str | int, ...]

    def read(self, result: Any, item: Any = None) -> Any:
        value = result if self.root == "$" else item
        for step in self.steps:
            # Classes compared before isinstance: a view reads every item of a list on the
            # way to the result's event, and a comparison is not a call.
            if step.__class__ is str:
                if value.__class__ is dict or isinstance(value, dict):
                    value = value.get(step)
                else:
                    return None
            else:
                assert isinstance(step, int)
                if not isinstance(value, list) or step >= len(value):
                    return None
                value = value[step]
        return value


@dataclass(frozen=True, slots=True)
class Template:
    parts: tuple[str | Path, ...]

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in self.parts if isinstance(p, Path))


def parse_path(text: Any, *, item: bool = False) -> Path:
    """``text`` as a path; ``item``: whether ``@`` (the item being drawn) may start it."""
    if not isinstance(text, str) or not text:
        raise PathError('must be a path such as "$.title"')
    if len(text) > MAX_PATH_CHARS:
        raise PathError(f"is a path longer than {MAX_PATH_CHARS} characters")
    root, rest = text[0], text[1:]
    if root not in "$@":
        raise PathError(f"{text!r} must start with $ (the result) or @ (the item)")
    if root == "@" and not item:
        raise PathError(f"{text!r} starts with @, which only an item's fields may use")
    steps: list[str | int] = []
    at = 0
    while at < len(rest):
        match = _STEP.match(rest, at)
        if match is None:
            raise PathError(
                f"{text!r} is not a path: after {root} come only .name and [index] steps"
            )
        steps.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        at = match.end()
    if len(steps) > MAX_STEPS:
        raise PathError(f"{text!r} has more than {MAX_STEPS} steps")
    return Path(root, tuple(steps))


def parse_template(text: Any, *, item: bool = False) -> Template:
    """``text`` as a message template: plain text with ``{path}`` placeholders."""
    if not isinstance(text, str) or not text.strip():
        raise PathError("must be the text of a message, with {$.path} placeholders if any")
    if len(text) > MAX_TEMPLATE_CHARS:
        raise PathError(f"is longer than {MAX_TEMPLATE_CHARS} characters")
    parts: list[str | Path] = []
    at = 0
    for match in _PLACEHOLDER.finditer(text):
        parts.append(text[at : match.start()])
        parts.append(parse_path(match.group(1), item=item))
        at = match.end()
    parts.append(text[at:])
    if any("{" in p or "}" in p for p in parts if isinstance(p, str)):
        raise PathError(f"{text!r} has an unmatched brace")
    if sum(isinstance(p, Path) for p in parts) > MAX_PLACEHOLDERS:
        raise PathError(f"{text!r} has more than {MAX_PLACEHOLDERS} placeholders")
    return Template(tuple(p for p in parts if p != ""))
