"""The SQLite store: one file, zero set-up, safe across a SIGKILL (WAL journal).

One connection, used from the event loop's thread only: every statement is short, and a
single writer makes ``transition_call``'s conditional UPDATE the whole story of atomicity.
One process per file: a second process on the same file is refused at start
(two processes on one file would re-run each other's steps and serve each other's streams
nowhere). Several processes share a PostgreSQL store instead.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import time
from pathlib import Path
from typing import IO

from hostcall.errors import StoreError
from hostcall.store.checkpoints import Checkpointer
from hostcall.store.definitions import Definitions
from hostcall.store.interfaces import Database
from hostcall.store.migrations import pending
from hostcall.store.sqlite.calls import CallTables
from hostcall.store.sqlite.console import ConsoleTables
from hostcall.store.sqlite.conversations import ConversationTables
from hostcall.store.sqlite.events import EventTables
from hostcall.store.sqlite.runs import RunTables
from hostcall.store.sqlite.schema import MIGRATIONS
from hostcall.store.sqlite.surfaces import SurfaceTables
from hostcall.store.statements import SQLITE as SQL


def _lock(path: Path) -> IO[str]:
    """Hold ``<db>.lock`` for the life of the process, or refuse to start."""
    lock_path = path.with_name(path.name + ".lock")
    handle = open(lock_path, "a+")  # held open until close()
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise StoreError(
            f"another Hostcall process (pid {holder}) is serving the SQLite database {path}; "
            "a SQLite file serves one process. Stop it first, or run several processes on "
            "PostgreSQL (--db postgresql://...)",
            target=str(path),
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


class SQLiteStore(
    ConversationTables,
    EventTables,
    CallTables,
    RunTables,
    SurfaceTables,
    ConsoleTables,
    Database,
):
    """Each aggregate's part (its statements) on one connection (connection.py)."""

    def __init__(self, path: Path | str, *, serving: bool = True) -> None:
        """``serving=False``: a short-lived command beside the server (``hostcall users
        add``), which takes no lock and leaves the server's leases alone."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock(self.path) if serving else None
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a transaction spans
        # exactly the writes of one engine decision.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process kill (not a power cut), at a fraction of
        # FULL's cost per commit.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._owner = None
        self._let_go = set()
        self._writer = asyncio.Lock()
        self._definitions = Definitions()
        self._migrate()
        self._checkpointer: Checkpointer | None = None
        if serving:
            # We hold the file alone: every lease in it belongs to a process that is gone.
            self._db.execute("UPDATE leases SET until = 0")
            # Checkpoints run in a thread of their own, not inside a request's COMMIT
            # (hostcall/store/checkpoints.py says why, and why durability is unchanged).
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._checkpointer = Checkpointer(self.path)

    def _migrate(self) -> None:
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        applied = [r[0] for r in self._db.execute(SQL.applied_migrations)]
        for migration in pending(MIGRATIONS, applied, target=str(self.path)):
            # executescript commits first; each migration and its record commit together.
            self._db.executescript(
                f"BEGIN IMMEDIATE;\n{migration.sql}\n"
                f"INSERT INTO schema_migrations VALUES ({migration.version},"
                f" '{migration.name}', {time.time()});\nCOMMIT;"
            )

    @property
    def schema_version(self) -> int:
        row = self._db.execute(SQL.schema_version).fetchone()
        return int(row[0] or 0)

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._db.close()  # the last connection to close checkpoints what is left
        if self._lock is not None:
            self._lock.close()

    def check_writable(self) -> None:
        try:
            self._probe()
        except Exception:
            if self._checkpointer is not None:
                self._checkpointer.stop()
            self._db.close()
            if self._lock is not None:
                self._lock.close()
            raise

    def _probe(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("INSERT INTO probe (at) VALUES (julianday('now'))")
        finally:
            self._db.execute("ROLLBACK")

    async def probe_write(self) -> None:
        """Write and roll back one row: raises ``sqlite3.Error`` when writes would fail
        (read-only file or directory, full disk, a lock held past the busy timeout)."""
        async with self._writer:
            self._probe()
