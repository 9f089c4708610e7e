"""The SQLite store: one file, zero set-up, safe across a SIGKILL (WAL journal).

One connection, used from the event loop's thread only: every statement is short, and a
single writer makes ``transition_call``'s conditional UPDATE the whole story of atomicity.
One process per file: a second process on the same file is refused at start (issue 10:
two processes on one file re-ran each other's steps and served each other's streams
nowhere). Several processes share a PostgreSQL store instead.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from server.errors import StoreError
from server.protocol.events import ProtocolEvent, encode
from server.protocol.frames import Event, stored_event
from server.store import rows
from server.store.checkpoints import Checkpointer
from server.store.migrations import Migration, pending
from server.store.records import (
    OPEN_STATES,
    Call,
    CallState,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
)
from server.store.sqlite_console import CONSOLE_SCHEMA, ConsoleTables
from server.store.sqlite_surfaces import (
    SURFACE_STREAMS_SCHEMA,
    SURFACES_SCHEMA,
    SurfaceTables,
)

MIGRATIONS = (
    # Version 1 is the schema from before migrations existed; IF NOT EXISTS adopts such files.
    Migration(1, "initial", """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, created_at REAL NOT NULL,
    locale TEXT NOT NULL DEFAULT '', handled_tools TEXT NOT NULL DEFAULT '[]',
    last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,
    text TEXT NOT NULL, tool_calls TEXT NOT NULL, tool_call_id TEXT, tool_name TEXT
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, pos);
CREATE TABLE IF NOT EXISTS runs (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, agent TEXT NOT NULL, status TEXT NOT NULL,
    step INTEGER NOT NULL, error TEXT, simulate INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_conversation ON runs (conversation_id, pos);
CREATE TABLE IF NOT EXISTS calls (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    tool_name TEXT NOT NULL, state TEXT NOT NULL, input TEXT NOT NULL, arguments TEXT NOT NULL,
    deadline REAL NOT NULL, route TEXT NOT NULL, outcome TEXT, delivered INTEGER NOT NULL,
    extra TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_by_run ON calls (run_id, step);
CREATE INDEX IF NOT EXISTS calls_open ON calls (state, deadline);
CREATE TABLE IF NOT EXISTS grants (
    conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL, call_id TEXT NOT NULL,
    PRIMARY KEY (conversation_id, tool_name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
"""),
    Migration(2, "leases", """
CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, until REAL NOT NULL)
    WITHOUT ROWID;
CREATE INDEX leases_by_until ON leases (until);
CREATE INDEX runs_by_status ON runs (status);
"""),
    # The console's tables (issue 11); IF NOT EXISTS adopts files made before migrations.
    # Changing them later means a new migration here, not an edit of CONSOLE_SCHEMA.
    Migration(3, "console", CONSOLE_SCHEMA),
    # Issue 7: single-use stream tickets, and a table /healthz writes to (and rolls back).
    Migration(4, "tickets", """
CREATE TABLE stream_tickets (nonce TEXT PRIMARY KEY, expires_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE probe (at REAL);
"""),
    # Issue 8: text streamed before a run failed is kept, marked as interrupted.
    Migration(5, "interrupted messages", """
ALTER TABLE messages ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;
"""),
    Migration(6, "surfaces", SURFACES_SCHEMA),
    # Issue 7: session generations (a resumed conversation refuses its older tokens).
    Migration(7, "session generations", """
ALTER TABLE conversations ADD COLUMN session_generation INTEGER NOT NULL DEFAULT 0;
"""),
    # Issue 9: surfaces' streams counted per process, dropped when a process dies.
    Migration(8, "surface streams", SURFACE_STREAMS_SCHEMA),
)  # fmt: skip

_OPEN = tuple(s.value for s in OPEN_STATES)
# Runs no process works on although they could move: running with no lease (the process
# died between claiming and leasing, or before leases existed), or waiting with every call
# of the step settled (the process died between settling the last call and resuming).
STALLED_RUNS = f"""
SELECT r.* FROM runs r
WHERE r.status IN ('running', 'waiting')
  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = 'run:' || r.id)
  AND (r.status = 'running' OR NOT EXISTS (
      SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.step = r.step
      AND c.state IN ({",".join("?" * len(OPEN_STATES))})))
ORDER BY r.pos
"""


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


class SQLiteStore(ConsoleTables, SurfaceTables):
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
        self._depth = 0
        self._migrate()
        self._checkpointer: Checkpointer | None = None
        if serving:
            # We hold the file alone: every lease in it belongs to a process that is gone.
            self._db.execute("UPDATE leases SET until = 0")
            # Checkpoints run in a thread of their own, not inside a request's COMMIT
            # (server/store/checkpoints.py says why, and why durability is unchanged).
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

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")
        finally:
            self._depth = 0

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._db.close()  # the last connection to close checkpoints what is left
        if self._lock is not None:
            self._lock.close()

    def rotate_session(self, conversation_id: str, generation: int) -> bool:
        cursor = self._db.execute(
            "UPDATE conversations SET session_generation = session_generation + 1"
            " WHERE id = ? AND session_generation = ?",
            (conversation_id, generation),
        )
        return cursor.rowcount == 1

    def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        with self.transaction():
            self._db.execute("DELETE FROM stream_tickets WHERE expires_at < ?", (now,))
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO stream_tickets (nonce, expires_at) VALUES (?, ?)",
                (nonce, expires_at),
            )
        return cursor.rowcount == 1

    def probe_write(self) -> None:
        """Write and roll back one row: raises ``sqlite3.Error`` when writes would fail
        (read-only file or directory, full disk, a lock held past the busy timeout)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("INSERT INTO probe (at) VALUES (julianday('now'))")
        finally:
            self._db.execute("ROLLBACK")

    # ---- conversations -------------------------------------------------------------------

    def create_conversation(self, conversation: Conversation) -> None:
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

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return rows.conversation(row) if row else None

    def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        self._db.execute(
            "UPDATE conversations SET handled_tools = ? WHERE id = ?",
            (rows.dump(list(tools)), conversation_id),
        )

    # ---- messages ------------------------------------------------------------------------

    def add_message(self, message: StoredMessage) -> None:
        self._db.execute(
            "INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls,"
            " tool_call_id, tool_name, interrupted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message.id,
                message.conversation_id,
                message.run_id,
                message.role,
                message.text,
                rows.dump(list(message.tool_calls)),
                message.tool_call_id,
                message.tool_name,
                int(message.interrupted),
            ),
        )

    def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        found = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return [rows.message(r) for r in found]

    # ---- runs ----------------------------------------------------------------------------

    def create_run(self, run: Run) -> None:
        self._db.execute(
            "INSERT INTO runs (id, conversation_id, agent, status, step, error, simulate)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run.id,
                run.conversation_id,
                rows.dump(run.agent),
                run.status,
                run.step,
                None,
                int(run.simulate),
            ),
        )

    def get_run(self, run_id: str) -> Run | None:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return rows.run(row) if row else None

    def latest_run(self, conversation_id: str) -> Run | None:
        row = self._db.execute(
            "SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
        return rows.run(row) if row else None

    def list_runs(self, conversation_id: str) -> list[Run]:
        found = self._db.execute(
            "SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return [rows.run(r) for r in found]

    def runs_with_status(self, status: RunStatus) -> list[Run]:
        found = self._db.execute("SELECT * FROM runs WHERE status = ? ORDER BY pos", (status,))
        return [rows.run(r) for r in found]

    def update_run(self, run_id: str, **changes: Any) -> None:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = ?" for k in encoded)
        self._db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*encoded.values(), run_id))

    def claim_run(self, run_id: str, from_status: RunStatus, to_status: RunStatus) -> bool:
        cursor = self._db.execute(
            "UPDATE runs SET status = ? WHERE id = ? AND status = ?",
            (to_status, run_id, from_status),
        )
        return cursor.rowcount == 1

    def stalled_runs(self) -> list[Run]:
        found = self._db.execute(STALLED_RUNS, (*_OPEN,))
        return [rows.run(r) for r in found]

    # ---- calls ---------------------------------------------------------------------------

    def add_call(self, call: Call) -> None:
        self._db.execute(
            "INSERT INTO calls (id, conversation_id, run_id, step, tool_name, state, input,"
            " arguments, deadline, route, outcome, delivered, extra, surface_id, assignment)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                call.id,
                call.conversation_id,
                call.run_id,
                call.step,
                call.tool_name,
                call.state,
                rows.dump(call.input),
                call.arguments,
                call.deadline,
                call.route,
                rows.dump(call.outcome) if call.outcome is not None else None,
                int(call.delivered),
                rows.dump(call.extra),
                call.surface_id,
                call.assignment,
            ),
        )

    def get_call(self, call_id: str) -> Call | None:
        row = self._db.execute("SELECT * FROM calls WHERE id = ?", (call_id,)).fetchone()
        return rows.call(row) if row else None

    def list_calls(self, conversation_id: str) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return [rows.call(r) for r in found]

    def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE run_id = ? AND step = ? ORDER BY pos", (run_id, step)
        )
        return [rows.call(r) for r in found]

    def due_calls(self, now: float) -> list[Call]:
        marks = ",".join("?" * len(OPEN_STATES))
        found = self._db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) AND deadline <= ? ORDER BY deadline",
            (*OPEN_STATES, now),
        )
        return [rows.call(r) for r in found]

    def count_calls(self, run_id: str, tool_name: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM calls WHERE run_id = ? AND tool_name = ?", (run_id, tool_name)
        ).fetchone()
        return int(row[0])

    def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        wanted = list(states)
        marks = ",".join("?" * len(wanted))
        found = self._db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) ORDER BY pos", wanted
        )
        return [rows.call(r) for r in found]

    def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO grants (conversation_id, tool_name, call_id) VALUES (?, ?, ?)",
            (conversation_id, tool_name, call_id),
        )

    def has_grant(self, conversation_id: str, tool_name: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM grants WHERE conversation_id = ? AND tool_name = ?",
            (conversation_id, tool_name),
        ).fetchone()
        return row is not None

    def transition_call(
        self,
        call_id: str,
        from_states: Iterable[CallState],
        to_state: CallState,
        *,
        assigned: tuple[str | None, int] | None = None,
        **changes: Any,
    ) -> bool:
        encoded = rows.call_changes(changes)
        states = list(from_states)
        marks = ",".join("?" * len(states))
        assignments = "".join(f", {k} = ?" for k in encoded)
        condition, extra_args = "", []
        if assigned is not None:
            condition, extra_args = " AND surface_id IS ? AND assignment = ?", list(assigned)
        cursor = self._db.execute(
            f"UPDATE calls SET state = ?{assignments} WHERE id = ? AND state IN ({marks})"
            + condition,
            (to_state, *encoded.values(), call_id, *states, *extra_args),
        )
        return cursor.rowcount == 1

    # ---- leases (server/leases.py) ---------------------------------------------------------

    def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        cursor = self._db.execute(
            "INSERT INTO leases (key, owner, until) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until"
            " WHERE leases.owner = excluded.owner OR leases.until < ?",
            (key, owner, until, now),
        )
        return cursor.rowcount == 1

    def keep_lease(self, key: str, owner: str, until: float) -> bool:
        cursor = self._db.execute(
            "UPDATE leases SET until = ? WHERE key = ? AND owner = ?", (until, key, owner)
        )
        return cursor.rowcount == 1

    def renew_leases(self, owner: str, until: float) -> int:
        cursor = self._db.execute("UPDATE leases SET until = ? WHERE owner = ?", (until, owner))
        return cursor.rowcount

    def release_lease(self, key: str, owner: str) -> bool:
        cursor = self._db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))
        return cursor.rowcount == 1

    def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = self._db.execute(
            "SELECT key FROM leases WHERE until < ? AND owner <> ? ORDER BY until",
            (now, other_than),
        )
        return [r[0] for r in found]

    def try_singleton(self, name: str) -> bool:
        return True  # one process per file (see _lock)

    # ---- events --------------------------------------------------------------------------

    def append_event(self, conversation_id: str, event: ProtocolEvent) -> Event:
        name, encoded = encode(event)
        with self.transaction():
            row = self._db.execute(
                "UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq",
                (conversation_id,),
            ).fetchone()
            assert row is not None, f"no conversation {conversation_id}"
            seq = row[0]
            self._db.execute(
                "INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, ?, ?)",
                (conversation_id, seq, name, encoded),
            )
        return Event(conversation_id, seq, name, encoded)

    def events_after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        found = self._db.execute(
            "SELECT seq, type, data FROM events WHERE conversation_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (conversation_id, seq, limit),
        )
        return [stored_event(conversation_id, r["seq"], r["type"], r["data"]) for r in found]

    def last_seq(self, conversation_id: str) -> int:
        row = self._db.execute(
            "SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return int(row[0]) if row else 0
