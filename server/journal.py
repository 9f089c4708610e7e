"""A unit of work: store writes and events committed together, published after commit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from server.broker import Broker
from server.protocol.events import ProtocolEvent
from server.protocol.frames import Event
from server.store import Store


@dataclass
class Unit:
    store: Store
    events: list[Event] = field(default_factory=list)

    def emit(self, conversation_id: str, event: ProtocolEvent) -> Event:
        stored = self.store.append_event(conversation_id, event)
        self.events.append(stored)
        return stored


class Journal:
    def __init__(self, store: Store, broker: Broker) -> None:
        self.store = store
        self.broker = broker

    @contextmanager
    def unit(self) -> Iterator[Unit]:
        unit = Unit(self.store)
        with self.store.transaction():
            yield unit
        # Only committed events reach streams; a rolled-back unit publishes nothing.
        for event in unit.events:
            self.broker.publish(event)

    def emit(self, conversation_id: str, event: ProtocolEvent) -> Event:
        with self.unit() as unit:
            return unit.emit(conversation_id, event)
