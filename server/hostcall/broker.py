"""In-process fan-out of committed events to open streams.

The store is the source of truth; the broker only wakes streams up. A subscriber that falls
too far behind is dropped (its queue gets ``None``), and its client reconnects with
``Last-Event-ID`` and replays from the store: nothing is lost, memory stays bounded.
Events committed by other processes arrive through hostcall/relay.py (PostgreSQL only);
``last_published`` lets the relay skip what this process already published.

A subscriber may also give a ``direct`` callable, tried first with what is published: True
if it took the events itself (a waiting stream writes them to its socket from the
publisher's task, hostcall/stream.py), False to have them queued as any others. A unit of
work's events are published together (``publish_all``), so a stream takes them in one write.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence

from hostcall.protocol.frames import Event

# Per stream: a reader this far behind is dropped and replays from the store (a slow
# reader's backlog is the store's, not this process's memory).
QUEUE_LIMIT = 256

Queue = asyncio.Queue[Event | None]
Direct = Callable[[Sequence[Event]], bool]


class Broker:
    def __init__(self) -> None:
        self._subscribers: defaultdict[str, dict[Queue, Direct | None]] = defaultdict(dict)
        # The newest seq published per watched conversation (only while it has subscribers).
        self._last: dict[str, int] = {}

    def subscribe(self, conversation_id: str, direct: Direct | None = None) -> Queue:
        queue: Queue = asyncio.Queue(QUEUE_LIMIT)
        self._subscribers[conversation_id][queue] = direct
        return queue

    def unsubscribe(self, conversation_id: str, queue: Queue) -> None:
        queues = self._subscribers.get(conversation_id)
        if queues is not None:
            queues.pop(queue, None)
            if not queues:
                del self._subscribers[conversation_id]
                self._last.pop(conversation_id, None)

    def watched(self) -> list[str]:
        """Conversations with at least one subscriber in this process."""
        return list(self._subscribers)

    def watching(self, conversation_id: str) -> bool:
        return conversation_id in self._subscribers

    def last_published(self, conversation_id: str) -> int | None:
        return self._last.get(conversation_id)

    def publish(self, event: Event) -> None:
        self.publish_all((event,))

    def publish_all(self, events: Sequence[Event]) -> None:
        """Events of one conversation, in order."""
        cid = events[0].conversation_id
        queues = self._subscribers.get(cid)
        if not queues:
            return
        if events[-1].seq > self._last.get(cid, 0):
            self._last[cid] = events[-1].seq
        for queue, direct in tuple(queues.items()):
            if direct is not None and direct(events):
                continue
            for event in events:
                if queue.qsize() >= QUEUE_LIMIT - 1:
                    self.unsubscribe(cid, queue)
                    queue.put_nowait(None)
                    break
                queue.put_nowait(event)
