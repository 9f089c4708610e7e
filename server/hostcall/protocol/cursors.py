"""Where the next page of a list starts, for lists ordered by last activity, newest first
(a visitor's history, a person's page in the console): the previous page's last line, as
``<updated_at>~<id>``. Clients send back the ``next`` they were given, never one they made.
"""

from __future__ import annotations

import math
import re

from hostcall.errors import BadRequest

CURSOR = re.compile(r"(?P<at>[0-9.e+-]{1,32})~(?P<id>[A-Za-z0-9_-]{1,64})")


def page_cursor(updated_at: float, line_id: str) -> str:
    """The cursor of the page after the line (``updated_at``, ``line_id``)."""
    return f"{updated_at!r}~{line_id}"


def read_cursor(value: str | None, field: str = "before") -> tuple[float, str] | None:
    """A cursor ``page_cursor`` made, as (updated_at, id); None for the first page.
    Anything else is a ``BadRequest`` naming ``field``."""
    if value is None:
        return None
    found = CURSOR.fullmatch(value)
    at = _float(found["at"]) if found else None
    if found is None or at is None:
        raise BadRequest(
            f"'{field}' must be a page's 'next' value (got {value[:80]!r})", field=field
        )
    return at, found["id"]


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
