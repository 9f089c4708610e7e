"""The PostgreSQL store's coordination of processes: leases (hostcall/leases.py), the
cluster's one turn at a job (the sweeper, ``try_singleton``), and counters for the rate and
cost limits (hostcall/counters.py)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from hostcall.store.interfaces import Leases, QuotaCounters
from hostcall.store.postgres.connections import PostgresConnections
from hostcall.store.statements import POSTGRES as SQL

# Advisory locks are per database, not per schema: the key includes the schema, so two
# Hostcall installations in two schemas of one database do not share a sweeper.
LOCK_KEY = "hashtext('hostcall:' || current_schema() || ':' || %s)"
# The lease-renewal thread's statement (hostcall/leases.py), on a connection of its own.
RENEW_LEASES = SQL.renew_leases


class Coordination(PostgresConnections, Leases, QuotaCounters):
    # The connection that holds this process's session-level advisory locks (the
    # sweeper's turn): pooled connections come and go, a lock must stay with one.
    _session: psycopg.AsyncConnection[dict[str, Any]] | None = None
    _singletons: set[str]

    # ---- leases (hostcall/leases.py) ---------------------------------------------------------

    async def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        self._lease_written()
        return await self._count(SQL.take_lease, (key, owner, until, now)) == 1

    async def keep_lease(self, key: str, owner: str, until: float) -> bool:
        self._lease_written()
        return await self._count(SQL.keep_lease, (until, key, owner)) == 1

    async def renew_leases(self, owner: str, until: float) -> int:
        self._lease_written()
        return await self._count(SQL.renew_leases, (until, owner))

    async def release_lease(self, key: str, owner: str) -> bool:
        self._lease_written()
        return await self._count(SQL.release_lease, (key, owner)) == 1

    async def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = await self._all(SQL.expired_leases, (now, other_than))
        return [r["key"] for r in found]

    async def try_singleton(self, name: str) -> bool:
        """True while this process holds the cluster-wide turn ``name``.

        A session-level advisory lock: held until this connection ends, so a process that
        dies hands the turn over as soon as PostgreSQL notices its connection closed.
        """
        if name in self._singletons:
            if self._session is not None and not self._session.closed:
                return True
            self._singletons.clear()  # the connection dropped, and its locks with it
        if self._session is None or self._session.closed:
            self._session = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, row_factory=dict_row
            )
        cursor = await self._session.execute(
            f"SELECT pg_try_advisory_lock({LOCK_KEY}) AS got", (name,)
        )
        row = await cursor.fetchone()
        if row and row["got"]:
            self._singletons.add(name)
            return True
        return False

    # ---- counters (hostcall/counters.py) ------------------------------------------------

    async def add_to_counter(
        self, key: str, window: float, amount: int, *, limit: int | None = None
    ) -> bool:
        ceiling = 2**62 if limit is None else limit
        if amount > ceiling:
            return False
        return await self._count(SQL.add_to_counter, (key, window, amount, ceiling)) == 1

    async def counted(self, key: str, window: float) -> int:
        row = await self._one(SQL.counted, (key, window))
        return int(row["count"]) if row else 0
