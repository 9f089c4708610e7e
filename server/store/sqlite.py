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
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from server.errors import LeaseLost, StoreError
from server.protocol.events import ProtocolEvent, encode
from server.protocol.frames import Event, stored_event
from server.store import rows
from server.store.checkpoints import Checkpointer
from server.store.definitions import Definitions
from server.store.migrations import pending
from server.store.records import (
    OPEN_STATES,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
)
from server.store.sqlite_calls import CallTables
from server.store.sqlite_console import ConsoleTables
from server.store.sqlite_coordination import Coordination
from server.store.sqlite_schema import MIGRATIONS
from server.store.sqlite_surfaces import SurfaceTables

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


# A waiting run none of whose current step's calls is open, claimed (running).
CLAIM_READY_RUN = f"""
UPDATE runs SET status = 'running'
WHERE id = ? AND status = 'waiting' AND NOT EXISTS (
    SELECT 1 FROM calls c WHERE c.run_id = runs.id AND c.step = runs.step
    AND c.state IN ({",".join("?" * len(OPEN_STATES))}))
RETURNING *
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


class SQLiteStore(CallTables, ConsoleTables, SurfaceTables, Coordination):
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
        self._writer = asyncio.Lock()
        self._definitions = Definitions()
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

    async def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        found = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return [rows.message(r) for r in found]

    # ---- runs ----------------------------------------------------------------------------

    async def create_run(self, run: Run) -> None:
        digest = self._definitions.digest(run)
        # A definition already there is not written again: a lookup, no write (the
        # transaction may roll back, so this process does not skip it by memory).
        self._db.execute(
            "INSERT OR IGNORE INTO agent_definitions (digest, definition) VALUES (?, ?)",
            (digest, self._definitions.text(digest, run.agent)),
        )
        self._db.execute(
            "INSERT INTO runs (id, conversation_id, agent_digest, status, step, error, simulate)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run.id, run.conversation_id, digest, run.status, run.step, None, int(run.simulate)),
        )

    async def lock_conversation(self, conversation_id: str) -> None:
        pass  # a transaction holds the whole file

    async def create_run_alone(
        self, run: Run, lease: tuple[str, str, float]
    ) -> tuple[str, RunStatus] | None:
        busy = self._db.execute(
            "SELECT id, status FROM runs WHERE conversation_id = ?"
            " AND status IN ('running', 'waiting') ORDER BY pos DESC LIMIT 1",
            (run.conversation_id,),
        ).fetchone()
        if busy is not None:
            return busy[0], RunStatus(busy[1])
        await self.create_run(run)
        self._db.execute("INSERT INTO leases (key, owner, until) VALUES (?, ?, ?)", lease)
        return None

    def _runs(self, found: Iterable[Any]) -> list[Run]:
        """Rows to runs, each with the agent definition its digest names."""
        found = list(found)
        agents, missing = self._definitions.known(r["agent_digest"] for r in found)
        if missing:
            marks = ",".join("?" * len(missing))
            for digest, text in self._db.execute(
                f"SELECT digest, definition FROM agent_definitions WHERE digest IN ({marks})",
                missing,
            ):
                agents[digest] = self._definitions.learn(digest, text)
        return [rows.run(r, agents[r["agent_digest"]]) for r in found]

    def _run_or_none(self, found: Iterable[Any]) -> Run | None:
        runs = self._runs(found)
        return runs[0] if runs else None

    async def get_run(self, run_id: str) -> Run | None:
        return self._run_or_none(self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)))

    async def latest_run(self, conversation_id: str) -> Run | None:
        return self._run_or_none(
            self._db.execute(
                "SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos DESC LIMIT 1",
                (conversation_id,),
            )
        )

    async def list_runs(self, conversation_id: str) -> list[Run]:
        found = self._db.execute(
            "SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return self._runs(found)

    async def runs_with_status(self, status: RunStatus) -> list[Run]:
        found = self._db.execute("SELECT * FROM runs WHERE status = ? ORDER BY pos", (status,))
        return self._runs(found)

    async def update_run(self, run_id: str, **changes: Any) -> None:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = ?" for k in encoded)
        self._db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*encoded.values(), run_id))

    async def update_run_leased(
        self, run_id: str, lease: tuple[str, str], *, until: float | None = None, **changes: Any
    ) -> bool:
        key, owner = lease
        if until is None:
            held = await self.release_lease(key, owner)
        else:
            held = await self.keep_lease(key, owner, until)
        if held:
            await self.update_run(run_id, **changes)
        return held

    async def claim_run(
        self, run_id: str, from_status: RunStatus, to_status: RunStatus
    ) -> Run | None:
        found = self._db.execute(
            "UPDATE runs SET status = ? WHERE id = ? AND status = ? RETURNING *",
            (to_status, run_id, from_status),
        ).fetchall()  # all: the UPDATE completes only once its RETURNING rows are read
        return self._run_or_none(found)

    async def claim_ready_run(
        self, run_id: str, key: str, owner: str, until: float, now: float
    ) -> Run | None:
        # Two statements, and nothing decoded but the claimed run: the claim is on the way
        # from a step's last answer to the next step's first text (issue 9).
        async with self.transaction():
            found = self._db.execute(CLAIM_READY_RUN, (run_id, *_OPEN)).fetchall()
            if not found:
                return None
            if not await self.take_lease(key, owner, until, now):
                # Another process holds the run: the claim goes back (nobody saw it: the
                # transaction holds the file).
                await self.claim_run(run_id, RunStatus.RUNNING, RunStatus.WAITING)
                return None
            return self._runs(found)[0]

    async def stalled_runs(self) -> list[Run]:
        found = self._db.execute(STALLED_RUNS, (*_OPEN,))
        return self._runs(found)

    # ---- events --------------------------------------------------------------------------

    async def append_event(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event:
        name, encoded = encode(event)
        async with self.transaction():
            if (
                fence is not None
                and not self._db.execute(
                    "SELECT 1 FROM leases WHERE key = ? AND owner = ?", fence
                ).fetchone()
            ):
                raise LeaseLost(*fence)
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

    async def append_events(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]:
        async with self.transaction():
            return [await self.append_event(conversation_id, e, fence=fence) for e in events]

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
