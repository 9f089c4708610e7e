"""The SQLite store: one file, zero set-up, safe across a SIGKILL (WAL journal).

One connection, used from the event loop's thread only: every statement is short, and a
single writer makes ``transition_call``'s conditional UPDATE the whole story of atomicity.
One process per file: a second process on the same file is refused at start (issue 10:
two processes on one file re-ran each other's steps and served each other's streams
nowhere). Several processes share a PostgreSQL store instead.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from hostcall.errors import LeaseLost, StoreError
from hostcall.protocol.events import ProtocolEvent, encode
from hostcall.protocol.frames import Event, stored_event
from hostcall.store import rows
from hostcall.store.checkpoints import Checkpointer
from hostcall.store.definitions import Definitions
from hostcall.store.migrations import pending
from hostcall.store.records import (
    Conversation,
    OpenedStream,
    StoredMessage,
)
from hostcall.store.sqlite.calls import CallTables
from hostcall.store.sqlite.console import ConsoleTables
from hostcall.store.sqlite.runs import RunTables
from hostcall.store.sqlite.schema import MIGRATIONS
from hostcall.store.sqlite.surfaces import SurfaceTables


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


class SQLiteStore(CallTables, ConsoleTables, SurfaceTables, RunTables):
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
        self._owner: asyncio.Task[Any] | None = None
        # Leases (key, owner) the open transaction released while they were held (a run's
        # end before its last events): the transaction holds the file, so nobody took them
        # since, and its fenced appends pass (see runs.py, update_run_leased).
        self._let_go: set[tuple[str, str]] = set()
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
        applied = [r[0] for r in self._db.execute("SELECT version FROM schema_migrations")]
        for migration in pending(MIGRATIONS, applied, target=str(self.path)):
            # executescript commits first; each migration and its record commit together.
            self._db.executescript(
                f"BEGIN IMMEDIATE;\n{migration.sql}\n"
                f"INSERT INTO schema_migrations VALUES ({migration.version},"
                f" '{migration.name}', {time.time()});\nCOMMIT;"
            )

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One BEGIN IMMEDIATE ... COMMIT. Statements never suspend the task (sqlite3 is
        called directly: a local file, microseconds a statement), so a transaction is
        normally never interleaved with another task's; the lock keeps it that way if a
        caller awaits something else inside one. Nested calls from the same task join it."""
        task = asyncio.current_task()
        if self._owner is task and task is not None:
            yield
            return
        async with self._writer:
            self._db.execute("BEGIN IMMEDIATE")
            self._owner = task
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._owner = None
                self._let_go.clear()

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._db.close()  # the last connection to close checkpoints what is left
        if self._lock is not None:
            self._lock.close()

    async def rotate_session(self, conversation_id: str, generation: int) -> bool:
        cursor = self._db.execute(
            "UPDATE conversations SET session_generation = session_generation + 1"
            " WHERE id = ? AND session_generation = ?",
            (conversation_id, generation),
        )
        return cursor.rowcount == 1

    async def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        async with self.transaction():
            self._db.execute("DELETE FROM stream_tickets WHERE expires_at < ?", (now,))
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO stream_tickets (nonce, expires_at) VALUES (?, ?)",
                (nonce, expires_at),
            )
        return cursor.rowcount == 1

    async def open_stream(
        self, conversation_id: str, generation: int, nonce: str, expires_at: float, now: float
    ) -> OpenedStream:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            return OpenedStream(None, False)
        conversation, last_seq = rows.conversation(row), int(row["last_seq"])
        if conversation.session_generation != generation:
            return OpenedStream(conversation, False, last_seq)
        redeemed = await self.consume_ticket(nonce, expires_at, now)
        return OpenedStream(conversation, redeemed, last_seq)

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

    # ---- conversations -------------------------------------------------------------------

    async def create_conversation(self, conversation: Conversation) -> None:
        self._db.execute(
            "INSERT INTO conversations (id, agent_id, created_at, locale, handled_tools)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                conversation.id,
                conversation.agent_id,
                conversation.created_at,
                conversation.locale,
                rows.dump(list(conversation.handled_tools)),
            ),
        )

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return rows.conversation(row) if row else None

    async def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        self._db.execute(
            "UPDATE conversations SET handled_tools = ? WHERE id = ?",
            (rows.dump(list(tools)), conversation_id),
        )

    # ---- messages ------------------------------------------------------------------------

    async def add_message(self, message: StoredMessage) -> None:
        self._db.execute(
            "INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls,"
            " tool_call_id, tool_name, interrupted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.message_values(message),
        )

    async def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        return list(self._history(conversation_id))  # the read a run's start and claim make

    # ---- events --------------------------------------------------------------------------

    def _next_seqs(self, conversation_id: str, n: int, fence: tuple[str, str] | None) -> int:
        """In a transaction: check the fence (``LeaseLost`` if the lease is gone), then take
        the conversation's next ``n`` sequence numbers; returns the last of them."""
        if (
            fence is not None
            and fence not in self._let_go
            and not self._db.execute(
                "SELECT 1 FROM leases WHERE key = ? AND owner = ?", fence
            ).fetchone()
        ):
            raise LeaseLost(*fence)
        # An UPDATE and a read, not RETURNING: SQLite's RETURNING costs more than the read.
        self._db.execute(
            "UPDATE conversations SET last_seq = last_seq + ? WHERE id = ?", (n, conversation_id)
        )
        row = self._db.execute(
            "SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        assert row is not None, f"no conversation {conversation_id}"
        return int(row[0])

    async def append_event(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event:
        name, encoded = encode(event)
        async with self.transaction():
            seq = self._next_seqs(conversation_id, 1, fence)
            self._db.execute(
                "INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, ?, ?)",
                (conversation_id, seq, name, encoded),
            )
        return Event(conversation_id, seq, name, encoded)

    async def append_events(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]:
        if len(events) <= 1:
            return [await self.append_event(conversation_id, e, fence=fence) for e in events]
        encoded = [encode(event) for event in events]
        async with self.transaction():
            # One fence check, one seq bump and one INSERT for the lot (a step's first text
            # is two events: issue 9, the resumed run's first text).
            first = self._next_seqs(conversation_id, len(events), fence) - len(events) + 1
            stored = [
                Event(conversation_id, first + n, name, data)
                for n, (name, data) in enumerate(encoded)
            ]
            self._db.executemany(
                "INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, ?, ?)",
                [(conversation_id, e.seq, e.name, e.encoded) for e in stored],
            )
        return stored

    async def events_after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        found = self._db.execute(
            "SELECT seq, type, data FROM events WHERE conversation_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (conversation_id, seq, limit),
        )
        return [stored_event(conversation_id, r["seq"], r["type"], r["data"]) for r in found]

    async def last_seq(self, conversation_id: str) -> int:
        row = self._db.execute(
            "SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return int(row[0]) if row else 0
