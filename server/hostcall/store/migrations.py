"""Versioned schema migrations: a numbered list per store, applied once, in order, at start.

Each store keeps its list next to its SQL and records what it applied in
``schema_migrations``. A migration is never edited once released: a change is a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hostcall.errors import StoreError


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def check(migrations: Sequence[Migration]) -> None:
    """A programmer's guard: versions are 1, 2, 3… with no gap or repeat."""
    versions = [m.version for m in migrations]
    assert versions == list(range(1, len(versions) + 1)), f"bad migration versions {versions}"


def pending(
    migrations: Sequence[Migration], applied: Iterable[int], *, target: str
) -> list[Migration]:
    """What is left to apply; refuses a database migrated by a newer Hostcall."""
    check(migrations)
    done = set(applied)
    known = len(migrations)
    newer = sorted(v for v in done if v > known)
    if newer:
        raise StoreError(
            f"the database schema is at version {max(newer)}, newer than this Hostcall knows "
            f"(up to {known}); run the newer Hostcall, or a copy of the data",
            target=target,
        )
    return [m for m in migrations if m.version not in done]
