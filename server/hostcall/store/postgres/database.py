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
- leases (hostcall/leases.py) are rows; the sweeper's turn is an advisory lock.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

import psycopg

from hostcall.store import rows
from hostcall.store.definitions import Definitions
from hostcall.store.migrations import pending
from hostcall.store.postgres import messages
from hostcall.store.postgres.connections import POOL_MAX, connect, redacted
from hostcall.store.postgres.console import PostgresConsoleTables
from hostcall.store.postgres.coordination import LOCK_KEY
from hostcall.store.postgres.events import EventLog
from hostcall.store.postgres.runs import RunTables
from hostcall.store.postgres.schema import MIGRATIONS
from hostcall.store.postgres.surfaces import SurfaceTables
from hostcall.store.records import (
    OPEN_STATES,
    Call,
    CallState,
    Conversation,
    OpenedStream,
    StoredMessage,
)

# How often consume_ticket forgets expired tickets.
TICKET_PRUNE_SECONDS = 30.0
# open_stream in one statement, where the conversation's read and the ticket's INSERT were
# two: the ticket goes in only for a conversation at the ticket's session generation.
OPEN_STREAM = """
WITH c AS (SELECT * FROM conversations WHERE id = %(cid)s), t AS (
    INSERT INTO stream_tickets (nonce, expires_at) SELECT %(nonce)s, %(until)s FROM c
    WHERE c.session_generation = %(generation)s ON CONFLICT (nonce) DO NOTHING RETURNING 1
)
SELECT c.*, EXISTS (SELECT 1 FROM t) AS redeemed FROM c
"""


