"""The PostgreSQL store's coordination of processes: leases (hostcall/leases.py), the
cluster's one turn at a job (the sweeper, ``try_singleton``: a lease too), and counters for
the rate and cost limits (hostcall/counters.py)."""

from __future__ import annotations

from hostcall.store.interfaces import Leases, QuotaCounters
from hostcall.store.postgres.connections import Part
from hostcall.store.statements import POSTGRES as SQL

# Advisory locks (the migrations') are per database, not per schema: the key includes the
# schema, so two Hostcall installations in two schemas of one database do not wait on each
# other.
LOCK_KEY = "hashtext('hostcall:' || current_schema() || ':' || %s)"
# The lease-renewal thread's statement (hostcall/leases.py), on a connection of its own.
RENEW_LEASES = SQL.renew_leases


class Coordination(Part, Leases, QuotaCounters):
    # ---- leases (hostcall/leases.py) ---------------------------------------------------------

    async def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        self.db.lease_written()
        return await self.db.count(SQL.take_lease, (key, owner, until, now)) == 1

    async def keep_lease(self, key: str, owner: str, until: float) -> bool:
        self.db.lease_written()
        return await self.db.count(SQL.keep_lease, (until, key, owner)) == 1

    async def renew_leases(self, owner: str, until: float) -> int:
        self.db.lease_written()
        return await self.db.count(SQL.renew_leases, (until, owner))

    async def release_lease(self, key: str, owner: str) -> bool:
        self.db.lease_written()
        return await self.db.count(SQL.release_lease, (key, owner)) == 1

    async def break_lease(self, key: str) -> bool:
        self.db.lease_written()
        return await self.db.count(SQL.break_lease, (key,)) == 1

    async def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = await self.db.all(SQL.expired_leases, (now, other_than))
        return [r["key"] for r in found]

    async def try_singleton(self, name: str, owner: str, until: float, now: float) -> bool:
        """True while ``owner`` holds the cluster-wide turn ``name``: a lease row
        (``turn:<name>``) that its holder takes again each time it asks, and that
        ``renew_leases`` leaves alone. A holder that stops asking (killed, paused by
        ``SIGSTOP``, a frozen VM, its event loop stuck) loses the turn once ``until``
        passes, whatever became of its connections; another process takes it on its next
        ask. (A session-level advisory lock was held as long as its connection, and a
        paused process's connection stays open: the cluster stopped expiring deadlines
        and adopting work until it woke.)
        """
        return await self.take_lease(f"turn:{name}", owner, until, now)

    # ---- counters (hostcall/counters.py) ------------------------------------------------

    async def add_to_counter(
        self, key: str, window: float, amount: int, *, limit: int | None = None
    ) -> bool:
        ceiling = 2**62 if limit is None else limit
        if amount > ceiling:
            return False
        return await self.db.count(SQL.add_to_counter, (key, window, amount, ceiling)) == 1

    async def counted(self, key: str, window: float) -> int:
        row = await self.db.one(SQL.counted, (key, window))
        return int(row["count"]) if row else 0
