"""Another process's events reach this one's streams through NOTIFY (hostcall/relay.py), on a
real PostgreSQL: a notification carries the events its statement appended when they fit
(hostcall/store/postgres/notices.py), and the relay publishes them without reading them
back. Old and new processes share the database during a rolling upgrade: the release
before splits a payload on spaces into three and reads the table; today's reads the table
for a payload without events, too big to carry them, or after a gap."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import psycopg
import pytest

from hostcall.broker import Broker
from hostcall.protocol.events import ProtocolEvent, TextMessageContent, TextMessageStart
from hostcall.protocol.frames import Event
from hostcall.relay import Relay
from hostcall.store.postgres import PostgresStore, notices
from hostcall.store.postgres.events import CHANNEL
from hostcall.store.records import Conversation
from tests.support.databases import fresh_schema
from tests.support.wire import counting

# Spaces, quotes, a backslash, a newline, a tab, non-ASCII and a record separator of its own.
AWKWARD = 'a "quoted" word \\ and\nmore\ttext, café 🚀 \x1e end'


def _on_two_processes(test: Callable[[PostgresStore, PostgresStore, str], Awaitable[None]]) -> None:
    """``test(writer, reader, url)``: two stores on one database, as two processes have."""
    with fresh_schema() as url:

        async def main() -> None:
            writer, reader = PostgresStore(url), PostgresStore(url)
            try:
                await writer.create_conversation(Conversation("c1", "planner", 1.0))
                await test(writer, reader, url)
            finally:
                await writer.close()
                await reader.close()

        asyncio.run(main())


async def _payloads(url: str, append: Callable[[], Awaitable[object]]) -> list[str]:
    """The payloads of the notifications ``append`` makes."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {CHANNEL}")
        await append()
        await listener.execute("SELECT 1")  # the notifications are in by its answer
        found: list[str] = []
        async for note in listener.notifies(timeout=0.5):
            found.append(note.payload)
        return found


def _relay(reader: PostgresStore, url: str) -> tuple[Relay, asyncio.Queue[Event | None]]:
    broker = Broker()
    queue = broker.subscribe("c1")
    return Relay(url, reader.events, broker, origin=reader.origin), queue


def _drain(queue: asyncio.Queue[Event | None]) -> list[tuple[int, str, str]]:
    found = []
    while not queue.empty():
        event = queue.get_nowait()
        assert event is not None
        found.append((event.seq, event.name, event.encoded))
    return found


def test_events_carried_reach_another_process_unread_and_the_release_before_reads_three(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def test(writer: PostgresStore, reader: PostgresStore, url: str) -> None:
        events: list[ProtocolEvent] = [
            TextMessageStart("m1", "assistant"),
            TextMessageContent("m1", AWKWARD),
        ]

        async def append() -> None:
            async with writer.transaction():
                await writer.append_events("c1", events)
                await writer.append_event("c1", TextMessageContent("m1", "two more words"))

        payloads = await _payloads(url, append)
        stored = [(e.seq, e.name, e.encoded) for e in await reader.events_after("c1", 0)]
        assert len(stored) == 3
        # Each statement told its own events: the transaction's first append, then the one
        # deferred to its end.
        assert [notices.parse(p).seq for p in payloads] == [1, 3]
        for payload in payloads:
            # The release before: `conversation_id, seq, origin = payload.split(" ")`.
            conversation_id, seq, origin = payload.split(" ")
            assert conversation_id == "c1" and int(seq) in (1, 3) and origin != reader.origin
            assert len(payload.encode()) < 8000
        relay, queue = _relay(reader, url)
        relay.broker._last["c1"] = 0  # the stream read an empty backlog, and waits
        with counting(monkeypatch) as tally:
            tally.take()
            for payload in payloads:
                told = notices.parse(payload)
                await relay.wake(told.conversation_id, told.seq, told)
            assert tally.take().statements == 0  # none read back
        assert _drain(queue) == stored  # the same events, byte for byte, in order

    _on_two_processes(test)


def test_a_notification_without_events_or_after_a_gap_is_read_from_the_table() -> None:
    async def test(writer: PostgresStore, reader: PostgresStore, url: str) -> None:
        big = TextMessageContent("m1", "x" * (notices.CARRY_MAX + 1))
        payloads = await _payloads(
            url, lambda: writer.append_events("c1", [TextMessageStart("m1", "assistant"), big])
        )
        assert [notices.parse(p).events() for p in payloads] == [None]  # too big to carry
        await writer.append_event("c1", TextMessageContent("m1", "after"))
        stored = [(e.seq, e.name, e.encoded) for e in await reader.events_after("c1", 0)]
        relay, queue = _relay(reader, url)
        relay.broker._last["c1"] = 0
        # The release before's payload (no events) and today's without them: read.
        old = notices.parse(f"c1 1 {writer.origin}")
        await relay.wake("c1", 1, old)
        assert _drain(queue) == stored
        # Events carried past a gap (seq 5 when 3 is the last published): the gap is read.
        await writer.append_event("c1", TextMessageContent("m1", "gap"))
        payloads = await _payloads(
            url, lambda: writer.append_event("c1", TextMessageContent("m1", "told"))
        )
        told = notices.parse(payloads[0])
        assert told.seq == 5 and told.events() is not None
        await relay.wake("c1", told.seq, told)
        assert [seq for seq, _, _ in _drain(queue)] == [4, 5]

    _on_two_processes(test)