_OPEN = rows.states_sql(OPEN_STATES)
_CALL_INSERT = (
    "INSERT INTO calls (id, conversation_id, run_id, step, tool_name, state, input,"
    " arguments, deadline, route, outcome, delivered, extra, surface_id, assignment)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


class PostgresStore(PostgresConsoleTables, SurfaceTables, RunTables, EventLog):
    def __init__(self, url: str, *, pool_max: int = POOL_MAX) -> None:
        super().__init__(url, pool_max=pool_max)
        self._definitions = Definitions()
        self._migrate()
        # The connection that holds this process's session-level advisory locks (the
        # sweeper's turn): pooled connections come and go, a lock must stay with one.
        self._session: psycopg.AsyncConnection[dict[str, Any]] | None = None
        self._singletons: set[str] = set()
        self._tickets_pruned = 0.0
        # Names this process in its events' notifications: the relay skips its own, which
        # the journal publishes here after commit (reading them back cost a query each).
        self.origin = secrets.token_hex(8)

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
            applied = [r["version"] for r in db.execute("SELECT version FROM schema_migrations")]
            for migration in pending(MIGRATIONS, applied, target=redacted(self.url)):
                db.execute(migration.sql)
                db.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )

    @property
    def schema_version(self) -> int:
        with connect(self.url) as db:
            row = db.execute("SELECT MAX(version) AS v FROM schema_migrations").fetchone()
        return int(row["v"] or 0) if row else 0

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await self._close_pool()

    async def rotate_session(self, conversation_id: str, generation: int) -> bool:
        changed = await self._count(
            "UPDATE conversations SET session_generation = session_generation + 1"
            " WHERE id = %s AND session_generation = %s",
            (conversation_id, generation),
        )
        return changed == 1

    async def _prune_tickets(self, now: float) -> None:
        if now - self._tickets_pruned > TICKET_PRUNE_SECONDS:
            # Housekeeping, not the check: an expired ticket is refused by its signature's
            # age before it gets here. Once in a while, not a table scan per stream.
            self._tickets_pruned = now
            await self._run("DELETE FROM stream_tickets WHERE expires_at < %s", (now,))

    async def open_stream(
        self, conversation_id: str, generation: int, nonce: str, expires_at: float, now: float
    ) -> OpenedStream:
        await self._prune_tickets(now)
        row = await self._one(
            OPEN_STREAM,
            {"cid": conversation_id, "generation": generation, "nonce": nonce, "until": expires_at},
        )
        if row is None:
            return OpenedStream(None, False)
        return OpenedStream(rows.conversation(row), bool(row["redeemed"]), int(row["last_seq"]))

    async def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        await self._prune_tickets(now)
        changed = await self._count(
            "INSERT INTO stream_tickets (nonce, expires_at) VALUES (%s, %s)"
            " ON CONFLICT (nonce) DO NOTHING",
            (nonce, expires_at),
        )
        return changed == 1

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
        async with self._connection() as connection:
            await connection.execute("BEGIN")
            try:
                await connection.execute("INSERT INTO probe (at) VALUES (0)")
            finally:
                await connection.execute("ROLLBACK")

    # ---- conversations -------------------------------------------------------------------

    async def create_conversation(self, conversation: Conversation) -> None:
        await self._run(
            "INSERT INTO conversations (id, agent_id, created_at, locale, handled_tools)"
            " VALUES (%s, %s, %s, %s, %s)",
            (
                conversation.id,
                conversation.agent_id,
                conversation.created_at,
                conversation.locale,
                rows.dump(list(conversation.handled_tools)),
            ),
        )

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        row = await self._one("SELECT * FROM conversations WHERE id = %s", (conversation_id,))
        return rows.conversation(row) if row else None

    async def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        await self._run(
            "UPDATE conversations SET handled_tools = %s WHERE id = %s",
            (rows.dump(list(tools)), conversation_id),
        )

    # ---- messages ------------------------------------------------------------------------

    async def add_message(self, message: StoredMessage) -> None:
        current = self._current()
        if current is not None:
            # Held: it goes out with the transaction's next append of its conversation, or
            # before its next read of messages or COMMIT (hostcall/store/postgres/messages.py).
            current.messages.append(rows.message_values(message))
            return
        await self._run(messages.INSERT_ONE, rows.message_values(message))

    async def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        found = await self._all(
            "SELECT * FROM messages WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.message(r) for r in found]

    # ---- calls ---------------------------------------------------------------------------

    async def add_call(self, call: Call) -> None:
        values = rows.call_values(call)
        current = self._current()
        if current is not None:
            # Held: it goes out inside the transaction's next statement (a step's: its
            # flush at COMMIT, with the step's events and the run's end).
            await self._hold(current, "calls", f"{{p}}call AS ({_CALL_INSERT})", values)
            return
        await self._run(_CALL_INSERT, values)

    async def get_call(self, call_id: str) -> Call | None:
        row = await self._one("SELECT * FROM calls WHERE id = %s", (call_id,))
        return rows.call(row) if row else None

    async def list_calls(self, conversation_id: str) -> list[Call]:
        found = await self._all(
            "SELECT * FROM calls WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.call(r) for r in found]

    async def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        found = await self._all(
            "SELECT * FROM calls WHERE run_id = %s AND step = %s ORDER BY pos", (run_id, step)
        )
        return [rows.call(r) for r in found]

    async def due_calls(self, now: float) -> list[Call]:
        found = await self._all(
            f"SELECT * FROM calls WHERE state IN {_OPEN} AND deadline <= %s ORDER BY deadline",
            (now,),
        )
        return [rows.call(r) for r in found]

    async def count_calls(self, run_id: str, tool_name: str) -> int:
        row = await self._one(
            "SELECT COUNT(*) AS n FROM calls WHERE run_id = %s AND tool_name = %s",
            (run_id, tool_name),
        )
        return int(row["n"]) if row else 0

    async def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        found = await self._all(
            f"SELECT * FROM calls WHERE state IN {rows.states_sql(states)} ORDER BY pos"
        )
        return [rows.call(r) for r in found]

    async def transition_call(
        self,
        call_id: str,
        from_states: Iterable[CallState],
        to_state: CallState,
        *,
        assigned: tuple[str | None, int] | None = None,
        **changes: Any,
    ) -> Call | None:
        encoded = rows.call_changes(changes)
        assignments = "".join(f", {k} = %s" for k in encoded)
        condition, extra_args = "", []
        if assigned is not None:
            condition = " AND surface_id IS NOT DISTINCT FROM %s AND assignment = %s"
            extra_args = list(assigned)
        row = await self._one(
            f"UPDATE calls SET state = %s{assignments} WHERE id = %s"
            f" AND state IN {rows.states_sql(from_states)}" + condition + " RETURNING *",
            (to_state, *encoded.values(), call_id, *extra_args),
            sees_appends=False,
        )
        return rows.call(row) if row else None

    # ---- grants --------------------------------------------------------------------------

    async def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None:
        await self._run(
            "INSERT INTO grants (conversation_id, tool_name, call_id) VALUES (%s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (conversation_id, tool_name, call_id),
        )

    async def has_grant(self, conversation_id: str, tool_name: str) -> bool:
        row = await self._one(
            "SELECT 1 FROM grants WHERE conversation_id = %s AND tool_name = %s",
            (conversation_id, tool_name),
            sees_appends=False,
        )
        return row is not None
