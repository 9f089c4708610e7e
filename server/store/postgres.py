"""The PostgreSQL store: several processes (and machines) share conversations.

The same interface and semantics as ``SQLiteStore``, on a pool of async psycopg
connections (server/store/postgres_connections.py: no round trip blocks the event loop).
What keeps processes apart:

- a call leaves a state once: ``transition_call`` is a conditional UPDATE, and under READ
  COMMITTED a concurrent UPDATE of the same row waits, then re-checks the state;
- event numbers have no gap: ``append_event`` increments the conversation's ``last_seq``
  under its row lock, held to commit, so commits of one conversation happen in seq order;
- a transaction's (or a lone statement's) first event of a conversation NOTIFYs
  ``hostcall_events`` with ``"<conversation> <seq> <origin>"`` (``origin``: the appending
  store's ``origin``), delivered at commit (dropped on rollback); server/relay.py wakes
  other processes' streams with it, and they read that event and the ones after it;
- leases (server/leases.py) are rows; the sweeper's turn is an advisory lock.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

import psycopg

from server.store import rows
from server.store.migrations import pending
from server.store.postgres_connections import POOL_MAX, connect, redacted
from server.store.postgres_console import PostgresConsoleTables
from server.store.postgres_coordination import LOCK_KEY, Coordination
from server.store.postgres_events import EventLog
from server.store.postgres_schema import MIGRATIONS
from server.store.postgres_surfaces import SurfaceTables
from server.store.records import (
    OPEN_STATES,
    Call,
    CallState,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
)

# How often consume_ticket forgets expired tickets.
TICKET_PRUNE_SECONDS = 30.0


_OPEN = [s.value for s in OPEN_STATES]
# See sqlite.py's STALLED_RUNS for what "stalled" means.
STALLED_RUNS = """
SELECT r.* FROM runs r
WHERE r.status IN ('running', 'waiting')
  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = 'run:' || r.id)
  AND (r.status = 'running' OR NOT EXISTS (
      SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.step = r.step AND c.state = ANY(%s)))
