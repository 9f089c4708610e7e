"""The SQLite store's coordination: leases (hostcall/leases.py), the sweeper's turn (always
this process's: one process per file), and counters for the rate and cost limits
(hostcall/counters.py). The same interface as PostgreSQL's (postgres/coordination.py)."""

from __future__ import annotations

import sqlite3

# One row per counter: a new window overwrites the old one's count (see add_to_counter).
ADD_TO_COUNTER = """
INSERT INTO quota_counters (key, window_start, count) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    count = CASE WHEN quota_counters.window_start = excluded.window_start
                 THEN quota_counters.count + excluded.count ELSE excluded.count END,
    window_start = excluded.window_start
WHERE CASE WHEN quota_counters.window_start = excluded.window_start
           THEN quota_counters.count ELSE 0 END + excluded.count <= ?
"""


class Coordination:
    _db: sqlite3.Connection

    # ---- leases (hostcall/leases.py) ---------------------------------------------------------

    async def take_lease(self, key: str, owner: str, until: float, now: float) -> bool:
        cursor = self._db.execute(
            "INSERT INTO leases (key, owner, until) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until"
            " WHERE leases.owner = excluded.owner OR leases.until < ?",
            (key, owner, until, now),
        )
        return cursor.rowcount == 1

    async def keep_lease(self, key: str, owner: str, until: float) -> bool:
        cursor = self._db.execute(
            "UPDATE leases SET until = ? WHERE key = ? AND owner = ?", (until, key, owner)
        )
        return cursor.rowcount == 1

    async def renew_leases(self, owner: str, until: float) -> int:
        cursor = self._db.execute("UPDATE leases SET until = ? WHERE owner = ?", (until, owner))
        return cursor.rowcount

    async def release_lease(self, key: str, owner: str) -> bool:
        cursor = self._db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))
        return cursor.rowcount == 1

    async def expired_leases(self, now: float, *, other_than: str = "") -> list[str]:
        found = self._db.execute(
            "SELECT key FROM leases WHERE until < ? AND owner <> ? ORDER BY until",
            (now, other_than),
        )
        return [r[0] for r in found]

    async def try_singleton(self, name: str) -> bool:
        return True  # one process per file (see _lock)

    # ---- counters (hostcall/counters.py) ------------------------------------------------

    async def add_to_counter(
        self, key: str, window: float, amount: int, *, limit: int | None = None
    ) -> bool:
        ceiling = amount if limit is None else limit
        if amount > ceiling:
            return False
        cursor = self._db.execute(
            ADD_TO_COUNTER, (key, window, amount, max(ceiling, 2**62) if limit is None else ceiling)
        )
        return cursor.rowcount == 1

    async def counted(self, key: str, window: float) -> int:
        row = self._db.execute(
            "SELECT count FROM quota_counters WHERE key = ? AND window_start = ?", (key, window)
        ).fetchone()
        return int(row[0]) if row else 0
