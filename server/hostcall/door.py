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
"""

from __future__ import annotations

from collections.abc import Callable

from hostcall import metrics
from hostcall.errors import Overloaded
from hostcall.settings import Capacity

STEPS = "steps_in_flight"
DB_WAITERS = "db_waiters"


class Door:
    def __init__(
        self, capacity: Capacity, *, steps: Callable[[], int], db_waiters: Callable[[], int]
    ) -> None:
        self.capacity = capacity
        self._steps = steps
        self._db_waiters = db_waiters

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
        raise Overloaded(reason, retry_after=self.capacity.retry_after)
