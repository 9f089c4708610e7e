"""The PostgreSQL store's messages, and how a transaction holds them back.

A message written in a transaction returns nothing its caller reads, and no statement of
the transaction reads messages before the run's next step (``list_messages``, which sends
them first). So ``add_message`` holds it, and it goes out inside the statement the
transaction sends next for its conversation's events (hostcall/store/postgres/events.py),
or, if none comes, in one INSERT of every held message before the next read of
messages or COMMIT: four statements fewer per conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hostcall.store.statements import MESSAGE_COLUMNS as COLUMNS
from hostcall.store.statements import POSTGRES as SQL

# One row of VALUES: (n, id, conversation_id, ..., interrupted), typed, as a VALUES list's
# parameters have no column to take a type from (a None would be text, not boolean).
_TYPES = (
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "boolean",
    "text",
    "text",
    "text",
)
_NAMES = (
    "id",
    "cid",
    "run",
    "role",
    "text",
    "calls",
    "call_id",
    "tool",
    "interrupted",
    "author",
    "context",
    "attachments",
)

INSERT_ONE = SQL.insert_message

Values = tuple[Any, ...]


def _rows(count: int, prefix: str) -> str:
    return ", ".join(
        "("
        + ", ".join([f"{i + 1}"] + [f"%({prefix}{i}_{j})s::{t}" for j, t in enumerate(_TYPES)])
        + ")"
        for i in range(count)
    )


def insert_sql(count: int, *, after: str | None = None, prefix: str = "m") -> str:
    """An INSERT of ``count`` messages (parameters %(<prefix><i>_<j>)s), in the order
    given: they take their ``pos`` in it. ``after``: a CTE of the same statement; the
    messages are written only if it yields a row (a fenced append's ``next``: no message
    without the lease either, even outside a transaction)."""
    source = f"{after}, " if after else ""
    return (
        f"INSERT INTO messages ({COLUMNS})"
        f" SELECT {', '.join(f'm.{n}' for n in _NAMES)}"
        f" FROM {source}(VALUES {_rows(count, prefix)}) AS m(n, {', '.join(_NAMES)}) ORDER BY m.n"
    )


def params(held: Sequence[Values], prefix: str = "m") -> dict[str, Any]:
    return {f"{prefix}{i}_{j}": value for i, row in enumerate(held) for j, value in enumerate(row)}
