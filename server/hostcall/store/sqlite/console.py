"""The SQLite store's tables for the operator console: users, audit, agent versions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hostcall.store import rows
from hostcall.store.console_records import AgentVersion, AuditEntry, ConsoleSession, User
from hostcall.store.interfaces import Accounts, AgentVersions, Audit
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL

# Console sessions kept on the server, so signing out (or a password or role change, or the
# removal of the user) ends a session even while its signed cookie is still valid.
SESSIONS_SCHEMA = """
CREATE TABLE console_sessions (
    digest TEXT PRIMARY KEY, user_name TEXT NOT NULL, created_at REAL NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX console_sessions_by_user ON console_sessions (user_name);
"""

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


class ConsoleTables(Part, Accounts, Audit, AgentVersions):
    async def add_user(self, user: User) -> bool:
        cursor = self.db.execute(
            "INSERT OR IGNORE INTO users (name, role, password_hash, created_at)"
            " VALUES (?, ?, ?, ?)",
            (user.name, user.role, user.password_hash, user.created_at),
        )
        return cursor.rowcount == 1

    async def get_user(self, name: str) -> User | None:
        row = self.db.execute(SQL.user, (name,)).fetchone()
        return rows.user(row) if row else None

    async def list_users(self) -> list[User]:
        return [rows.user(r) for r in self.db.execute(SQL.users)]

    async def _change_user(self, name: str, sql: str, args: tuple[Any, ...]) -> bool:
        async with self.db.transaction():
            changed = self.db.execute(sql, args).rowcount == 1
            if changed:
                self.db.execute(SQL.end_user_sessions, (name,))
        return changed

    async def remove_user(self, name: str) -> bool:
        return await self._change_user(name, SQL.remove_user, (name,))

    async def set_user_role(self, name: str, role: str) -> bool:
        return await self._change_user(name, SQL.set_user_role, (role, name))

    async def set_user_password(self, name: str, password_hash: str) -> bool:
        return await self._change_user(name, SQL.set_user_password, (password_hash, name))

    async def add_session(self, session: ConsoleSession) -> None:
        async with self.db.transaction():
            self.db.execute(SQL.drop_expired_sessions, (session.created_at,))
            self.db.execute(
                SQL.insert_session,
                (session.digest, session.user, session.created_at, session.expires_at),
            )

    async def session_user(self, digest: str, now: float) -> str | None:
        row = self.db.execute(SQL.session_user, (digest, now)).fetchone()
        return str(row[0]) if row else None

    async def end_session(self, digest: str) -> bool:
        cursor = self.db.execute(SQL.end_session, (digest,))
        return cursor.rowcount == 1

    async def add_audit(self, entry: AuditEntry) -> AuditEntry:
        cursor = self.db.execute(SQL.insert_audit, rows.audit_values(entry))
        assert cursor.lastrowid is not None
        return replace(entry, id=cursor.lastrowid)

    async def note_audit(self, entry: AuditEntry) -> None:
        self.db.execute(SQL.insert_audit, rows.audit_values(entry))

    async def list_audit(
        self,
        *,
        limit: int = 100,
        before: int | None = None,
        conversation_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[AuditEntry]:
        sql, args = SQL.audit_page(limit, before, conversation_id, agent_id)
        return [rows.audit_entry(r) for r in self.db.execute(sql, args)]

    async def add_agent_version(self, version: AgentVersion) -> AgentVersion:
        async with self.db.transaction():
            row = self.db.execute(SQL.next_agent_version, (version.agent_id,)).fetchone()
            saved = replace(version, version=int(row[0]))
            self.db.execute(
                SQL.insert_agent_version,
                (saved.agent_id, saved.version, saved.body, saved.author, saved.created_at,
                 saved.note),
            )  # fmt: skip
        return saved

    async def list_agent_versions(self, agent_id: str) -> list[AgentVersion]:
        found = self.db.execute(SQL.agent_versions, (agent_id,))
        return [rows.agent_version(r) for r in found]

    async def get_agent_version(self, agent_id: str, version: int) -> AgentVersion | None:
        row = self.db.execute(SQL.agent_version, (agent_id, version)).fetchone()
        return rows.agent_version(row) if row else None
