"""A conversation's log of events as a stream reads it: where it ends, and what follows a
seq (a widget's stream, hostcall/stream.py; an AG-UI request's, hostcall/agui.py)."""

from __future__ import annotations

from hostcall.protocol.frames import Event
from hostcall.store.interfaces import Events


class LogService:
    def __init__(self, store: Events) -> None:
        self.store = store

    async def end(self, conversation_id: str) -> int:
        """The seq of the conversation's last event (0: none yet)."""
        return await self.store.last_seq(conversation_id)

    async def after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        """The conversation's events after ``seq``, in order, at most ``limit`` of them."""
        return await self.store.events_after(conversation_id, seq, limit)
