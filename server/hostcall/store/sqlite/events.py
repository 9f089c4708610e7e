"""The SQLite store's events: each conversation's numbered log."""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.errors import LeaseLost
from hostcall.protocol.events import ProtocolEvent, encode
from hostcall.protocol.frames import Event, stored_event
from hostcall.store.interfaces import Events
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL

_INSERT = "INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, ?, ?)"


class EventTables(Part, Events):
    def _next_seqs(self, conversation_id: str, n: int, fence: tuple[str, str] | None) -> int:
        """In a transaction: check the fence (``LeaseLost`` if the lease is gone), then take
        the conversation's next ``n`` sequence numbers; returns the last of them."""
        if (
            fence is not None
            and fence not in self.db.let_go
            and not self.db.execute(
                "SELECT 1 FROM leases WHERE key = ? AND owner = ?", fence
            ).fetchone()
        ):
            raise LeaseLost(*fence)
        # An UPDATE and a read, not RETURNING: SQLite's RETURNING costs more than the read.
        self.db.execute(
            "UPDATE conversations SET last_seq = last_seq + ? WHERE id = ?", (n, conversation_id)
        )
        row = self.db.execute(SQL.last_seq, (conversation_id,)).fetchone()
        assert row is not None, f"no conversation {conversation_id}"
        return int(row[0])

    async def append_event(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event:
        name, encoded = encode(event)
        async with self.db.transaction():
            seq = self._next_seqs(conversation_id, 1, fence)
            self.db.execute(_INSERT, (conversation_id, seq, name, encoded))
        return Event(conversation_id, seq, name, encoded)

    async def append_events(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]:
        if len(events) <= 1:
            return [await self.append_event(conversation_id, e, fence=fence) for e in events]
        encoded = [encode(event) for event in events]
        async with self.db.transaction():
            # One fence check, one seq bump and one INSERT for the lot (a step's first text
            # is two events: the resumed run's first text).
            first = self._next_seqs(conversation_id, len(events), fence) - len(events) + 1
            stored = [
                Event(conversation_id, first + n, name, data)
                for n, (name, data) in enumerate(encoded)
            ]
            self.db.executemany(
                _INSERT, [(conversation_id, e.seq, e.name, e.encoded) for e in stored]
            )
        return stored

    async def events_after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        found = self.db.execute(SQL.events_after, (conversation_id, seq, limit))
        return [stored_event(conversation_id, r["seq"], r["type"], r["data"]) for r in found]

    async def reasoning_events_after(
        self, conversation_id: str, seq: int, limit: int = 1000
    ) -> list[Event]:
        found = self.db.execute(SQL.reasoning_events_after, (conversation_id, seq, limit))
        return [stored_event(conversation_id, r["seq"], r["type"], r["data"]) for r in found]

    async def last_seq(self, conversation_id: str) -> int:
        row = self.db.execute(SQL.last_seq, (conversation_id,)).fetchone()
        return int(row[0]) if row else 0
