"""What every part of the SQLite store shares: its one connection, and the transaction.

``SQLiteStore`` (database.py) opens the connection; each aggregate's part (conversations.py,
events.py, calls.py, runs.py, surfaces.py, coordination.py, console.py) sends its statements
on it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from hostcall.store import rows
from hostcall.store.health import WriteHealth
from hostcall.store.records import StoredMessage
from hostcall.store.statements import SQLITE as SQL
from hostcall.store.statements import window_skip


class SQLiteConnection:
    _db: sqlite3.Connection
    _writer: asyncio.Lock
    # The last write the file refused (a full disk, a read-only file): /healthz says so.
    _health: WriteHealth
    # The task whose transaction is open (its nested transactions join it).
    _owner: asyncio.Task[Any] | None
    # Leases (key, owner) the open transaction released while they were held (a run's
    # end before its last events): the transaction holds the file, so nobody took them
    # since, and its fenced appends pass (see runs.py, update_run_leased).
    _let_go: set[tuple[str, str]]

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
            try:
                self._db.execute("BEGIN IMMEDIATE")
                changes = self._db.total_changes
                self._owner = task
                try:
                    yield
                except BaseException:
                    # SQLite rolls back by itself after some errors (SQLITE_FULL): a
                    # ROLLBACK then would raise, hiding why the transaction failed.
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
                else:
                    self._db.execute("COMMIT")
                finally:
                    self._owner = None
                    self._let_go.clear()
            except sqlite3.Error as exc:
                self._health.failed(exc)
                raise
            if self._db.total_changes > changes:  # a write went through, not just a COMMIT
                self._health.committed()

    def refused_write(self) -> str | None:
        return self._health.refused()

    def connection_waiters(self) -> int:
        return 0

    def _history(self, conversation_id: str, turns: int | None) -> tuple[StoredMessage, ...]:
        """The conversation's messages, oldest first, of its last ``turns`` turns (None: all):
        a step's history (see ``ClaimedRun``): the current branch's."""
        if turns is None:
            return rows.messages(self._db.execute(SQL.current_messages, (conversation_id,)))
        values = (conversation_id, conversation_id, window_skip(turns))
        return rows.messages(self._db.execute(SQL.recent_messages, values))
