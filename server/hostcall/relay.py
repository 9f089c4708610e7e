"""Carries events committed by other processes into this process's broker (PostgreSQL).

Each statement that appends events of a conversation NOTIFYs ``"<conversation> <seq>
<origin>"`` at commit, with the events themselves when they fit
(hostcall/store/postgres/notices.py, events.py). The relay LISTENs on its own connection
(read where its socket becomes readable: hostcall/store/postgres/listening.py) and skips its
own process's events (the journal publishes those here after commit; reading
them back cost a query each). For another process's events in a conversation someone here
is watching, it publishes the events carried, if they follow what it published last;
otherwise (not carried, or after a gap) it reads the events it has not published yet from
the table (the notified one and every one after it) and publishes them. A notification
carries only what its statement committed, and a missed one loses nothing: the next one
finds the gap and reads the table, and after the listening connection drops, every watched
conversation is read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from hostcall.broker import Broker
from hostcall.protocol.frames import stored_event
from hostcall.store.interfaces import Events
from hostcall.store.postgres import notices
from hostcall.store.postgres.dialing import timeouts
from hostcall.store.postgres.events import CHANNEL
from hostcall.store.postgres.listening import Listening
from hostcall.store.postgres.notices import Notice

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

    async def wake(
        self, conversation_id: str, seq: int | None = None, told: Notice | None = None
    ) -> None:
        """Publish what is committed past what this process published, if anyone watches:
        the events ``told`` carries (from ``seq``) when nothing lies between, else read."""
        if not self.broker.watching(conversation_id):
            return
        last = self.broker.last_published(conversation_id)
        carried = told.events() if told is not None else None
        if carried is not None and seq is not None and (last is None or seq <= last + 1):
            # Nothing published here since the stream read its backlog (a stream that sees
            # a seq past the one it expects fills the gap itself), or these follow on.
            for at, (name, data) in enumerate(carried, start=seq):
                if last is None or at > last:
                    self.broker.publish(stored_event(conversation_id, at, name, data))
            return
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

    def _others(self, payload: str) -> bool:
        """Another process's events: this process's own were published after commit."""
        return notices.origin(payload) != self.origin

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
                    # Closed on the way out, cancelled too: its socket's registration goes
                    # before the connection closes the socket.
                    async with contextlib.aclosing(
                        Listening(connection, self._others).batches()
                    ) as batches:
                        async for payloads in batches:
                            for payload in payloads:
                                told = notices.parse(payload)
                                try:
                                    await self.wake(told.conversation_id, told.seq, told)
                                except Exception:
                                    log.exception("relaying %r failed", payload[:200])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.warning("listening for events failed (%s); retrying", exc)
                await asyncio.sleep(RETRY_SECONDS)
