"""Carries events committed by other processes into this process's broker (PostgreSQL).

A transaction's first event of a conversation NOTIFYs ``"<conversation> <seq> <origin>"``
at commit (hostcall/store/postgres/events.py). The relay LISTENs on its own connection and
skips its own process's events (the journal publishes those here after commit; reading them
back cost a query each). For another process's events in a conversation someone here is
watching, it reads the events it has not published yet from the table (the notified one
and every one after it) and publishes them. Notifications only wake streams up: the
events come from the table, so a missed notification loses nothing — and after the
listening connection drops, every watched conversation is read again.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg

from hostcall.broker import Broker
from hostcall.store.interfaces import Events
from hostcall.store.postgres.connections import timeouts
from hostcall.store.postgres.events import CHANNEL

log = logging.getLogger("hostcall.relay")
RETRY_SECONDS = 1.0
# How long a starting process waits for its LISTEN before it serves (see ``ready``).
READY_SECONDS = 10.0


class Relay:
    def __init__(self, url: str, store: Events, broker: Broker, *, origin: str) -> None:
        self.url = url
        self.store = store
        self.broker = broker
        self.origin = origin  # the notifications of this process's own events
        self.connected = asyncio.Event()

    async def ready(self) -> bool:
        """Wait until this process LISTENs. A stream served before that could miss another
        process's notification for good: it would read its backlog, then wait for a wake-up
        that was sent before anyone here listened (a run's last event is followed by none).
        False, with a warning, if the database took longer (the relay keeps trying; a stream
        then catches up at its conversation's next notification)."""
        try:
            await asyncio.wait_for(self.connected.wait(), READY_SECONDS)
        except TimeoutError:
            log.warning("not listening for other processes' events after %g s", READY_SECONDS)
            return False
        return True

    async def wake(self, conversation_id: str, seq: int | None = None) -> None:
        """Publish what is committed past what this process published, if anyone watches."""
        if not self.broker.watching(conversation_id):
            return
        last = self.broker.last_published(conversation_id)
        if last is not None and seq is not None and seq <= last:
            return  # ours, or already read with an earlier notification
        if last is None:
            # Nothing published here since the stream read its backlog: publish from the
            # notified (or newest) event on; a stream that sees a seq past the one it
            # expects fills the gap from the table itself (hostcall/stream.py).
            newest = seq if seq is not None else await self.store.last_seq(conversation_id)
            last = newest - 1
        for event in await self.store.events_after(conversation_id, last):
            self.broker.publish(event)

    async def run_forever(self) -> None:
        first = True
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, **timeouts(self.url)
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    if not first:
                        for conversation_id in self.broker.watched():
                            await self.wake(conversation_id)
                    first = False
                    async for note in connection.notifies():
                        conversation_id, seq, origin = note.payload.split(" ")
                        if origin == self.origin:
                            continue
                        try:
                            await self.wake(conversation_id, int(seq))
                        except Exception:
                            log.exception("relaying %r failed", note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.warning("listening for events failed (%s); retrying", exc)
                await asyncio.sleep(RETRY_SECONDS)
