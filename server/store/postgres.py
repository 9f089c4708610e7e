"""The PostgreSQL store: several processes (and machines) share conversations.

The same interface and semantics as ``SQLiteStore``, on one synchronous psycopg connection
per process, used from the event loop's thread (the store interface is synchronous; each
statement is a short round trip, as each SQLite statement is a short write). What keeps
processes apart:

- a call leaves a state once: ``transition_call`` is a conditional UPDATE, and under READ
  COMMITTED a concurrent UPDATE of the same row waits, then re-checks the state;
- event numbers have no gap: ``append_event`` increments the conversation's ``last_seq``
  under its row lock, held to commit, so commits of one conversation happen in seq order;
- every event NOTIFYs ``hostcall_events`` with ``"<conversation> <seq>"``, delivered at
  commit (dropped on rollback); server/relay.py wakes other processes' streams with it;
- leases (server/leases.py) are rows; the sweeper's turn is an advisory lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from server.errors import StoreError
from server.protocol.events import ProtocolEvent, encode
from server.protocol.frames import Event, stored_event
from server.store import rows
from server.store.migrations import Migration, pending
from server.store.postgres_console import CONSOLE_SCHEMA, PostgresConsoleTables
from server.store.postgres_surfaces import (
    SURFACE_STREAMS_SCHEMA,
    SURFACES_SCHEMA,
    SurfaceTables,
)
from server.store.records import (
    OPEN_STATES,
    Call,
    CallState,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
)

CHANNEL = "hostcall_events"
# Advisory locks are per database, not per schema: the key includes the schema, so two
# Hostcall installations in two schemas of one database do not share a sweeper.
_LOCK_KEY = "hashtext('hostcall:' || current_schema() || ':' || %s)"

MIGRATIONS = (
    Migration(1, "initial", """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    locale TEXT NOT NULL DEFAULT '', handled_tools TEXT NOT NULL DEFAULT '[]',
    last_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE messages (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,
    text TEXT NOT NULL, tool_calls TEXT NOT NULL, tool_call_id TEXT, tool_name TEXT
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, pos);
CREATE TABLE runs (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, agent TEXT NOT NULL, status TEXT NOT NULL,
    step INTEGER NOT NULL, error TEXT, simulate BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX runs_by_conversation ON runs (conversation_id, pos);
CREATE INDEX runs_by_status ON runs (status);
CREATE TABLE calls (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    tool_name TEXT NOT NULL, state TEXT NOT NULL, input TEXT NOT NULL, arguments TEXT NOT NULL,
    deadline DOUBLE PRECISION NOT NULL, route TEXT NOT NULL, outcome TEXT,
    delivered BOOLEAN NOT NULL, extra TEXT NOT NULL
);
CREATE INDEX calls_by_run ON calls (run_id, step);
CREATE INDEX calls_open ON calls (state, deadline);
CREATE TABLE grants (
    conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL, call_id TEXT NOT NULL,
    PRIMARY KEY (conversation_id, tool_name)
);
CREATE TABLE events (
    conversation_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, until DOUBLE PRECISION NOT NULL);
CREATE INDEX leases_by_until ON leases (until);
"""),
    Migration(2, "console", CONSOLE_SCHEMA),
    # Issue 7: single-use stream tickets, and a table /healthz writes to (and rolls back).
    Migration(3, "tickets", """
CREATE TABLE stream_tickets (nonce TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL);
CREATE TABLE probe (at DOUBLE PRECISION);
"""),
    # Issue 8: text streamed before a run failed is kept, marked as interrupted.
    Migration(4, "interrupted messages", """
ALTER TABLE messages ADD COLUMN interrupted BOOLEAN NOT NULL DEFAULT FALSE;
"""),
    Migration(5, "surfaces", SURFACES_SCHEMA),
    # Issue 7: session generations (a resumed conversation refuses its older tokens).
    Migration(6, "session generations", """
ALTER TABLE conversations ADD COLUMN session_generation BIGINT NOT NULL DEFAULT 0;
"""),
    # Issue 9: surfaces' streams counted per process, dropped when a process dies.
    Migration(7, "surface streams", SURFACE_STREAMS_SCHEMA),
)  # fmt: skip

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
APPEND_EVENT = """
WITH next AS (
    UPDATE conversations SET last_seq = last_seq + 1 WHERE id = %(cid)s RETURNING last_seq
), added AS (
    INSERT INTO events (conversation_id, seq, type, data)
    SELECT %(cid)s, last_seq, %(type)s, %(data)s FROM next RETURNING seq
)
SELECT seq, pg_notify(%(channel)s, %(cid)s || ' ' || seq) FROM added
"""


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unparsable URL)"
    info.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in info.items() if v is not None)


def connect(url: str, **options: Any) -> psycopg.Connection[dict[str, Any]]:
    try:
        return psycopg.connect(url, autocommit=True, row_factory=dict_row, **options)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL ({redacted(url)}): {str(exc).strip()}",
            target=redacted(url),
        ) from None


class PostgresStore(PostgresConsoleTables, SurfaceTables):
    def __init__(self, url: str) -> None:
        self.url = url
        self._db = connect(url)
        self._depth = 0
        # The last seq this transaction appended per conversation (see append_event).
        self._appended: dict[str, int] = {}
        self._pipe: psycopg.Pipeline | None = None
        self._singletons: set[str] = set()
        self._migrate()

    def _migrate(self) -> None:
        # Not self.transaction(): a migration is several statements in one string, which
        # pipeline mode (one statement per query) cannot send.
        with self._db.transaction():
            # Two processes starting together: one migrates, the other waits, then sees it.
            self._db.execute(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})", ("migrations",))
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            applied = [
                r["version"] for r in self._db.execute("SELECT version FROM schema_migrations")
            ]
            for migration in pending(MIGRATIONS, applied, target=redacted(self.url)):
                self._db.execute(migration.sql)
                self._db.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT MAX(version) AS v FROM schema_migrations").fetchone()
        return int(row["v"] or 0) if row else 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction, in pipeline mode: statements whose results nobody reads (BEGIN,
        inserts, most event appends) go out without waiting for their answers, so a
        transaction costs a round trip per result read plus one for COMMIT, not one per
        statement. Errors still surface before the transaction ends (at COMMIT at the latest).
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._depth = 1
        self._appended = {}
        try:
            with self._db.pipeline() as pipe:
                self._pipe = pipe
                self._db.execute("BEGIN")
                yield
                self._db.execute("COMMIT")
        except BaseException:
            # An error aborts the pipeline: the statements after it, COMMIT included, were
            # skipped, and the transaction is still open (and failed). End it here.
            self._pipe = None
            if self._db.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    self._db.execute("ROLLBACK")
            raise
        finally:
            self._depth = 0
            self._appended = {}
            self._pipe = None

    def _changed(self, cursor: psycopg.Cursor[Any]) -> int:
        """Rows a statement changed; in a pipeline, waits for its answer first."""
        if self._pipe is not None:
            self._pipe.sync()
        return cursor.rowcount

    def close(self) -> None:
        self._db.close()

    def rotate_session(self, conversation_id: str, generation: int) -> bool:
        cursor = self._db.execute(
            "UPDATE conversations SET session_generation = session_generation + 1"
            " WHERE id = %s AND session_generation = %s",
            (conversation_id, generation),
        )
        return cursor.rowcount == 1

    def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        with self.transaction():
            self._db.execute("DELETE FROM stream_tickets WHERE expires_at < %s", (now,))
            cursor = self._db.execute(
                "INSERT INTO stream_tickets (nonce, expires_at) VALUES (%s, %s)"
                " ON CONFLICT (nonce) DO NOTHING",
                (nonce, expires_at),
            )
        return self._changed(cursor) == 1

    def probe_write(self) -> None:
        """Write and roll back one row: raises when writes would fail (read-only
        transaction mode, a full disk, a lost connection)."""
        self._db.execute("BEGIN")
        try:
            self._db.execute("INSERT INTO probe (at) VALUES (0)")
        finally:
            self._db.execute("ROLLBACK")

    # ---- conversations -------------------------------------------------------------------

    def create_conversation(self, conversation: Conversation) -> None:
        self._db.execute(
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

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id = %s", (conversation_id,)
        ).fetchone()
        return rows.conversation(row) if row else None

    def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        self._db.execute(
            "UPDATE conversations SET handled_tools = %s WHERE id = %s",
            (rows.dump(list(tools)), conversation_id),
        )

    # ---- messages ------------------------------------------------------------------------

    def add_message(self, message: StoredMessage) -> None:
        self._db.execute(
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

    def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        found = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.message(r) for r in found]

    # ---- runs ----------------------------------------------------------------------------

    def create_run(self, run: Run) -> None:
        self._db.execute(
            "INSERT INTO runs (id, conversation_id, agent, status, step, error, simulate)"
            " VALUES (%s, %s, %s, %s, %s, NULL, %s)",
            (run.id, run.conversation_id, rows.dump(run.agent), run.status, run.step, run.simulate),
        )

    def get_run(self, run_id: str) -> Run | None:
        row = self._db.execute("SELECT * FROM runs WHERE id = %s", (run_id,)).fetchone()
        return rows.run(row) if row else None

    def latest_run(self, conversation_id: str) -> Run | None:
        row = self._db.execute(
            "SELECT * FROM runs WHERE conversation_id = %s ORDER BY pos DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
        return rows.run(row) if row else None

    def list_runs(self, conversation_id: str) -> list[Run]:
        found = self._db.execute(
            "SELECT * FROM runs WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.run(r) for r in found]

    def runs_with_status(self, status: RunStatus) -> list[Run]:
        found = self._db.execute("SELECT * FROM runs WHERE status = %s ORDER BY pos", (status,))
        return [rows.run(r) for r in found]

    def update_run(self, run_id: str, **changes: Any) -> None:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = %s" for k in encoded)
        self._db.execute(
            f"UPDATE runs SET {assignments} WHERE id = %s",
            (*encoded.values(), run_id),
        )

    def claim_run(self, run_id: str, from_status: RunStatus, to_status: RunStatus) -> bool:
        cursor = self._db.execute(
            "UPDATE runs SET status = %s WHERE id = %s AND status = %s",
            (to_status, run_id, from_status),
        )
        return self._changed(cursor) == 1

    def stalled_runs(self) -> list[Run]:
        return [rows.run(r) for r in self._db.execute(STALLED_RUNS, (_OPEN,))]

    # ---- calls ---------------------------------------------------------------------------

    def add_call(self, call: Call) -> None:
        self._db.execute(
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

    def get_call(self, call_id: str) -> Call | None:
        row = self._db.execute("SELECT * FROM calls WHERE id = %s", (call_id,)).fetchone()
        return rows.call(row) if row else None

    def list_calls(self, conversation_id: str) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE conversation_id = %s ORDER BY pos", (conversation_id,)
        )
        return [rows.call(r) for r in found]

    def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE run_id = %s AND step = %s ORDER BY pos", (run_id, step)
        )
        return [rows.call(r) for r in found]

    def due_calls(self, now: float) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE state = ANY(%s) AND deadline <= %s ORDER BY deadline",
            (_OPEN, now),
        )
        return [rows.call(r) for r in found]

    def count_calls(self, run_id: str, tool_name: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) AS n FROM calls WHERE run_id = %s AND tool_name = %s",
            (run_id, tool_name),
        ).fetchone()
        return int(row["n"]) if row else 0

    def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        found = self._db.execute(
            "SELECT * FROM calls WHERE state = ANY(%s) ORDER BY pos", ([s.value for s in states],)
        )
        return [rows.call(r) for r in found]

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
        assignments = "".join(f", {k} = %s" for k in encoded)
        condition, extra_args = "", []
        if assigned is not None:
            condition = " AND surface_id IS NOT DISTINCT FROM %s AND assignment = %s"
            extra_args = list(assigned)
        cursor = self._db.execute(
            f"UPDATE calls SET state = %s{assignments} WHERE id = %s AND state = ANY(%s)"
            + condition,
            (to_state, *encoded.values(), call_id, [s.value for s in from_states], *extra_args),
        )
        return self._changed(cursor) == 1

    # ---- grants --------------------------------------------------------------------------

    def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None:
        self._db.execute(
            "INSERT INTO grants (conversation_id, tool_name, call_id) VALUES (%s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (conversation_id, tool_name, call_id),
        )

    def has_grant(self, conversation_id: str, tool_name: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM grants WHERE conversation_id = %s AND tool_name = %s",
            (conversation_id, tool_name),
        ).fetchone()
        return row is not None

    # ---- leases (server/leases.py) ---------------------------------------------------------

    def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        cursor = self._db.execute(
            "INSERT INTO leases (key, owner, until) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until"
            " WHERE leases.owner = excluded.owner OR leases.until < %s",
            (key, owner, until, now),
        )
        return self._changed(cursor) == 1

    def keep_lease(self, key: str, owner: str, until: float) -> bool:
        cursor = self._db.execute(
            "UPDATE leases SET until = %s WHERE key = %s AND owner = %s", (until, key, owner)
        )
        return self._changed(cursor) == 1

    def renew_leases(self, owner: str, until: float) -> int:
        cursor = self._db.execute("UPDATE leases SET until = %s WHERE owner = %s", (until, owner))
        return self._changed(cursor)

    def release_lease(self, key: str, owner: str) -> bool:
        cursor = self._db.execute("DELETE FROM leases WHERE key = %s AND owner = %s", (key, owner))
        return self._changed(cursor) == 1

    def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = self._db.execute(
            "SELECT key FROM leases WHERE until < %s AND owner <> %s ORDER BY until",
            (now, other_than),
        )
        return [r["key"] for r in found]

    def try_singleton(self, name: str) -> bool:
        """True while this process holds the cluster-wide turn ``name``.

        A session-level advisory lock: held until this connection ends, so a process that
        dies hands the turn over as soon as PostgreSQL notices its connection closed.
        """
        if name in self._singletons:
            return True
        row = self._db.execute(
            f"SELECT pg_try_advisory_lock({_LOCK_KEY}) AS got", (name,)
        ).fetchone()
        if row and row["got"]:
            self._singletons.add(name)
            return True
        return False

    # ---- events --------------------------------------------------------------------------

    def append_event(self, conversation_id: str, event: ProtocolEvent) -> Event:
        name, encoded = encode(event)
        params = {"cid": conversation_id, "type": name, "data": encoded, "channel": CHANNEL}
        previous = self._appended.get(conversation_id)
        if previous is not None:
            # This transaction already holds the conversation's row lock (taken by its first
            # append, held to commit): nobody else can number an event in between, so the
            # next seq is known and the statement need not wait for its answer.
            self._db.execute(APPEND_EVENT, params)
            seq = previous + 1
        else:
            row = self._db.execute(APPEND_EVENT, params).fetchone()
            assert row is not None, f"no conversation {conversation_id}"
            seq = int(row["seq"])
        if self._depth:
            self._appended[conversation_id] = seq
        return Event(conversation_id, seq, name, encoded)

    def events_after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        found = self._db.execute(
            "SELECT seq, type, data FROM events WHERE conversation_id = %s AND seq > %s"
            " ORDER BY seq LIMIT %s",
            (conversation_id, seq, limit),
        )
        return [stored_event(conversation_id, int(r["seq"]), r["type"], r["data"]) for r in found]

    def last_seq(self, conversation_id: str) -> int:
        row = self._db.execute(
            "SELECT last_seq FROM conversations WHERE id = %s", (conversation_id,)
        ).fetchone()
        return int(row["last_seq"]) if row else 0
