"""Regular expressions from agent files, matched in linear time (RE2).

A designer's pattern (a scripted rule's ``match``, a guardrail's ``regex``, a schema's
``pattern`` and ``patternProperties``) runs on the event loop against text a visitor chose.
Python's ``re`` backtracks: ``^(a+)+$`` against 28 ``a`` and a ``!`` takes seconds, and the
whole server stands still meanwhile. RE2 never backtracks, so matching costs at most the
text's length times the pattern's size; the size is capped here (``MAX_PROGRAM_SIZE``), and
the texts are capped where they enter (docs/agents.md, "Regular expressions").

RE2 has no backreferences, lookaround, atomic groups or possessive quantifiers: a pattern
that uses them is refused when the agent loads (``problem``), with a hint for each.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re2

# RE2 program instructions. A Unicode class such as \p{L} alone is ~1,200 and cheap; what
# costs is many states alive at once, which a long counted repeat (a.{500}x) makes. At this
# size the worst pattern found costs ~0.1 s on a whole 8,000-character message and ~1 s on
# a whole 256 KiB body; ordinary patterns cost microseconds.
MAX_PROGRAM_SIZE = 5000

_BACKREFERENCES = "backreferences (\\1, (?P=name)) are not supported"
# What RE2 says for Python syntax it lacks, and what to write instead.
_HINTS = (
    ("invalid escape sequence: \\Z", "RE2 writes the end of the text \\z (or use $)"),
    ("invalid perl operator: (?=", "lookahead (?=...) is not supported"),
    ("invalid perl operator: (?!", "lookahead (?!...) is not supported"),
    ("invalid perl operator: (?<=", "lookbehind (?<=...) is not supported"),
    ("invalid perl operator: (?<!", "lookbehind (?<!...) is not supported"),
    ("invalid perl operator: (?>", "atomic groups are not supported (nor needed: RE2 never "
     "backtracks)"),
    ("bad repetition operator: ++", "possessive quantifiers are not supported (nor needed)"),
    ("bad repetition operator: *+", "possessive quantifiers are not supported (nor needed)"),
    ("bad repetition operator: ?+", "possessive quantifiers are not supported (nor needed)"),
    ("invalid perl operator: (?x", "verbose mode (?x) is not supported"),
    ("invalid perl operator: (?#", "comments (?#...) are not supported"),
)  # fmt: skip


class PatternError(ValueError):
    """A pattern RE2 cannot take; the message says why, in a designer's words."""


@dataclass(frozen=True, slots=True)
class Match:
    groups: Mapping[str, str]  # named groups; one that did not take part is ""


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled pattern; ``capture`` compiles its groups (only the scripted model reads
    them: without groups RE2 answers from its DFA alone, the fastest way)."""

    source: str
    capture: bool
    _compiled: Any

    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(self._compiled.groupindex)

    # The text is matched as UTF-8 bytes: given a str, google-re2's wrapper maps every
    # offset of a match back to characters in Python (three times the match's own cost);
    # the groups, whole characters in RE2's UTF-8 mode, are decoded here instead.

    def search(self, text: str) -> Match | None:
        found = self._compiled.search(text.encode())
        if found is None:
            return None
        if not self.capture:
            return Match({})
        return Match({k: v.decode() if v else "" for k, v in found.groupdict().items()})

    def matches(self, text: str) -> bool:
        return self._compiled.search(text.encode()) is not None


@functools.lru_cache(maxsize=4096)
def compile(source: str, *, capture: bool = False) -> Pattern:
    """``source`` compiled by RE2; ``PatternError`` when it cannot be."""
    options = re2.Options()
    options.log_errors = False  # our own message says it, once, where it belongs
    options.never_capture = not capture
    try:
        compiled = re2.compile(source, options)
    except re2.error as exc:
        raise PatternError(_explain(exc, source)) from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"is too large ({compiled.programsize} RE2 instructions, at most "
            f"{MAX_PROGRAM_SIZE}): shorten long counted repeats such as .{{500}} (a schema "
            "can say maxLength instead)"
        )
    return Pattern(source, capture, compiled)


def problem(source: Any) -> str | None:
    """Why ``source`` cannot be an agent file's regular expression, or ``None``."""
    if not isinstance(source, str):
        return "must be a string (a regular expression)"
    try:
        compile(source, capture=True)  # the larger program: a pattern fits both ways
    except PatternError as exc:
        return str(exc)
    return None


def search(source: str, text: str) -> bool:
    """Whether ``source`` (checked when its agent loaded) matches anywhere in ``text``."""
    return compile(source).matches(text)


def _explain(exc: Exception, source: str) -> str:
    raw = exc.args[0] if exc.args else ""
    detail = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    hint = next((h for prefix, h in _HINTS if detail.startswith(prefix)), "")
    backslash_digit = detail[:-1] == "invalid escape sequence: \\" and detail[-1:].isdigit()
    if backslash_digit or (detail == "invalid perl operator: (?P" and "(?P=" in source):
        hint = _BACKREFERENCES
    return (
        f"is not a valid regular expression in RE2's syntax (linear time; "
        f"docs/agents.md): {detail}" + (f"; {hint}" if hint else "")
    )
