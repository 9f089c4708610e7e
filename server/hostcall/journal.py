"""A unit of work: store writes and events committed together, published after commit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

from hostcall.broker import Broker
from hostcall.protocol.events import ProtocolEvent
from hostcall.protocol.frames import Event
from hostcall.store.interfaces import Database, Events


class _JournalStore(Database, Events, Protocol):
    """What a unit needs: a transaction to append its events in. Nothing else of the store
    goes through the journal: each part that writes more is handed its own slice."""


@dataclass
class Unit:
    store: Events
    events: list[Event] = field(default_factory=list)
    # Run once the unit has committed, in order (work that must see what the unit wrote:
    # a task started inside a transaction could otherwise read the store before COMMIT).
    afterwards: list[Callable[[], None]] = field(default_factory=list)

    async def emit(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event:
        stored = await self.store.append_event(conversation_id, event, fence=fence)
        self.events.append(stored)
        return stored

    async def emit_all(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]:
        stored = await self.store.append_events(conversation_id, events, fence=fence)
        self.events.extend(stored)
        return stored


class _Opened:
    """``Journal.unit``: a class rather than a generator, as every answer and every step
    enters one (a generator's context manager costs twice the calls)."""

    __slots__ = ("journal", "transaction", "unit")

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.unit = Unit(journal.store)
        self.transaction = journal.store.transaction()

    async def __aenter__(self) -> Unit:
        await self.transaction.__aenter__()
        return self.unit

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        suppressed = bool(await self.transaction.__aexit__(kind, error, tb))
        if error is None or suppressed:
            broker = self.journal.broker
            events = self.unit.events
            if len({event.conversation_id for event in events}) == 1:
                broker.publish_all(events)  # one write to a waiting stream, not one each
            else:
                for event in events:
                    broker.publish(event)
            for then in self.unit.afterwards:
                then()
        return suppressed


class Journal:
    def __init__(self, store: _JournalStore, broker: Broker) -> None:
        self.store = store
        self.broker = broker

    def unit(self) -> AbstractAsyncContextManager[Unit]:
        """A unit of work: its writes and events committed together; only committed
        events reach streams (a rolled-back unit publishes nothing), then ``afterwards``."""
        return _Opened(self)

    async def emit(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event:
        """One event, committed on its own: a single append is atomic in both stores, so it
        needs no transaction around it (on PostgreSQL, one statement instead of three)."""
        stored = await self.store.append_event(conversation_id, event, fence=fence)
        self.broker.publish(stored)
        return stored

    async def emit_all(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]:
        """Several events in order, committed together (one statement on PostgreSQL)."""
        stored = await self.store.append_events(conversation_id, events, fence=fence)
        if stored:
            self.broker.publish_all(stored)
        return stored
