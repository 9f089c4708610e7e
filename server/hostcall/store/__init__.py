"""The persistence layer. ``Store`` is every aggregate's interface at once
(hostcall/store/interfaces.py, one protocol per aggregate), for the wiring; ``open_store``
opens a dialect: ``SQLiteStore`` (hostcall/store/sqlite/) is the embedded default (one
process), ``PostgresStore`` (hostcall/store/postgres/) lets several processes share
conversations (docs/deploy.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from hostcall.store.interfaces import (
    Accounts,
    AgentVersions,
    Audit,
    Calls,
    Conversations,
    Database,
    Erasure,
    Events,
    Feedbacks,
    Handoffs,
    Leases,
    Messages,
    ModelUsage,
    QuotaCounters,
    Runs,
    Sessions,
    Surfaces,
)


class Store(
    Database,
    Conversations,
    Sessions,
    Messages,
    Runs,
    Calls,
    Surfaces,
    Events,
    Leases,
    QuotaCounters,
    Accounts,
    Audit,
    AgentVersions,
    ModelUsage,
    Erasure,
    Feedbacks,
    Handoffs,
    Protocol,
):
    """Every aggregate of the store, as one object: what the app's runtime holds."""


def is_database_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def open_store(target: str | Path, *, serving: bool = True) -> Store:
    """A PostgreSQL store for a ``postgresql://`` URL, else a SQLite store at that path.

    ``serving=False`` opens it for a short command run beside a server (see SQLiteStore).
    """
    if isinstance(target, str) and is_database_url(target):
        from hostcall.store.postgres import PostgresStore

        return PostgresStore(target)
    from hostcall.store.sqlite import SQLiteStore

    return SQLiteStore(target, serving=serving)
