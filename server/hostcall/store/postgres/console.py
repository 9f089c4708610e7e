"""The PostgreSQL store's console tables: users, audit log, agent versions.

The twin of sqlite/console.py: tests/unit/test_store_console.py runs against both stores.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hostcall.store import rows
from hostcall.store.console_records import AgentVersion, AuditEntry, ConsoleSession, User
from hostcall.store.interfaces import Accounts, AgentVersions, Audit
from hostcall.store.postgres.connections import Part
from hostcall.store.statements import POSTGRES as SQL

# Console sessions kept on the server (the twin of sqlite/console.py's).
SESSIONS_SCHEMA = """
CREATE TABLE console_sessions (
    digest TEXT PRIMARY KEY, user_name TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX console_sessions_by_user ON console_sessions (user_name);
"""

CONSOLE_SCHEMA = """
CREATE INDEX calls_by_conversation ON calls (conversation_id, state);
CREATE INDEX conversations_newest ON conversations (created_at DESC, id DESC);
CREATE TABLE users (
    name TEXT PRIMARY KEY, role TEXT NOT NULL, password_hash TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at DOUBLE PRECISION NOT NULL,
    actor TEXT NOT NULL, action TEXT NOT NULL, conversation_id TEXT, call_id TEXT,
    agent_id TEXT, details TEXT NOT NULL
);
CREATE INDEX audit_by_conversation ON audit (conversation_id, id);
CREATE TABLE agent_versions (
    agent_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, author TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, note TEXT NOT NULL,
    PRIMARY KEY (agent_id, version)
);
"""


class PostgresConsoleTables(Part, Accounts, Audit, AgentVersions):
    async def add_user(self, user: User) -> bool:
        changed = await self.db.count(
            "INSERT INTO users (name, role, password_hash, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (user.name, user.role, user.password_hash, user.created_at),
        )
        return changed == 1

    async def get_user(self, name: str) -> User | None:
        row = await self.db.one(SQL.user, (name,))
        return rows.user(row) if row else None

    async def list_users(self) -> list[User]:
        return [rows.user(r) for r in await self.db.all(SQL.users)]

    async def _change_user(self, name: str, sql: str, args: tuple[Any, ...]) -> bool:
        async with self.db.transaction():
            changed = await self.db.count(sql, args) == 1
            if changed:
                await self.db.run(SQL.end_user_sessions, (name,))
        return changed

    async def remove_user(self, name: str) -> bool:
        return await self._change_user(name, SQL.remove_user, (name,))

    async def set_user_role(self, name: str, role: str) -> bool:
        return await self._change_user(name, SQL.set_user_role, (role, name))

    async def set_user_password(self, name: str, password_hash: str) -> bool:
        return await self._change_user(name, SQL.set_user_password, (password_hash, name))

    async def add_session(self, session: ConsoleSession) -> None:
        async with self.db.transaction():
            await self.db.run(SQL.drop_expired_sessions, (session.created_at,))
            await self.db.run(
                SQL.insert_session,
                (session.digest, session.user, session.created_at, session.expires_at),
            )

    async def session_user(self, digest: str, now: float) -> str | None:
        row = await self.db.one(SQL.session_user, (digest, now))
        return str(row["user_name"]) if row else None

    async def end_session(self, digest: str) -> bool:
        return await self.db.count(SQL.end_session, (digest,)) == 1

    async def add_audit(self, entry: AuditEntry) -> AuditEntry:
        row = await self.db.one(f"{SQL.insert_audit} RETURNING id", rows.audit_values(entry))
        assert row is not None
        return replace(entry, id=int(row["id"]))

    async def note_audit(self, entry: AuditEntry) -> None:
        values = rows.audit_values(entry)
        current = self.db.current()
        if current is not None:
            # Held: it goes out inside the transaction's next statement (an answer's: the
            # settling UPDATE's), so the round trip pays no statement for it.
            await self.db.hold(current, "audit", f"{{p}}audit AS ({SQL.insert_audit})", values)
            return
        await self.db.run(SQL.insert_audit, values)

    async def list_audit(
        self,
        *,
        limit: int = 100,
        before: int | None = None,
        conversation_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[AuditEntry]:
        sql, args = SQL.audit_page(limit, before, conversation_id, agent_id)
        return [rows.audit_entry(r) for r in await self.db.all(sql, args)]

    async def add_agent_version(self, version: AgentVersion) -> AgentVersion:
        async with self.db.transaction():
            # Numbers per agent without gaps or repeats, across processes.
            await self.db.run("SELECT pg_advisory_xact_lock(hashtext(%s))", (version.agent_id,))
            row = await self.db.one(SQL.next_agent_version, (version.agent_id,))
            assert row is not None
            saved = replace(version, version=int(row["next"]))
            await self.db.run(
                SQL.insert_agent_version,
                (saved.agent_id, saved.version, saved.body, saved.author, saved.created_at,
                 saved.note),
            )  # fmt: skip
        return saved

    async def list_agent_versions(self, agent_id: str) -> list[AgentVersion]:
        return [rows.agent_version(r) for r in await self.db.all(SQL.agent_versions, (agent_id,))]

    async def get_agent_version(self, agent_id: str, version: int) -> AgentVersion | None:
        row = await self.db.one(SQL.agent_version, (agent_id, version))
        return rows.agent_version(row) if row else None
