"""In-process fan-out of committed events to open streams.

The store is the source of truth; the broker only wakes streams up. A subscriber that falls
too far behind is dropped (its queue gets ``None``), and its client reconnects with
``Last-Event-ID`` and replays from the store: nothing is lost, memory stays bounded.
A Redis implementation with the same three methods fans out across processes.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from server.protocol.frames import Event

QUEUE_LIMIT = 1000


class Broker:
    def __init__(self) -> None:
        self._subscribers: defaultdict[str, set[asyncio.Queue[Event | None]]] = defaultdict(set)

    def subscribe(self, conversation_id: str) -> asyncio.Queue[Event | None]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue(QUEUE_LIMIT)
        self._subscribers[conversation_id].add(queue)
        return queue

    def unsubscribe(self, conversation_id: str, queue: asyncio.Queue[Event | None]) -> None:
        queues = self._subscribers.get(conversation_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._subscribers[conversation_id]

    def publish(self, event: Event) -> None:
        for queue in tuple(self._subscribers.get(event.conversation_id, ())):
            if queue.qsize() >= QUEUE_LIMIT - 1:
                self.unsubscribe(event.conversation_id, queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(event)
