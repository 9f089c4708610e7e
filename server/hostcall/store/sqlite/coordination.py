"""The SQLite store's coordination: leases (hostcall/leases.py), the sweeper's turn (always
this process's: one process per file), and counters for the rate and cost limits
(hostcall/counters.py)."""

from __future__ import annotations

from hostcall.store.interfaces import Leases, QuotaCounters
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL


class Coordination(Part, Leases, QuotaCounters):
    # ---- leases (hostcall/leases.py) ---------------------------------------------------------

    async def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        cursor = self.db.execute(SQL.take_lease, (key, owner, until, now))
        return cursor.rowcount == 1

    async def keep_lease(self, key: str, owner: str, until: float) -> bool:
        cursor = self.db.execute(SQL.keep_lease, (until, key, owner))
        return cursor.rowcount == 1

    async def renew_leases(self, owner: str, until: float) -> int:
        cursor = self.db.execute(SQL.renew_leases, (until, owner))
        return cursor.rowcount

    async def release_lease(self, key: str, owner: str) -> bool:
        cursor = self.db.execute(SQL.release_lease, (key, owner))
        return cursor.rowcount == 1

    async def break_lease(self, key: str) -> bool:
        return self.db.execute(SQL.break_lease, (key,)).rowcount == 1

    async def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = self.db.execute(SQL.expired_leases, (now, other_than))
        return [r[0] for r in found]

    async def try_singleton(self, name: str, owner: str, until: float, now: float) -> bool:
        return True  # one process per file (see database.py's _lock)

    # ---- counters (hostcall/counters.py) ------------------------------------------------

    async def add_to_counter(
        self, key: str, window: float, amount: int, *, limit: int | None = None
    ) -> bool:
        ceiling = amount if limit is None else limit
        if amount > ceiling:
            return False
        cursor = self.db.execute(
            SQL.add_to_counter,
            (key, window, amount, max(ceiling, 2**62) if limit is None else ceiling),
        )
        return cursor.rowcount == 1

    async def counted(self, key: str, window: float) -> int:
        row = self.db.execute(SQL.counted, (key, window)).fetchone()
        return int(row[0]) if row else 0
