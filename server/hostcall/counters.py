"""Counting for the rate and cost limits (hostcall/quotas.py), in fixed windows.

``LimitsCounters`` counts with the ``limits`` library, in this process (``memory://``) or
in a storage of its own (``redis://``...). ``StoreCounters`` counts in Hostcall's database:
on PostgreSQL every process of a cluster counts in the same rows, so a limit of N is N
across all of them, with no second service to run.

``take`` is the door check: one count in each window if every window has room, else none,
and the index of the first full one. On the database that is one transaction of
conditional upserts (a full window rolls back the counts already taken), so two processes
racing for the last unit cannot both get it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from limits import RateLimitItem
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from hostcall.store.interfaces import Database, QuotaCounters

Ids = tuple[str, ...]
Check = tuple[RateLimitItem, Ids]


class Counters(Protocol):
    async def take(self, checks: Sequence[Check]) -> int | None: ...
    async def add(self, item: RateLimitItem, ids: Ids, cost: int) -> None: ...
    async def has_room(self, item: RateLimitItem, ids: Ids) -> bool: ...
    async def reset_at(self, item: RateLimitItem, ids: Ids) -> float: ...
    async def clear(self, item: RateLimitItem, ids: Ids) -> None: ...


class LimitsCounters:
    def __init__(self, storage_uri: str = "memory://") -> None:
        self._limiter = FixedWindowRateLimiter(storage_from_string(storage_uri))

    async def take(self, checks: Sequence[Check]) -> int | None:
        # No await between the test and the hits: in one process, nothing comes between.
        for index, (item, ids) in enumerate(checks):
            if not self._limiter.test(item, *ids):
                return index
        for item, ids in checks:
            self._limiter.hit(item, *ids)
        return None

    async def add(self, item: RateLimitItem, ids: Ids, cost: int) -> None:
        self._limiter.hit(item, *ids, cost=cost)

    async def has_room(self, item: RateLimitItem, ids: Ids) -> bool:
        return self._limiter.test(item, *ids)

    async def reset_at(self, item: RateLimitItem, ids: Ids) -> float:
        return float(self._limiter.get_window_stats(item, *ids).reset_time)

    async def clear(self, item: RateLimitItem, ids: Ids) -> None:
        self._limiter.clear(item, *ids)


class _Full(Exception):
    def __init__(self, index: int) -> None:
        self.index = index


class _CounterStore(Database, QuotaCounters, Protocol):
    """The counters, added to in one transaction."""


class StoreCounters:
    def __init__(self, store: _CounterStore, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def _window(self, item: RateLimitItem, ids: Ids) -> tuple[str, float, float]:
        """The counter's key, and its current window's start and end."""
        length = item.get_expiry()
        start = math.floor(self.clock() / length) * length
        return "/".join((item.key_for(*ids), str(length))), start, start + length

    async def take(self, checks: Sequence[Check]) -> int | None:
        try:
            async with self.store.transaction():
                for index, (item, ids) in enumerate(checks):
                    key, start, _ = self._window(item, ids)
                    if not await self.store.add_to_counter(key, start, 1, limit=item.amount):
                        raise _Full(index)  # rolls back the counts this check took
        except _Full as full:
            return full.index
        return None

    async def add(self, item: RateLimitItem, ids: Ids, cost: int) -> None:
        key, start, _ = self._window(item, ids)
        await self.store.add_to_counter(key, start, cost)

    async def has_room(self, item: RateLimitItem, ids: Ids) -> bool:
        key, start, _ = self._window(item, ids)
        return await self.store.counted(key, start) < item.amount

    async def reset_at(self, item: RateLimitItem, ids: Ids) -> float:
        return self._window(item, ids)[2]

    async def clear(self, item: RateLimitItem, ids: Ids) -> None:
        """Nothing left to do: erasing deleted the rows that name the conversation or the
        person (hostcall/store/erasure.py), every window of them."""
