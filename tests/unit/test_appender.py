"""A message's text streamed into the event log (hostcall/appender.py), on both stores: a
burst of chunks goes in as one append, in order and gapless; a slow model's chunks go one
by one; once the run's lease is lost nothing more is appended."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hostcall.appender import Appender
from hostcall.broker import Broker
from hostcall.errors import LeaseLost
from hostcall.journal import Journal
from hostcall.protocol.events import TextMessageContent, TextMessageStart
from hostcall.store import Store
from hostcall.store.records import Conversation

FENCE = ("run:r1", "owner-a")


class _Counting:
    """The store, counting the appends that reach it (each is one statement on PostgreSQL)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.appends: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def append_events(self, conversation_id: str, events: Any, **kw: Any) -> Any:
        self.appends.append(len(events))
        return await self.store.append_events(conversation_id, events, **kw)


async def _setup(store: Store) -> tuple[_Counting, Journal, asyncio.Queue[Any]]:
    await store.create_conversation(Conversation("c1", "planner", 1.0, "en", ()))
    await store.take_lease(*FENCE, until=1e12, now=0.0)
    counting = _Counting(store)
    broker = Broker()
    queue = broker.subscribe("c1")
    return counting, Journal(counting, broker), queue


def _texts(events: list[Any]) -> list[tuple[int, str]]:
    return [(e.seq, e.data.get("delta", e.name)) for e in events]


async def test_a_burst_of_chunks_goes_in_as_one_append_in_order(store: Store) -> None:
    counting, journal, queue = await _setup(store)
    appender = Appender(journal, "c1", FENCE)
    appender.add(TextMessageStart("m1", "assistant"), TextMessageContent("m1", "0"))
    await appender.flush()
    for i in range(1, 7):  # the model yields these without awaiting
        appender.add(TextMessageContent("m1", f"{i}"))
    await appender.flush()
    assert counting.appends == [2, 6]
    stored = await store.events_after("c1", 0)
    assert [e.seq for e in stored] == list(range(1, 9))
    assert [e.data["delta"] for e in stored[1:]] == [f"{i}" for i in range(7)]
    published = [queue.get_nowait() for _ in range(queue.qsize())]
    assert _texts(published) == _texts(stored)  # every one published, in order, once


async def test_chunks_that_come_one_at_a_time_go_in_one_at_a_time(store: Store) -> None:
    counting, journal, _ = await _setup(store)
    appender = Appender(journal, "c1", FENCE)
    for i in range(3):
        appender.add(TextMessageContent("m1", f"{i}"))
        await appender.flush()  # a slow model: the append ends before the next chunk
    assert counting.appends == [1, 1, 1]
    assert [e.data["delta"] for e in await store.events_after("c1", 0)] == ["0", "1", "2"]


async def test_a_lost_lease_stops_the_text_and_nothing_more_is_appended(store: Store) -> None:
    counting, journal, _ = await _setup(store)
    appender = Appender(journal, "c1", FENCE)
    appender.add(TextMessageContent("m1", "mine"))
    await appender.flush()
    # Another process takes the run over (the lease expired while this one stalled).
    await store.take_lease(FENCE[0], "owner-b", until=2e12, now=1.5e12)
    appender.add(TextMessageContent("m1", "late 1"), TextMessageContent("m1", "late 2"))
    with pytest.raises(LeaseLost):
        await appender.flush()
    with pytest.raises(LeaseLost):  # and every later chunk is refused at once
        appender.add(TextMessageContent("m1", "later"))
    await asyncio.sleep(0)
    assert counting.appends == [1, 2]  # the refused append; "later" never reached the store
    assert [e.data["delta"] for e in await store.events_after("c1", 0)] == ["mine"]
    assert await store.last_seq("c1") == 1


async def test_what_waits_at_the_end_is_handed_back_for_the_step_s_last_append(
    store: Store,
) -> None:
    counting, journal, _ = await _setup(store)
    appender = Appender(journal, "c1", FENCE)
    appender.add(TextMessageStart("m1", "assistant"), TextMessageContent("m1", "0"))
    await appender.flush()
    appender.add(TextMessageContent("m1", "1"), TextMessageContent("m1", "2"))  # a burst
    rest = await appender.settle()
    assert [e.delta for e in rest] == ["1", "2"]  # type: ignore[attr-defined]
    assert counting.appends == [2]  # not sent: the step sends them with its end
    await asyncio.sleep(0.01)
    assert counting.appends == [2] and await store.last_seq("c1") == 2
    # An append already under way is waited for (it takes what came meanwhile, if it is
    # still going); whatever it did not take is handed back, in order after it.
    appender.add(TextMessageContent("m1", "3"))
    await asyncio.sleep(0)  # the append begins
    appender.add(TextMessageContent("m1", "4"))
    rest = await appender.settle()
    stored = [e.data["delta"] for e in await store.events_after("c1", 2)]
    assert stored[0] == "3"
    assert stored + [e.delta for e in rest] == ["3", "4"]  # type: ignore[attr-defined]


async def test_put_appends_from_the_callers_task_or_after_what_is_in_flight(
    store: Store,
) -> None:
    """A step's first text goes in from the step's own task (no task to wait for); with an
    append in flight, ``put`` waits its turn, and the order stays the order of the calls."""
    counting, journal, _ = await _setup(store)
    tasks: list[asyncio.Task[Any] | None] = []
    append_events = counting.append_events

    async def noting(conversation_id: str, events: Any, **kw: Any) -> Any:
        tasks.append(asyncio.current_task())
        return await append_events(conversation_id, events, **kw)

    counting.append_events = noting  # type: ignore[method-assign]
    appender = Appender(journal, "c1", FENCE)
    await appender.put(TextMessageStart("m1", "assistant"), TextMessageContent("m1", "0"))
    assert tasks == [asyncio.current_task()] and counting.appends == [2]
    appender.add(TextMessageContent("m1", "1"))  # in flight in a task of its own
    await appender.put(TextMessageContent("m1", "2"))
    assert tasks[1] is not asyncio.current_task()
    assert [e.data.get("delta") for e in await store.events_after("c1", 0)] == [
        None, "0", "1", "2"]  # fmt: skip
    assert await store.last_seq("c1") == 4
