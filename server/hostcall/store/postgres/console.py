"""The PostgreSQL store's console tables: users, audit log, agent versions.

The twin of sqlite/console.py: tests/unit/test_store_console.py runs against both stores.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hostcall.store import rows
from hostcall.store.interfaces import Accounts, AgentVersions, Audit
from hostcall.store.postgres.connections import PostgresConnections
from hostcall.store.records import AgentVersion, AuditEntry, User
from hostcall.store.statements import POSTGRES as SQL

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


def _user(row: dict[str, Any]) -> User:
    return User(row["name"], row["role"], row["password_hash"], row["created_at"])


def _version(row: dict[str, Any]) -> AgentVersion:
    return AgentVersion(
        agent_id=row["agent_id"],
        version=row["version"],
        body=row["body"],
        author=row["author"],
        created_at=row["created_at"],
        note=row["note"],
    )


class PostgresConsoleTables(PostgresConnections, Accounts, Audit, AgentVersions):
    async def add_user(self, user: User) -> bool:
        changed = await self._count(
            "INSERT INTO users (name, role, password_hash, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (user.name, user.role, user.password_hash, user.created_at),
        )
        return changed == 1

    async def get_user(self, name: str) -> User | None:
        row = await self._one(SQL.user, (name,))
        return _user(row) if row else None

    async def list_users(self) -> list[User]:
        return [_user(r) for r in await self._all(SQL.users)]

    async def add_audit(self, entry: AuditEntry) -> AuditEntry:
        row = await self._one(
            f"{SQL.insert_audit} RETURNING id",
            (entry.at, entry.actor, entry.action, entry.conversation_id, entry.call_id,
             entry.agent_id, rows.dump(entry.details)),
        )  # fmt: skip
        assert row is not None
        return replace(entry, id=int(row["id"]))

    async def list_audit(
        self,
        *,
        limit: int = 100,
        before: int | None = None,
        conversation_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[AuditEntry]:
        where, args = ["TRUE"], []
        for column, value in (("id <", before), ("conversation_id =", conversation_id),
                              ("agent_id =", agent_id)):  # fmt: skip
            if value is not None:
                where.append(f"{column} %s")
                args.append(value)
        found = await self._all(
            f"SELECT * FROM audit WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT %s",
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
                id=int(r["id"]),
            )
            for r in found
        ]

    async def add_agent_version(self, version: AgentVersion) -> AgentVersion:
        async with self.transaction():
            # Numbers per agent without gaps or repeats, across processes.
            await self._run("SELECT pg_advisory_xact_lock(hashtext(%s))", (version.agent_id,))
            row = await self._one(SQL.next_agent_version, (version.agent_id,))
            assert row is not None
            saved = replace(version, version=int(row["next"]))
            await self._run(
                SQL.insert_agent_version,
                (saved.agent_id, saved.version, saved.body, saved.author, saved.created_at,
                 saved.note),
            )  # fmt: skip
        return saved

    async def list_agent_versions(self, agent_id: str) -> list[AgentVersion]:
        return [_version(r) for r in await self._all(SQL.agent_versions, (agent_id,))]

    async def get_agent_version(self, agent_id: str, version: int) -> AgentVersion | None:
        row = await self._one(SQL.agent_version, (agent_id, version))
        return _version(row) if row else None
