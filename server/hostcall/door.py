"""Back-pressure at the door: new work is refused while this process cannot take more.

A message accepted with ``202`` runs to its end however long it waits (a step waits for a
busy pool, hostcall/store/postgres/connections.py). So a process must not accept more than
it can carry: past a bound (``Capacity``, hostcall/settings.py), creating a conversation,
sending a message, a retry and an AG-UI run answer ``503 overloaded`` with ``Retry-After``,
before anything is read or stored (not even the session's conversation: that read would
wait for the same connections), and before any rate limit counts them. The client sends the
same request again after the pause; the widget does so on its own (widget/app.js).

What is counted is this process's own, and cheap to read on every request: the steps it has
in flight, and its statements waiting for a pooled connection. Everything else (streams,
answers to calls, snapshots) is let through: it finishes work already accepted.

A crowd refused together would come back together, after the same ``Retry-After``, and
be refused again: each refusal is a request the process pays for (~0.5 ms of CPU with its
connection, as much as a few statements), and PostgreSQL's door refused 4-5 times per
conversation of the load bench under a busy CPU (bench/README.md). So the refused are told
to come back at most as many a second as the bound that refused them lets in (``Spread``),
the first of them after ``Retry-After`` as before, the next ones a second later each.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from hostcall import metrics
from hostcall.errors import Overloaded
from hostcall.settings import Capacity

STEPS = "steps_in_flight"
DB_WAITERS = "db_waiters"
# The latest a refusal is told to come back, in multiples of ``Retry-After``: a crowd far
# past the bound comes back over this many, not over minutes.
SPREAD_MAX = 4


class Spread:
    """When each refused request is told to come back: the first ``per_second`` refused
    within a second after ``retry_after``, as before, the next ones one second later, and
    so on up to ``SPREAD_MAX`` times ``retry_after``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at = -math.inf  # when the latest refused are told to come back
        self._told = 0  # how many were told that

    def retry_after(self, seconds: int, per_second: int) -> int:
        now = self._clock()
        latest = now + seconds * SPREAD_MAX
        if self._at <= now + seconds - 1:  # those told so far are back within a second
            self._at, self._told = now + seconds, 0
        elif self._told >= max(per_second, 1) and self._at + 1 <= latest:
            self._at, self._told = self._at + 1, 0
        self._told += 1
        return max(seconds, math.ceil(self._at - now))


class Door:
    def __init__(
        self,
        capacity: Capacity,
        *,
        steps: Callable[[], int],
        db_waiters: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self._steps = steps
        self._db_waiters = db_waiters
        self._spread = Spread(clock)

    def full(self) -> str | None:
        """Which bound this process is at or past, if any."""
        if self._steps() >= self.capacity.max_steps_in_flight:
            return STEPS
        if self._db_waiters() >= self.capacity.max_db_waiters:
            return DB_WAITERS
        return None

    def admit(self) -> None:
        """Raise ``Overloaded`` if the process cannot take new work now."""
        reason = self.full()
        if reason is None:
            return
        metrics.DOOR_REFUSALS.labels(reason).inc()
        bound = (
            self.capacity.max_steps_in_flight if reason == STEPS else self.capacity.max_db_waiters
        )
        raise Overloaded(
            reason, retry_after=self._spread.retry_after(self.capacity.retry_after, bound)
        )
