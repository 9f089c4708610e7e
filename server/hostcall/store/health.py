"""Whether the database has been refusing writes: what ``/healthz`` says besides its probe.

The write probe (``Database.probe_write``) writes one small row and rolls it back, which a
full disk often lets through: the row fits in a page the file already has, and a rolled
back transaction never reaches the disk. Real writes then fail while the probe passes. So
each store also remembers the last write the database refused for want of space or
permission (not a lost race, a deadlock or a bug: those say nothing about the disk), until
a transaction commits, or for ``REMEMBERED_SECONDS`` at most: an idle server that met one
refusal does not stay unhealthy for ever with nothing left to prove it wrong.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

REMEMBERED_SECONDS = 30.0

# SQLite's primary result codes that mean the file cannot be written.
_SQLITE_UNWRITABLE = frozenset(
    {
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CANTOPEN,
    }
)
# PostgreSQL's: a read-only transaction (a standby, default_transaction_read_only), and the
# classes "insufficient resources" (disk full, out of memory) and "system error" (I/O).
_POSTGRES_UNWRITABLE = ("25006", "53", "58")


def refusal(exc: BaseException) -> str | None:
    """Why ``exc`` says the database cannot take writes, or None if it says something else."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in _SQLITE_UNWRITABLE:
            return str(exc).strip()
        return None
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate or ""
        if state.startswith(_POSTGRES_UNWRITABLE):
            return str(exc).strip().splitlines()[0]
    return None


@dataclass
class WriteHealth:
    """The last refused write's reason, until a commit (or ``REMEMBERED_SECONDS``)."""

    clock: Callable[[], float] = time.monotonic
    _reason: str | None = field(default=None, repr=False)
    _at: float = field(default=0.0, repr=False)

    def failed(self, exc: BaseException) -> None:
        reason = refusal(exc)
        if reason is not None:
            self._reason, self._at = reason, self.clock()

    def committed(self) -> None:
        self._reason = None

    def refused(self) -> str | None:
        """The reason the database refused a write lately, if none has committed since."""
        if self._reason is not None and self.clock() - self._at < REMEMBERED_SECONDS:
            return self._reason
        return None
