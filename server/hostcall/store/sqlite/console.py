"""The SQLite store's tables for the operator console (issue 11): users, audit, agent versions.

A mixin of ``SQLiteStore`` (it uses its connection and ``transaction()``), kept apart so each
module stays readable; the methods are specified on ``server.store.Store``.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

from hostcall.store.records import (
    AgentVersion,
    AuditEntry,
    Conversation,
    ConversationQuery,
    ConversationSummary,
    RunStatus,
    User,
)

CONSOLE_SCHEMA = """
CREATE INDEX IF NOT EXISTS calls_by_conversation ON calls (conversation_id, state);
CREATE INDEX IF NOT EXISTS conversations_newest ON conversations (created_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY, role TEXT NOT NULL, password_hash TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, actor TEXT NOT NULL,
    action TEXT NOT NULL, conversation_id TEXT, call_id TEXT, agent_id TEXT,
    details TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_conversation ON audit (conversation_id, id);
CREATE TABLE IF NOT EXISTS agent_versions (
    agent_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, author TEXT NOT NULL,
    created_at REAL NOT NULL, note TEXT NOT NULL,
    PRIMARY KEY (agent_id, version)
) WITHOUT ROWID;
"""

# A call waits for a person when it awaits a decision, or was sent to be answered by a form.
_WAITING = (
    "(k.state = 'awaiting_confirmation'"
    " OR (k.state IN ('dispatched', 'delivered') AND k.route = 'form'))"
)
_SUMMARY = f"""
SELECT c.*,
    (SELECT r.status FROM runs r WHERE r.conversation_id = c.id ORDER BY r.pos DESC LIMIT 1)
        AS run_status,
    (SELECT COUNT(*) FROM calls k WHERE k.conversation_id = c.id AND {_WAITING})
        AS waiting_calls,
    COALESCE((SELECT m.text FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user'
        ORDER BY m.pos LIMIT 1), '') AS first_message
FROM conversations c
"""


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _user(row: sqlite3.Row) -> User:
    return User(row["name"], row["role"], row["password_hash"], row["created_at"])


class ConsoleTables:
    _db: sqlite3.Connection

    def transaction(self) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError

    # ---- the operator console (issue 11) -------------------------------------------------

    async def add_user(self, user: User) -> bool:
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO users (name, role, password_hash, created_at)"
            " VALUES (?, ?, ?, ?)",
            (user.name, user.role, user.password_hash, user.created_at),
        )
        return cursor.rowcount == 1

    async def get_user(self, name: str) -> User | None:
        row = self._db.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        return _user(row) if row else None

    async def list_users(self) -> list[User]:
        rows = self._db.execute("SELECT * FROM users ORDER BY name")
        return [_user(r) for r in rows]

    async def add_audit(self, entry: AuditEntry) -> AuditEntry:
        cursor = self._db.execute(
            "INSERT INTO audit (at, actor, action, conversation_id, call_id, agent_id, details)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                entry.at,
                entry.actor,
                entry.action,
                entry.conversation_id,
                entry.call_id,
                entry.agent_id,
                dump(entry.details),
            ),
        )
        assert cursor.lastrowid is not None
        return replace(entry, id=cursor.lastrowid)

    async def list_audit(
        self,
        *,
        limit: int = 100,
        before: int | None = None,
        conversation_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[AuditEntry]:
        where, args = ["1 = 1"], []
        for column, value in (("id <", before), ("conversation_id =", conversation_id),
                              ("agent_id =", agent_id)):  # fmt: skip
            if value is not None:
                where.append(f"{column} ?")
                args.append(value)
        rows = self._db.execute(
            f"SELECT * FROM audit WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
            (*args, limit),
        )
        return [
            AuditEntry(
                at=r["at"],
                actor=r["actor"],
                action=r["action"],
                conversation_id=r["conversation_id"],
                call_id=r["call_id"],
                agent_id=r["agent_id"],
                details=json.loads(r["details"]),
                id=r["id"],
            )
            for r in rows
        ]

    async def list_conversations(self, query: ConversationQuery) -> list[ConversationSummary]:
        where, args = ["1 = 1"], []
        if query.agent_id is not None:
            where.append("agent_id = ?")
            args.append(query.agent_id)
        if query.run_status is not None:
            where.append("run_status = ?")
            args.append(query.run_status.value)
        if query.waiting:
            where.append("waiting_calls > 0")
        if query.text:
            where.append(
                "(id LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = s.id AND m.text LIKE ? ESCAPE '\\'))"
            )
            args += [_like(query.text)] * 2
        rows = self._db.execute(
            f"SELECT * FROM ({_SUMMARY}) s WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            (*args, query.limit, query.offset),
        )
        return [
            ConversationSummary(
                conversation=Conversation(
                    id=r["id"],
                    agent_id=r["agent_id"],
                    created_at=r["created_at"],
                    locale=r["locale"],
                    handled_tools=tuple(json.loads(r["handled_tools"])),
                ),
                run_status=RunStatus(r["run_status"]) if r["run_status"] else None,
                waiting_calls=int(r["waiting_calls"]),
                first_message=r["first_message"],
            )
            for r in rows
        ]

    async def add_agent_version(self, version: AgentVersion) -> AgentVersion:
        async with self.transaction():
            row = self._db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM agent_versions WHERE agent_id = ?",
                (version.agent_id,),
            ).fetchone()
            saved = replace(version, version=int(row[0]))
            self._db.execute(
                "INSERT INTO agent_versions (agent_id, version, body, author, created_at, note)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (saved.agent_id, saved.version, saved.body, saved.author, saved.created_at,
                 saved.note),
            )  # fmt: skip
        return saved

    @staticmethod
    def _version(row: sqlite3.Row) -> AgentVersion:
        return AgentVersion(
            agent_id=row["agent_id"],
            version=row["version"],
            body=row["body"],
            author=row["author"],
            created_at=row["created_at"],
            note=row["note"],
        )

    async def list_agent_versions(self, agent_id: str) -> list[AgentVersion]:
        rows = self._db.execute(
            "SELECT * FROM agent_versions WHERE agent_id = ? ORDER BY version DESC", (agent_id,)
        )
        return [self._version(r) for r in rows]

    async def get_agent_version(self, agent_id: str, version: int) -> AgentVersion | None:
        row = self._db.execute(
            "SELECT * FROM agent_versions WHERE agent_id = ? AND version = ?", (agent_id, version)
        ).fetchone()
        return self._version(row) if row else None
