"""Whole numbers from a request's text: a query parameter, a form field, a header.

Every one goes through ``whole_number`` (or ``parsed``, for a number inside a longer text),
because ``int()`` and ``str.isdigit()`` disagree with
what a number in a URL is: ``isdigit`` takes ``"²"`` (which ``int`` refuses), ``int`` takes
``" 7"``, ``"+7"`` and ``"7_0"``, refuses more than 4,300 digits, and gives numbers no store
can hold (SQLite and PostgreSQL take 64 bits; a bigger one was an ``OverflowError``, a 500).
"""

from __future__ import annotations

import re

from hostcall.errors import BadRequest

#: The largest number a store holds (a signed 64-bit integer), and so the largest taken.
LARGEST = 2**63 - 1

_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only; 19 is LARGEST's length


def parsed(text: str) -> int | None:
    """``text`` as a number from 0 to ``LARGEST``, or None."""
    if _DIGITS.fullmatch(text) is None or int(text) > LARGEST:
        return None
    return int(text)


def whole_number(
    raw: str | None,
    name: str,
    *,
    low: int = 0,
    high: int = LARGEST,
) -> int:
    """``raw`` (the text of the parameter ``name``) as a number from ``low`` to ``high``,
    or ``400 bad_request`` quoting what was sent."""
    text = raw or ""
    value = parsed(text)
    if value is None or not low <= value <= high:
        shown = repr(text[:40]) + ("…" if len(text) > 40 else "")
        raise BadRequest(
            f"{name} must be a whole number from {low} to {high}, not {shown}",
            field=name,
        )
    return value
