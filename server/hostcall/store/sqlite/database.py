"""The SQLite store: one file, zero set-up, safe across a SIGKILL (WAL journal).

One connection, used from the event loop's thread only: every statement is short, and a
single writer makes ``transition_call``'s conditional UPDATE the whole story of atomicity.
One process per file: a second process on the same file, by any name (a symlink, a hard
link), is refused at start (two processes on one file would re-run each other's steps and
serve each other's streams nowhere). Several processes share a PostgreSQL store instead.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from hostcall.errors import StoreError
from hostcall.store.checkpoints import Checkpointer
from hostcall.store.composed import ComposedStore
from hostcall.store.definitions import Definitions
from hostcall.store.interfaces import Database
from hostcall.store.migrations import pending
from hostcall.store.sqlite.apps import AppTables
from hostcall.store.sqlite.attachments import AttachmentTables
from hostcall.store.sqlite.calls import CallTables
from hostcall.store.sqlite.connection import SQLiteConnection
from hostcall.store.sqlite.console import ConsoleTables
from hostcall.store.sqlite.conversations import ConversationTables
from hostcall.store.sqlite.coordination import Coordination
from hostcall.store.sqlite.erasure import ErasureTables
from hostcall.store.sqlite.events import EventTables
from hostcall.store.sqlite.people import PeopleTables
from hostcall.store.sqlite.runs import RunTables
from hostcall.store.sqlite.schema import MIGRATIONS
from hostcall.store.sqlite.surfaces import SurfaceTables
from hostcall.store.sqlite.usage import UsageTables
from hostcall.store.statements import SQLITE as SQL

log = logging.getLogger("hostcall.store")

# Seconds since the epoch on the database's clock, in SQL: what PostgreSQL's now() stamps
# (julianday counts days from a date 2440587.5 days before the epoch).
EPOCH_NOW = "(julianday('now') - 2440587.5) * 86400.0"


def _lock(path: Path) -> int:
    """Hold an exclusive ``flock`` on the database file itself for the life of the process,
    or refuse to start; the descriptor, which ``SQLiteStore._release`` closes.

    The file, not its name: a symlink or a hard link to a database another process serves
    is that same file, and a second process let in through it would take over the first's
    live runs. The kernel drops the lock with the process, even one killed by SIGKILL, so a
    crash never blocks a restart.

    ``flock``, not ``fcntl``'s record locks: SQLite takes those on this file, and on a local
    file system the two kinds never meet. Closing any descriptor of the file drops every
    record lock this process holds on it, SQLite's too: ours is closed only after SQLite's
    connections (``SQLiteStore._release``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(os.fstat(fd))
        os.close(fd)
        raise StoreError(
            f"another Hostcall process{f' (pid {holder})' if holder else ''} is serving the "
            f"SQLite database {path} (this very file, whichever name or link it was opened "
            "by); a SQLite file serves one process. Stop it first, or run several processes "
            "on PostgreSQL (--db postgresql://...)",
            target=str(path),
        ) from None
    except BaseException:
        os.close(fd)
        raise
    names = os.fstat(fd).st_nlink
    if names > 1:
        log.warning(
            "the SQLite database %s has %d hard links: serve it by one name always. SQLite "
            "keeps its WAL beside the name it is opened by, so after a crash a process "
            "opening the file by another name would not see the last commits",
            path, names,
        )  # fmt: skip
    return fd


def _holder(stat: os.stat_result) -> str | None:
    """The pid holding a ``flock`` on the file, as Linux's /proc/locks lists it (elsewhere,
    or from another pid namespace: None)."""
    file = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in locks:
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2147002 0 EOF"; a waiter's line has "->".
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == file:
            return fields[4] if fields[4].isdigit() and fields[4] != "0" else None
    return None


class SQLiteStore(ComposedStore, Database):
    """Each aggregate's part (its statements) on one ``SQLiteConnection`` (``db``: the
    file's connection and the transaction), composed (hostcall/store/composed.py)."""

    def __init__(self, path: Path | str, *, serving: bool = True) -> None:
        """``serving=False``: a short-lived command beside the server (``hostcall users
        add``), which takes no lock and leaves the server's leases alone."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock(self.path) if serving else None
        self._checkpointer: Checkpointer | None = None
        try:
            self._open(serving)
        except BaseException:
            self._release()
            raise

    def _open(self, serving: bool) -> None:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a transaction spans
        # exactly the writes of one engine decision.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process kill (not a power cut), at a fraction of
        # FULL's cost per commit.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self.db = db = SQLiteConnection(self._db)
        self.conversations = ConversationTables(db)
        self.events = EventTables(db)
        self.coordination = coordination = Coordination(db)
        self.runs = RunTables(db, definitions=Definitions(), leases=coordination)
        self.calls = CallTables(db)
        self.surfaces = SurfaceTables(db)
        self.console = ConsoleTables(db)
        self.usage = UsageTables(db)
        self.erasure = ErasureTables(db)
        self.people = PeopleTables(db)
        self.attachments = AttachmentTables(db)
        self.apps = AppTables(db)
        self._migrate()
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
            # applied_at says when this file's schema changed, stamped by the database as
            # PostgreSQL's now() stamps it (seconds since the epoch): no request's time, and
            # the store opens before (or without) any app whose clock it could read.
            # executescript commits first; each migration and its record commit together.
            self._db.executescript(
                f"BEGIN IMMEDIATE;\n{migration.sql}\n"
                f"INSERT INTO schema_migrations VALUES ({migration.version},"
                f" '{migration.name}', {EPOCH_NOW});\nCOMMIT;"
            )

    @property
    def schema_version(self) -> int:
        row = self._db.execute(SQL.schema_version).fetchone()
        return int(row[0] or 0)

    async def close(self) -> None:
        self._release()

    def _release(self) -> None:
        """Close the connections, then let go of the file's lock (``_lock`` says why in this
        order). A second call does nothing more."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if getattr(self, "_db", None) is not None:
            self._db.close()  # the last connection to close checkpoints what is left
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return self.db.transaction()

    def refused_write(self) -> str | None:
        return self.db.refused_write()

    def connection_waiters(self) -> int:
        return self.db.connection_waiters()

    def check_writable(self) -> None:
        try:
            self._probe()
        except Exception:
            self._release()
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
        async with self.db.writer:
            self._probe()