ORDER BY r.pos
"""


# claim_ready_run in one statement (one round trip where it took four): the lease is taken
# only for a ready run, and the run claimed only with the lease. A concurrent claimer's
# INSERT waits for this one to commit, then finds a live lease that is not its own.
CLAIM_READY_RUN = """
WITH ready AS (
    SELECT r.id FROM runs r
    WHERE r.id = %(run)s AND r.status = %(waiting)s AND NOT EXISTS (
        SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.step = r.step AND c.state = ANY(%(open)s))
), taken AS (
    INSERT INTO leases (key, owner, until) SELECT %(key)s, %(owner)s, %(until)s FROM ready
    ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until
    WHERE leases.owner = excluded.owner OR leases.until < %(now)s
    RETURNING key
), claimed AS (
    UPDATE runs SET status = %(running)s
    WHERE id = %(run)s AND status = %(waiting)s AND EXISTS (SELECT 1 FROM taken)
    RETURNING *
)
SELECT EXISTS (SELECT 1 FROM taken) AS took, claimed.* FROM (SELECT 1) AS one
LEFT JOIN claimed ON TRUE
"""


class PostgresStore(PostgresConsoleTables, SurfaceTables, Coordination, EventLog):
    def __init__(self, url: str, *, pool_max: int = POOL_MAX) -> None:
        super().__init__(url, pool_max=pool_max)
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

    async def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        if now - self._tickets_pruned > TICKET_PRUNE_SECONDS:
            # Housekeeping, not the check: an expired ticket is refused by its signature's
            # age before it gets here. Once in a while, not a table scan per stream.
            self._tickets_pruned = now
            await self._run("DELETE FROM stream_tickets WHERE expires_at < %s", (now,))
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
        await self._run(
            "INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls,"
            " tool_call_id, tool_name, interrupted) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                message.id,
                message.conversation_id,
                message.run_id,
                message.role,
                message.text,
                rows.dump(list(message.tool_calls)),
                message.tool_call_id,
                message.tool_name,
                message.interrupted,
            ),
        )

    async def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        found = await self._all(
            "SELECT * FROM messages WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.message(r) for r in found]

    # ---- runs ----------------------------------------------------------------------------

    async def create_run(self, run: Run) -> None:
        await self._run(
            "INSERT INTO runs (id, conversation_id, agent, status, step, error, simulate)"
            " VALUES (%s, %s, %s, %s, %s, NULL, %s)",
            (run.id, run.conversation_id, rows.dump(run.agent), run.status, run.step, run.simulate),
        )

    async def get_run(self, run_id: str) -> Run | None:
        row = await self._one("SELECT * FROM runs WHERE id = %s", (run_id,))
        return rows.run(row) if row else None

    async def latest_run(self, conversation_id: str, *, locking: bool = False) -> Run | None:
        if locking:
            # Its own statement, before the read: a statement that waited for the lock
            # reads the runs as they were when it began (READ COMMITTED re-checks only the
            # locked row), so a run committed meanwhile would go unseen (measured: two
            # messages at once both started a run).
            await self._one(
                "SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,)
            )
        row = await self._one(
            "SELECT * FROM runs WHERE conversation_id = %s ORDER BY pos DESC LIMIT 1",
            (conversation_id,),
        )
        return rows.run(row) if row else None

    async def list_runs(self, conversation_id: str) -> list[Run]:
        found = await self._all(
            "SELECT * FROM runs WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.run(r) for r in found]

    async def runs_with_status(self, status: RunStatus) -> list[Run]:
        found = await self._all("SELECT * FROM runs WHERE status = %s ORDER BY pos", (status,))
        return [rows.run(r) for r in found]

    async def update_run(self, run_id: str, **changes: Any) -> None:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = %s" for k in encoded)
        await self._run(
            f"UPDATE runs SET {assignments} WHERE id = %s",
            (*encoded.values(), run_id),
        )

    async def update_run_leased(
        self, run_id: str, lease: tuple[str, str], *, until: float | None = None, **changes: Any
    ) -> bool:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = %s" for k in encoded)
        # One statement where there were two (issue 10): the lease row's change takes its
        # lock, held to commit, as DELETE or UPDATE alone did; the run changes only with it.
        if until is None:
            held, lease_args = "DELETE FROM leases WHERE key = %s AND owner = %s", [*lease]
        else:
            held, lease_args = (
                "UPDATE leases SET until = %s WHERE key = %s AND owner = %s",
                [until, *lease],
            )
        row = await self._one(
            f"WITH held AS ({held} RETURNING 1), changed AS ("
            f"UPDATE runs SET {assignments} WHERE id = %s AND EXISTS (SELECT 1 FROM held))"
            " SELECT COUNT(*) AS n FROM held",
            (*lease_args, *encoded.values(), run_id),
        )
        return row is not None and row["n"] == 1

    async def claim_run(
        self, run_id: str, from_status: RunStatus, to_status: RunStatus
    ) -> Run | None:
        row = await self._one(
            "UPDATE runs SET status = %s WHERE id = %s AND status = %s RETURNING *",
            (to_status, run_id, from_status),
        )
        return rows.run(row) if row else None

    async def claim_ready_run(
        self, run_id: str, key: str, owner: str, until: float, now: float
    ) -> Run | None:
        row = await self._one(
            CLAIM_READY_RUN,
            {
                "run": run_id,
                "key": key,
                "owner": owner,
                "until": until,
                "now": now,
                "open": _OPEN,
                "waiting": RunStatus.WAITING.value,
                "running": RunStatus.RUNNING.value,
            },
        )
        assert row is not None  # the statement always returns its one row
        if row["id"] is not None:
            return rows.run(row)
        if row["took"]:
            # The run moved on between the statement's read and its update (another process
            # claimed and ran it meanwhile): the lease taken for it goes back.
            await self.release_lease(key, owner)
        return None

    async def stalled_runs(self) -> list[Run]:
        return [rows.run(r) for r in await self._all(STALLED_RUNS, (_OPEN,))]

    # ---- calls ---------------------------------------------------------------------------

    async def add_call(self, call: Call) -> None:
        await self._run(
            "INSERT INTO calls (id, conversation_id, run_id, step, tool_name, state, input,"
            " arguments, deadline, route, outcome, delivered, extra, surface_id, assignment)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
                call.delivered,
                rows.dump(call.extra),
                call.surface_id,
                call.assignment,
            ),
        )

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
            "SELECT * FROM calls WHERE state = ANY(%s) AND deadline <= %s ORDER BY deadline",
            (_OPEN, now),
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
            "SELECT * FROM calls WHERE state = ANY(%s) ORDER BY pos", ([s.value for s in states],)
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
            f"UPDATE calls SET state = %s{assignments} WHERE id = %s AND state = ANY(%s)"
            + condition
            + " RETURNING *",
            (to_state, *encoded.values(), call_id, [s.value for s in from_states], *extra_args),
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
        )
        return row is not None
