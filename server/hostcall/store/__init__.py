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
    Attachments,
    Audit,
    CallApps,
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
    Attachments,
    CallApps,
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
    ``environ``: where HOSTCALL_DB_POOL_SIZE, HOSTCALL_DB_CONNECTIONS (with
    HOSTCALL_WORKERS) and HOSTCALL_DB_POOL_WAIT_SECONDS are read (PostgreSQL's pool,
    docs/deploy.md "Connections"); None: the defaults.
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
    if "pool_max" not in options and environ.get(BUDGET, "").strip():
        options["pool_max"] = pool_share(environ[BUDGET].strip(), environ.get(WORKERS, "1"))
    return options


# The connections one ``hostcall serve`` may open in all, shared by its workers
# (``--workers``, passed on to each as HOSTCALL_WORKERS); HOSTCALL_DB_POOL_SIZE, if set, sizes
# each worker's pool instead.
BUDGET = "HOSTCALL_DB_CONNECTIONS"
WORKERS = "HOSTCALL_WORKERS"
# What a process holds besides its pool: its LISTEN connection and its lease renewer's.
OWN_CONNECTIONS = 2


def pool_share(budget: str, workers: str) -> int:
    """Each worker's pool when ``budget`` connections are shared by ``workers`` processes:
    an equal share, less the two each holds of its own."""
    try:
        total, count = int(budget), int(workers)
    except ValueError:
        total, count = 0, 0
    share = total // count - OWN_CONNECTIONS if total > 0 and count > 0 else 0
    if share < 1:
        least = max(count, 1) * (OWN_CONNECTIONS + 1)
        raise StoreError(
            f"{BUDGET}={budget!r} with {WORKERS}={workers!r}: each worker needs "
            f"{OWN_CONNECTIONS + 1} connections at least (a pool of one, its LISTEN and its "
            f"lease renewal); give {least} or more",
            target=BUDGET,
        )
    return share
