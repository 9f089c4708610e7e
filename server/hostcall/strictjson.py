"""Strict JSON at every door: requests, model output, upstream responses.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, turns ``1e999`` into an
infinite float, raises a bare ``ValueError`` on integers past 4,300 digits and a
``RecursionError`` on deep nesting. Any of those, once stored, poisons a conversation: its
snapshot cannot be encoded and its stream carries non-JSON. ``loads`` refuses them all with
one typed error that says what was wrong and where; ``dumps`` never writes them.

``displayable`` is the other half: data already stored before this module existed (or by
another writer) is rendered with non-finite numbers as ``null`` and anything deeper than
the limit cut, so a snapshot never fails on stored data.

``unstorable`` finds what is valid JSON but no store can hold: a NUL character, a lone
surrogate. The doors that take text from requests refuse it (hostcall/protocol/reading.py).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64
MAX_INT_DIGITS = 100


class StrictJSONError(ValueError):
    """The text is not strict JSON; ``reason`` is one of the class constants below."""

    SYNTAX = "syntax"
    NON_FINITE = "non_finite_number"
    TOO_DEEP = "too_deep"
    NUMBER_TOO_LARGE = "number_too_large"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _constant(name: str) -> Any:
    raise StrictJSONError(StrictJSONError.NON_FINITE, f"{name} is not a JSON number")


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise StrictJSONError(
            StrictJSONError.NUMBER_TOO_LARGE,
            f"an integer of {len(digits.lstrip('-'))} digits; the limit is {MAX_INT_DIGITS}",
        )
    return int(digits)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(
            StrictJSONError.NUMBER_TOO_LARGE, f"the number {text[:40]} is out of range"
        )
    return value


_decoder = json.JSONDecoder(parse_constant=_constant, parse_int=_integer, parse_float=_float)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse strict JSON: finite numbers, integers of at most ``MAX_INT_DIGITS`` digits,
    containers nested at most ``max_depth`` deep. Raises ``StrictJSONError``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(StrictJSONError.SYNTAX, f"not UTF-8: {exc}") from None
    # Depth first, on the text: the parser recurses once per level and must never be the
    # one that finds out (a RecursionError there is an unexpected 500).
    depth = _text_depth(text, max_depth)
    if depth > max_depth:
        raise StrictJSONError(
            StrictJSONError.TOO_DEEP,
            f"JSON nested {depth} levels deep; the limit is {max_depth}",
        )
    try:
        return _decoder.decode(text)
    except StrictJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError(StrictJSONError.SYNTAX, str(exc)) from None
    except (ValueError, RecursionError) as exc:  # int() limits, or a stack we did not foresee
        raise StrictJSONError(StrictJSONError.SYNTAX, str(exc)[:200]) from None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _text_depth(text: str, limit: int) -> int:
    """The deepest bracket nesting outside strings (an upper bound if the text is invalid)."""
    # Quick path: the depth never exceeds the number of openers.
    openers = text.count("[") + text.count("{")
    if openers <= limit:
        return openers
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


# One encoder for every call: ``json.dumps`` with options builds a new one each time, a
# few microseconds per event on the round trip's path.
_STRICT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """Compact JSON that is always strict (raises ``ValueError`` on a non-finite number)."""
    return _STRICT.encode(value)


def displayable(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` with non-finite floats as ``None`` and containers past ``max_depth`` as
    ``None``: what is safe to encode whatever was stored."""
    return _clean(value, max_depth)


def _clean(value: Any, room: int) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        if room <= 0:
            return None
        return {str(k): _clean(v, room - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if room <= 0:
            return None
        return [_clean(v, room - 1) for v in value]
    return value


# What no store can hold in text: PostgreSQL refuses NUL in text and jsonb, and a lone
# UTF-16 surrogate (``"\ud800"`` in JSON) cannot be encoded as UTF-8 at all, so neither can
# be written to SQLite, sent in an event or logged.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
NUL = "nul"
LONE_SURROGATE = "lone_surrogate"


def unstorable_text(text: str) -> str | None:
    """Why ``text`` cannot be stored (``NUL`` or ``LONE_SURROGATE``), or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return NUL if found.group() == "\x00" else LONE_SURROGATE


def unstorable(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first string (value or key) in ``value`` that cannot be stored: where it is
    (``a.b[0]``, from ``where``) and why; None if every string can be stored."""
    if isinstance(value, str):
        reason = unstorable_text(value)
        return None if reason is None else (where, reason)
    if isinstance(value, dict):
        for key, item in value.items():
            reason = unstorable_text(key)
            if reason is not None:
                return (where, reason)  # the key itself is never echoed back
            found = unstorable(item, f"{where}.{key}" if where else key)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = unstorable(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


def loads_stored(text: str) -> Any:
    """A value the store wrote: lenient (rows written before strict parsing existed may hold
    ``NaN``), and ``None`` rather than an exception for what cannot be read back."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def dumps_displayable(value: Any) -> str:
    """``dumps``, falling back to ``displayable`` when the value is not strict JSON."""
    try:
        return dumps(value)
    except (ValueError, RecursionError):
        return dumps(displayable(value))
