"""Streams a message's text into the event log: the chunks that arrive while an append is
in flight go in together as the next append.

A model often yields a step's text in a burst (the scripted one yields it all at once, a
real one a few chunks per network read). Appended one by one, each chunk cost a round trip
to the database (and a statement, a NOTIFY, a commit on PostgreSQL); gathered, a burst
costs one. A slow model's chunks still go out one at a time, as they come.

Nothing the event log promises changes: the chunks are numbered in the order they were
added, every append is fenced by the run's lease (a process that lost it appends nothing
more; the ``LeaseLost`` surfaces at the next ``add`` or at ``flush``), and ``flush`` waits
until everything added is committed, so what the step appends next comes after it. At the
end of the text, ``settle`` hands back what has not gone out yet instead: the step appends
it with the message's end, in the transaction that ends the step (one statement).
"""

from __future__ import annotations

import asyncio

from hostcall.journal import Journal
from hostcall.protocol.events import ProtocolEvent


class Appender:
    def __init__(self, journal: Journal, conversation_id: str, fence: tuple[str, str]) -> None:
        self.journal = journal
        self.conversation_id = conversation_id
        self.fence = fence
        self._waiting: list[ProtocolEvent] = []
        self._writing: asyncio.Task[None] | None = None
        self._started = False  # whether _writing has begun (and may have sent something)
        self._failed: BaseException | None = None

    def add(self, *events: ProtocolEvent) -> None:
        """Queue ``events`` after everything added before; they are appended with the next
        append, which starts now if none is in flight. Raises what an earlier append
        raised (``LeaseLost``: the run is another process's now)."""
        if self._failed is not None:
            raise self._failed
        self._waiting.extend(events)
        if self._writing is None:
            self._started = False
            self._writing = asyncio.get_running_loop().create_task(self._write())

    async def put(self, *events: ProtocolEvent) -> None:
        """Append ``events`` after everything added before, and wait until they are
        committed. With nothing in flight they are appended from the caller's task: a
        step's first text does not wait for a task of its own to be scheduled (it is on
        the round trip: the resumed run's first text)."""
        if self._writing is not None or self._waiting:
            self.add(*events)
            await self.flush()
            return
        if self._failed is not None:
            raise self._failed
        await self.journal.emit_all(self.conversation_id, list(events), fence=self.fence)

    async def flush(self) -> None:
        """Wait until everything added is committed (and published); raises what an
        append raised."""
        if self._writing is not None:
            await self._writing  # a cancelled step cancels the append in flight too
        if self._failed is not None:
            raise self._failed

    async def settle(self) -> list[ProtocolEvent]:
        """Wait for the append in flight, if one has begun, and hand back what is still
        waiting, unappended: the caller appends it with what it appends next, in one
        statement (the step's end, in its transaction). Raises what an append raised."""
        if self._writing is not None and not self._started:
            # Created but not run yet (the chunks came in a burst): it has sent nothing.
            self._writing.cancel()
            self._writing = None
        await self.flush()
        waiting, self._waiting = self._waiting, []
        return waiting

    def cancel(self) -> None:
        """Drop what is not appended yet (the step is being cancelled)."""
        self._waiting.clear()
        if self._writing is not None:
            self._writing.cancel()

    async def _write(self) -> None:
        self._started = True
        try:
            while self._waiting:
                events, self._waiting = self._waiting, []
                await self.journal.emit_all(self.conversation_id, events, fence=self.fence)
        except Exception as exc:  # kept for add/flush: the step raises it
            self._waiting.clear()
            self._failed = exc
        finally:
            self._writing = None
