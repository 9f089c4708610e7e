"""The PostgreSQL store's coordination of processes: leases (hostcall/leases.py), the
cluster's one turn at a job (the sweeper, ``try_singleton``), and counters for the rate and
cost limits (hostcall/counters.py)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from hostcall.store.postgres.connections import PostgresConnections

# Advisory locks are per database, not per schema: the key includes the schema, so two
# Hostcall installations in two schemas of one database do not share a sweeper.
LOCK_KEY = "hashtext('hostcall:' || current_schema() || ':' || %s)"
RENEW_LEASES = "UPDATE leases SET until = %s WHERE owner = %s"
# One row per counter: a new window overwrites the old one's count (see add_to_counter).
ADD_TO_COUNTER = """
INSERT INTO quota_counters (key, window_start, count) VALUES (%s, %s, %s)
ON CONFLICT (key) DO UPDATE SET
    count = CASE WHEN quota_counters.window_start = excluded.window_start
                 THEN quota_counters.count + excluded.count ELSE excluded.count END,
    window_start = excluded.window_start
WHERE CASE WHEN quota_counters.window_start = excluded.window_start
           THEN quota_counters.count ELSE 0 END + excluded.count <= %s
"""


class Coordination(PostgresConnections):
    # The connection that holds this process's session-level advisory locks (the
    # sweeper's turn): pooled connections come and go, a lock must stay with one.
    _session: psycopg.AsyncConnection[dict[str, Any]] | None = None
    _singletons: set[str]

    # ---- leases (hostcall/leases.py) ---------------------------------------------------------

    async def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        self._lease_written()
        changed = await self._count(
            "INSERT INTO leases (key, owner, until) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until"
            " WHERE leases.owner = excluded.owner OR leases.until < %s",
            (key, owner, until, now),
        )
        return changed == 1

    async def keep_lease(self, key: str, owner: str, until: float) -> bool:
        self._lease_written()
        changed = await self._count(
            "UPDATE leases SET until = %s WHERE key = %s AND owner = %s", (until, key, owner)
        )
        return changed == 1

    async def renew_leases(self, owner: str, until: float) -> int:
        self._lease_written()
        return await self._count(RENEW_LEASES, (until, owner))

    async def release_lease(self, key: str, owner: str) -> bool:
        self._lease_written()
        changed = await self._count(
            "DELETE FROM leases WHERE key = %s AND owner = %s", (key, owner)
        )
        return changed == 1

    async def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = await self._all(
            "SELECT key FROM leases WHERE until < %s AND owner <> %s ORDER BY until",
            (now, other_than),
        )
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
        return await self._count(ADD_TO_COUNTER, (key, window, amount, ceiling)) == 1

    async def counted(self, key: str, window: float) -> int:
        row = await self._one(
            "SELECT count FROM quota_counters WHERE key = %s AND window_start = %s", (key, window)
        )
        return int(row["count"]) if row else 0
