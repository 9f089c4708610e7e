"""The persistence layer. ``Store`` is every aggregate's interface at once
(hostcall/store/interfaces.py, one protocol per aggregate), for the wiring; ``open_store``
opens a dialect: ``SQLiteStore`` (hostcall/store/sqlite/) is the embedded default (one
process), ``PostgresStore`` (hostcall/store/postgres/) lets several processes share
conversations (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from hostcall.errors import StoreError
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


def open_store(
    target: str | Path, *, serving: bool = True, environ: Mapping[str, str] | None = None
) -> Store:
    """A PostgreSQL store for a ``postgresql://`` URL, else a SQLite store at that path.

    ``serving=False`` opens it for a short command run beside a server (see SQLiteStore).
    ``environ``: where HOSTCALL_DB_POOL_SIZE and HOSTCALL_DB_POOL_WAIT_SECONDS are read
    (PostgreSQL's pool, docs/operations.md); None: the defaults.
    """
    if isinstance(target, str) and is_database_url(target):
        from hostcall.store.postgres import PostgresStore

        return PostgresStore(target, **_pool_options(environ or {}))
    from hostcall.store.sqlite import SQLiteStore

    return SQLiteStore(target, serving=serving)


def _pool_options(environ: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, key, kind, least in (
        ("HOSTCALL_DB_POOL_SIZE", "pool_max", int, 1),
        ("HOSTCALL_DB_POOL_WAIT_SECONDS", "pool_wait", float, 0.01),
    ):
        raw = environ.get(name, "").strip()
        if not raw:
            continue
        try:
            value = kind(raw)
        except ValueError:
            value = None
        if value is None or value < least:
            raise StoreError(f"{name}={raw!r}: give a number, at least {least}", target=name)
        options[key] = value
    return options
