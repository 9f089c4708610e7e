"""The SQLite store: one file, zero set-up, safe across a SIGKILL (WAL journal).

One connection, used from the event loop's thread only: every statement is short, and a
single writer makes ``transition_call``'s conditional UPDATE the whole story of atomicity.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from server.protocol import Event, EventType
from server.store.records import (
    OPEN_STATES,
    Call,
    CallState,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
    Surface,
)
from server.store.sqlite_console import CONSOLE_SCHEMA, ConsoleTables, dump

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS surfaces (
    conversation_id TEXT NOT NULL, id TEXT NOT NULL, tools TEXT NOT NULL DEFAULT '[]',
    last_active REAL NOT NULL, streams INTEGER NOT NULL DEFAULT 0, detached_at REAL,
    left_page INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
"""


_dump = dump


class SQLiteStore(ConsoleTables):
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a transaction spans
        # exactly the writes of one engine decision.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process kill (not a power cut), at a fraction of
        # FULL's cost per commit.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)
        self._db.executescript(CONSOLE_SCHEMA)
        self._migrate()
        self._depth = 0

    def _migrate(self) -> None:
        """Columns added after a database was first created (issue 9: surfaces)."""
        have = {row["name"] for row in self._db.execute("PRAGMA table_info(calls)")}
        for column, ddl in (
            ("surface_id", "ALTER TABLE calls ADD COLUMN surface_id TEXT"),
            ("assignment", "ALTER TABLE calls ADD COLUMN assignment INTEGER NOT NULL DEFAULT 0"),
        ):
            if column not in have:
                self._db.execute(ddl)

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
        self._db.close()

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
                _dump(list(conversation.handled_tools)),
            ),
        )

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            return None
        return Conversation(
            id=row["id"],
            agent_id=row["agent_id"],
            created_at=row["created_at"],
            locale=row["locale"],
            handled_tools=tuple(json.loads(row["handled_tools"])),
        )

    def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        self._db.execute(
            "UPDATE conversations SET handled_tools = ? WHERE id = ?",
            (_dump(list(tools)), conversation_id),
        )

    # ---- messages ------------------------------------------------------------------------

    def add_message(self, message: StoredMessage) -> None:
        self._db.execute(
            "INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls,"
            " tool_call_id, tool_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message.id,
                message.conversation_id,
                message.run_id,
                message.role,
                message.text,
                _dump(list(message.tool_calls)),
                message.tool_call_id,
                message.tool_name,
            ),
        )

    def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        ).fetchall()
        return [
            StoredMessage(
                id=r["id"],
                conversation_id=r["conversation_id"],
                run_id=r["run_id"],
                role=r["role"],
                text=r["text"],
                tool_calls=tuple(json.loads(r["tool_calls"])),
                tool_call_id=r["tool_call_id"],
                tool_name=r["tool_name"],
            )
            for r in rows
        ]

    # ---- runs ----------------------------------------------------------------------------

    def create_run(self, run: Run) -> None:
        self._db.execute(
            "INSERT INTO runs (id, conversation_id, agent, status, step, error, simulate)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run.id,
                run.conversation_id,
                _dump(run.agent),
                run.status,
                run.step,
                None,
                int(run.simulate),
            ),
        )

    def _run(self, row: sqlite3.Row | None) -> Run | None:
        if row is None:
            return None
        return Run(
            id=row["id"],
            conversation_id=row["conversation_id"],
            agent=json.loads(row["agent"]),
            status=RunStatus(row["status"]),
            step=row["step"],
            error=json.loads(row["error"]) if row["error"] else None,
            simulate=bool(row["simulate"]),
        )

    def get_run(self, run_id: str) -> Run | None:
        return self._run(self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())

    def latest_run(self, conversation_id: str) -> Run | None:
        row = self._db.execute(
            "SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
        return self._run(row)

    def runs_with_status(self, status: RunStatus) -> list[Run]:
        rows = self._db.execute("SELECT * FROM runs WHERE status = ? ORDER BY pos", (status,))
        return [run for row in rows if (run := self._run(row)) is not None]

    def update_run(self, run_id: str, **changes: Any) -> None:
        allowed = {"status", "step", "error"}
        assert set(changes) <= allowed, f"unknown run fields: {set(changes) - allowed}"
        values = [_dump(v) if k == "error" else v for k, v in changes.items()]
        assignments = ", ".join(f"{k} = ?" for k in changes)
        self._db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values, run_id))

    def claim_run(self, run_id: str, from_status: RunStatus, to_status: RunStatus) -> bool:
        cursor = self._db.execute(
            "UPDATE runs SET status = ? WHERE id = ? AND status = ?",
            (to_status, run_id, from_status),
        )
        return cursor.rowcount == 1

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
                _dump(call.input),
                call.arguments,
                call.deadline,
                call.route,
                _dump(call.outcome) if call.outcome is not None else None,
                int(call.delivered),
                _dump(call.extra),
                call.surface_id,
                call.assignment,
            ),
        )

    @staticmethod
    def _call(row: sqlite3.Row) -> Call:
        return Call(
            id=row["id"],
            conversation_id=row["conversation_id"],
            run_id=row["run_id"],
            step=row["step"],
            tool_name=row["tool_name"],
            state=CallState(row["state"]),
            input=json.loads(row["input"]),
            arguments=row["arguments"],
            deadline=row["deadline"],
            route=row["route"],
            outcome=json.loads(row["outcome"]) if row["outcome"] else None,
            delivered=bool(row["delivered"]),
            extra=json.loads(row["extra"]),
            surface_id=row["surface_id"],
            assignment=row["assignment"],
        )

    def get_call(self, call_id: str) -> Call | None:
        row = self._db.execute("SELECT * FROM calls WHERE id = ?", (call_id,)).fetchone()
        return self._call(row) if row else None

    def list_calls(self, conversation_id: str) -> list[Call]:
        rows = self._db.execute(
            "SELECT * FROM calls WHERE conversation_id = ? ORDER BY pos", (conversation_id,)
        )
        return [self._call(r) for r in rows]

    def calls_of_step(self, run_id: str, step: int) -> list[Call]:
        rows = self._db.execute(
            "SELECT * FROM calls WHERE run_id = ? AND step = ? ORDER BY pos", (run_id, step)
        )
        return [self._call(r) for r in rows]

    def due_calls(self, now: float) -> list[Call]:
        marks = ",".join("?" * len(OPEN_STATES))
        rows = self._db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) AND deadline <= ? ORDER BY deadline",
            (*OPEN_STATES, now),
        )
        return [self._call(r) for r in rows]

    def count_calls(self, run_id: str, tool_name: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM calls WHERE run_id = ? AND tool_name = ?", (run_id, tool_name)
        ).fetchone()
        return int(row[0])

    def calls_in_states(self, states: Iterable[CallState]) -> list[Call]:
        wanted = list(states)
        marks = ",".join("?" * len(wanted))
        rows = self._db.execute(
            f"SELECT * FROM calls WHERE state IN ({marks}) ORDER BY pos", wanted
        )
        return [self._call(r) for r in rows]

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
        allowed = {
            "input", "deadline", "route", "outcome", "delivered", "extra", "surface_id",
            "assignment",
        }  # fmt: skip
        assert set(changes) <= allowed, f"unknown call fields: {set(changes) - allowed}"
        encoded = {
            k: (_dump(v) if k in ("input", "outcome", "extra") else v) for k, v in changes.items()
        }
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

    # ---- surfaces ------------------------------------------------------------------------

    def _ensure_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        # A new surface starts detached "now": present for the grace period until its
        # stream attaches (the widget says what it handles before it opens the stream).
        self._db.execute(
            "INSERT OR IGNORE INTO surfaces (conversation_id, id, last_active, detached_at)"
            " VALUES (?, ?, ?, ?)",
            (conversation_id, surface_id, now, now),
        )

    def save_surface_tools(
        self, conversation_id: str, surface_id: str, tools: tuple[str, ...], now: float
    ) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self._db.execute(
            "UPDATE surfaces SET tools = ? WHERE conversation_id = ? AND id = ?",
            (_dump(list(tools)), conversation_id, surface_id),
        )

    def attach_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self._db.execute(
            "UPDATE surfaces SET streams = streams + 1, detached_at = NULL, last_active = ?"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    def detach_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        self._db.execute(
            "UPDATE surfaces SET streams = MAX(streams - 1, 0),"
            " detached_at = CASE WHEN streams <= 1 THEN ? ELSE detached_at END"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    def leave_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self._db.execute(
            "UPDATE surfaces SET left_page = 1, detached_at = ?"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    def touch_surface(self, conversation_id: str, surface_id: str, now: float) -> None:
        self._ensure_surface(conversation_id, surface_id, now)
        self._db.execute(
            "UPDATE surfaces SET last_active = MAX(last_active, ?)"
            " WHERE conversation_id = ? AND id = ?",
            (now, conversation_id, surface_id),
        )

    @staticmethod
    def _surface(row: sqlite3.Row) -> Surface:
        return Surface(
            id=row["id"],
            conversation_id=row["conversation_id"],
            tools=tuple(json.loads(row["tools"])),
            last_active=row["last_active"],
            streams=row["streams"],
            detached_at=row["detached_at"],
            left=bool(row["left_page"]),
        )

    def get_surface(self, conversation_id: str, surface_id: str) -> Surface | None:
        row = self._db.execute(
            "SELECT * FROM surfaces WHERE conversation_id = ? AND id = ?",
            (conversation_id, surface_id),
        ).fetchone()
        return self._surface(row) if row else None

    def list_surfaces(self, conversation_id: str) -> list[Surface]:
        rows = self._db.execute(
            "SELECT * FROM surfaces WHERE conversation_id = ? ORDER BY last_active DESC",
            (conversation_id,),
        )
        return [self._surface(r) for r in rows]

    def reset_surfaces(self, now: float) -> None:
        self._db.execute(
            "UPDATE surfaces SET streams = 0, detached_at = ? WHERE streams > 0", (now,)
        )

    # ---- events --------------------------------------------------------------------------

    def append_event(self, conversation_id: str, type: EventType, data: dict[str, Any]) -> Event:
        with self.transaction():
            row = self._db.execute(
                "UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq",
                (conversation_id,),
            ).fetchone()
            assert row is not None, f"no conversation {conversation_id}"
            seq = row[0]
            self._db.execute(
                "INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, ?, ?)",
                (conversation_id, seq, type.value, _dump(data)),
            )
        return Event(conversation_id=conversation_id, seq=seq, type=type, data=data)

    def events_after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        rows = self._db.execute(
            "SELECT seq, type, data FROM events WHERE conversation_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (conversation_id, seq, limit),
        )
        return [
            Event(conversation_id, r["seq"], EventType(r["type"]), json.loads(r["data"]))
            for r in rows
        ]

    def last_seq(self, conversation_id: str) -> int:
        row = self._db.execute(
            "SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return int(row[0]) if row else 0
