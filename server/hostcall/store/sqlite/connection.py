"""What every part of the SQLite store shares: its one connection, and the transaction.

``SQLiteStore`` (database.py) opens the connection and builds each aggregate's part
(conversations.py, events.py, calls.py, runs.py, surfaces.py, coordination.py, console.py,
…), an object that sends its statements through the one ``SQLiteConnection`` it is given.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import AbstractAsyncContextManager
from typing import Any

from hostcall.store import rows
from hostcall.store.health import WriteHealth
from hostcall.store.records import StoredMessage
from hostcall.store.statements import SQLITE as SQL
from hostcall.store.statements import window_skip


class SQLiteConnection:
    """What every part of ``SQLiteStore`` shares, one object: the file's connection, the
    transaction, and what the open transaction knows."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        # One writer at a time (and ``probe_write``, which must not cut into a transaction).
        self.writer = asyncio.Lock()
        # The last write the file refused (a full disk, a read-only file): /healthz says so.
        self._health = WriteHealth()
        # The task whose transaction is open (its nested transactions join it).
        self.owner: asyncio.Task[Any] | None = None
        # Leases (key, owner) the open transaction released while they were held (a run's
        # end before its last events): the transaction holds the file, so nobody took them
        # since, and its fenced appends pass (see runs.py, update_run_leased).
        self.let_go: set[tuple[str, str]] = set()

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    def executemany(self, sql: str, params: Any) -> sqlite3.Cursor:
        return self.connection.executemany(sql, params)

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """One BEGIN IMMEDIATE ... COMMIT. Statements never suspend the task (sqlite3 is
        called directly: a local file, microseconds a statement), so a transaction is
        normally never interleaved with another task's; the lock keeps it that way if a
        caller awaits something else inside one. Nested calls from the same task join it."""
        return _Transaction(self)

    def refused_write(self) -> str | None:
        return self._health.refused()

    def connection_waiters(self) -> int:
        return 0

    def history(self, conversation_id: str, turns: int | None) -> tuple[StoredMessage, ...]:
        """The conversation's messages, oldest first, of its last ``turns`` turns (None: all):
        a step's history (see ``ClaimedRun``): the current branch's."""
        if turns is None:
            return rows.messages(self.execute(SQL.current_messages, (conversation_id,)))
        values = (conversation_id, conversation_id, window_skip(turns))
        return rows.messages(self.execute(SQL.recent_messages, values))


class _Transaction:
    """``SQLiteConnection.transaction``: a class rather than a generator, as it is entered
    three times or more on every answer's round trip (a generator's context manager costs
    twice the calls). On an error the transaction rolls back; a statement the file refused
    (a full disk, a read-only file) is what ``/healthz`` reports."""

    __slots__ = ("changes", "db", "joined")

    def __init__(self, db: SQLiteConnection) -> None:
        self.db = db
        self.joined = False
        self.changes = 0

    async def __aenter__(self) -> None:
        db = self.db
        task = asyncio.current_task()
        if db.owner is task and task is not None:
            self.joined = True
            return
        await db.writer.acquire()
        try:
            db.connection.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            db.writer.release()
            if isinstance(exc, sqlite3.Error):
                db._health.failed(exc)
            raise
        self.changes = db.connection.total_changes
        db.owner = task

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if self.joined:
            return
        db = self.db
        connection = db.connection
        try:
            try:
                if error is None:
                    connection.execute("COMMIT")
                # SQLite rolls back by itself after some errors (SQLITE_FULL): a ROLLBACK
                # then would raise, hiding why the transaction failed.
                elif connection.in_transaction:
                    connection.execute("ROLLBACK")
            finally:
                db.owner = None
                db.let_go.clear()
                db.writer.release()
        except sqlite3.Error as exc:
            db._health.failed(exc)
            raise
        if isinstance(error, sqlite3.Error):
            db._health.failed(error)
        elif error is None and connection.total_changes > self.changes:
            db._health.committed()  # a write went through, not just a COMMIT


class Part:
    """One aggregate's statements, on the store's shared ``SQLiteConnection``."""

    def __init__(self, db: SQLiteConnection) -> None:
        self.db = db
