"""Conversations' logs as streams replay them: pages of framed events, shared by the streams.

A crowd of streams connecting to one long conversation wants the same events: each used to
read and frame the whole log for itself (200 readers of a 1,320-event log: 264,000 rows
parsed and framed), which held the event loop from every other request. Here a log is cut
into pages at fixed boundaries (seqs ``k*size+1 .. (k+1)*size``); a full page never changes
(the log is append-only, its seqs contiguous), so it is read and framed once, kept, and
handed to every stream that replays it. A page still filling (the log's end) is read by
each stream for itself, never kept, and never shared: a stream must see everything
committed before it subscribed, which a read begun earlier might not.

What is kept is bounded in bytes, least recently used first out; it is a cache of the
store, never a source of truth.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hostcall.protocol.events import CustomName
from hostcall.protocol.frames import Event, sse_frame

PAGE = 50
KEPT_BYTES = 16 * 1024 * 1024
_DISPATCH = CustomName.TOOL_CALL_DISPATCH.value

Read = Callable[[str, int, int], Awaitable[list[Event]]]


@dataclass(frozen=True, slots=True)
class Page:
    """Events of one conversation in order, each with its SSE frame; ``ends_log`` when the
    read that made it found fewer events than it asked for (nothing more is committed)."""

    events: tuple[Event, ...]
    frames: tuple[bytes, ...]
    ends_log: bool
    dispatches: bool  # any ``hostcall.tool_call_dispatch``: a surface's stream checks each

    @classmethod
    def of(cls, events: list[Event], asked: int) -> Page:
        return cls(
            tuple(events),
            tuple(sse_frame(e) for e in events),
            ends_log=len(events) < asked,
            dispatches=any(e.name == _DISPATCH for e in events),
        )

    def tail(self, offset: int) -> Page:
        if offset == 0:
            return self
        return Page(self.events[offset:], self.frames[offset:], False, self.dispatches)

    @property
    def size(self) -> int:
        # The frames and the events' JSON, which hold the same text about once each.
        return 2 * sum(len(f) for f in self.frames)


class Backlog:
    def __init__(self, *, size: int = PAGE, kept_bytes: int = KEPT_BYTES) -> None:
        self.size = size
        self._budget = kept_bytes
        self._kept: OrderedDict[tuple[str, int], Page] = OrderedDict()
        self._bytes = 0
        # Full pages being read now: a stream wanting one waits for that read.
        self._reading: dict[tuple[str, int], asyncio.Future[Page | None]] = {}

    async def after(self, read: Read, conversation_id: str, seq: int) -> Page:
        """The events after ``seq`` up to the end of its page (at most ``size``), read with
        ``read(conversation_id, after, limit)`` unless the page is kept or being read."""
        index, offset = divmod(seq, self.size)
        key = (conversation_id, index)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept.tail(offset)
        if offset:
            # The page's start is behind this stream: read only what it lacks.
            asked = self.size - offset
            return Page.of(await read(conversation_id, seq, asked), asked)
        pending = self._reading.get(key)
        if pending is not None:
            shared = await asyncio.shield(pending)
            if shared is not None:
                return shared
            # That read found the page still filling, perhaps before this stream
            # subscribed: read it again, for this stream alone.
            return Page.of(await read(conversation_id, seq, self.size), self.size)
        future: asyncio.Future[Page | None] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        full: Page | None = None
        try:
            page = Page.of(await read(conversation_id, seq, self.size), self.size)
            if self._is_full(page, index):
                full = page
                self._keep(key, page)
            return page
        finally:
            del self._reading[key]
            future.set_result(full)

    def _is_full(self, page: Page, index: int) -> bool:
        events = page.events
        return (
            len(events) == self.size
            and events[0].seq == index * self.size + 1
            and events[-1].seq == (index + 1) * self.size
        )

    def _keep(self, key: tuple[str, int], page: Page) -> None:
        if page.size > self._budget:
            return
        self._kept[key] = page
        self._bytes += page.size
        while self._bytes > self._budget:
            _, old = self._kept.popitem(last=False)
            self._bytes -= old.size
