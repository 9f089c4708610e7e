"""The PostgreSQL store: several processes (and machines) share conversations.

The same interface and semantics as ``SQLiteStore``, on a pool of async psycopg
connections (hostcall/store/postgres/connections.py: no round trip blocks the event loop).
What keeps processes apart:

- a call leaves a state once: ``transition_call`` is a conditional UPDATE, and under READ
  COMMITTED a concurrent UPDATE of the same row waits, then re-checks the state;
- event numbers have no gap: ``append_event`` increments the conversation's ``last_seq``
  under its row lock, held to commit, so commits of one conversation happen in seq order;
- a transaction's (or a lone statement's) first event of a conversation NOTIFYs
  ``hostcall_events`` with ``"<conversation> <seq> <origin>"`` (``origin``: the appending
  store's ``origin``), delivered at commit (dropped on rollback); hostcall/relay.py wakes
  other processes' streams with it, and they read that event and the ones after it;
- leases (hostcall/leases.py) are rows; so is the sweeper's turn (``try_singleton``).
"""

from __future__ import annotations

import secrets
from contextlib import AbstractAsyncContextManager

from hostcall.store.composed import ComposedStore
from hostcall.store.definitions import Definitions
from hostcall.store.interfaces import Database
from hostcall.store.migrations import pending
from hostcall.store.postgres.apps import AppTables
from hostcall.store.postgres.attachments import AttachmentTables
from hostcall.store.postgres.calls import CallTables
from hostcall.store.postgres.connections import (
    POOL_MAX,
    POOL_WAIT_SECONDS,
    PostgresConnections,
)
from hostcall.store.postgres.console import PostgresConsoleTables
from hostcall.store.postgres.conversations import ConversationTables
from hostcall.store.postgres.coordination import LOCK_KEY, Coordination
from hostcall.store.postgres.dialing import connect, redacted
from hostcall.store.postgres.erasure import ErasureTables
from hostcall.store.postgres.events import EventLog
from hostcall.store.postgres.people import PeopleTables
from hostcall.store.postgres.runs import RunTables
from hostcall.store.postgres.schema import MIGRATIONS
from hostcall.store.postgres.surfaces import SurfaceTables
from hostcall.store.postgres.usage import UsageTables
from hostcall.store.statements import POSTGRES as SQL


class PostgresStore(ComposedStore, Database):
    """Each aggregate's part (its statements) on one ``PostgresConnections`` (``db``: the
    pool and each task's pipelined transaction), composed (hostcall/store/composed.py)."""

    def __init__(
        self, url: str, *, pool_max: int = POOL_MAX, pool_wait: float = POOL_WAIT_SECONDS
    ) -> None:
        self.url = url
        self.db = db = PostgresConnections(url, pool_max=pool_max, pool_wait=pool_wait)
        self._migrate()
        # Names this process in its events' notifications: the relay skips its own, which
        # the journal publishes here after commit (reading them back cost a query each).
        self.origin = secrets.token_hex(8)
        self.events = events = EventLog(db, origin=self.origin)
        # What a transaction holds back goes out with its appends: the event log sends it.
        db.flush_with(events.send_held)
        self.conversations = ConversationTables(db)
        self.coordination = coordination = Coordination(db)
        self.runs = RunTables(db, definitions=Definitions(), leases=coordination)
        self.calls = CallTables(db)
        self.surfaces = SurfaceTables(db)
        self.console = PostgresConsoleTables(db)
        self.usage = UsageTables(db)
        self.erasure = ErasureTables(db)
        self.people = PeopleTables(db)
        self.attachments = AttachmentTables(db)
        self.apps = AppTables(db)

    # ---- Database ----------------------------------------------------------------------

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return self.db.transaction()

    def refused_write(self) -> str | None:
        return self.db.refused_write()

    def connection_waiters(self) -> int:
        return self.db.connection_waiters()

    def _migrate(self) -> None:
        # Before the event loop serves anything, on a connection of its own. A migration is
        # several statements in one string, which pipeline mode cannot send.
        with connect(self.url) as db, db.transaction():
            # Two processes starting together: one migrates, the other waits, then sees it.
            db.execute(f"SELECT pg_advisory_xact_lock({LOCK_KEY})", ("migrations",))
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            applied = [r["version"] for r in db.execute(SQL.applied_migrations)]
            for migration in pending(MIGRATIONS, applied, target=redacted(self.url)):
                db.execute(migration.sql)
                db.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )

    @property
    def schema_version(self) -> int:
        with connect(self.url) as db:
            row = db.execute(SQL.schema_version).fetchone()
        return int(row["v"] or 0) if row else 0

    async def close(self) -> None:
        await self.db.close_pool()

    def check_writable(self) -> None:
        with connect(self.url) as db:
            db.execute("BEGIN")
            try:
                db.execute("INSERT INTO probe (at) VALUES (0)")
            finally:
                db.execute("ROLLBACK")

    async def probe_write(self) -> None:
        """Write and roll back one row: raises when writes would fail (read-only
        transaction mode, a full disk, a lost connection)."""
        async with self.db.connection() as connection:
            await connection.execute("BEGIN")
            try:
                await connection.execute("INSERT INTO probe (at) VALUES (0)")
            finally:
                await connection.execute("ROLLBACK")
