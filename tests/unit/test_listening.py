"""A LISTEN connection's notifications read where its socket becomes readable
(hostcall/store/postgres/listening.py), on a real database: what is wanted arrives in
order and what is not never wakes the reader; the socket is registered once however many
come; and when the server ends the session the reading fails and nothing stays registered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

from hostcall.broker import Broker
from hostcall.relay import Relay
from hostcall.store.postgres.events import CHANNEL as EVENTS_CHANNEL
from hostcall.store.postgres.listening import Listening
from tests.support.databases import fresh_schema
from tests.unit.test_watched_connection import _counting_registrations, _registered

CHANNEL = "hostcall_listening_test"
Test = Callable[[psycopg.AsyncConnection[object], psycopg.AsyncConnection[object]], Awaitable[None]]


def _run(test: Test) -> None:
    with fresh_schema() as url:

        async def main() -> None:
            async with (
                await psycopg.AsyncConnection.connect(url, autocommit=True) as listener,
                await psycopg.AsyncConnection.connect(url, autocommit=True) as sender,
            ):
                await listener.execute(f"LISTEN {CHANNEL}")
                await test(listener, sender)

        asyncio.run(main())


async def _notify(sender: psycopg.AsyncConnection[object], *payloads: str) -> None:
    """One transaction: its notifications reach the listener together, at its commit."""
    async with sender.transaction():
        for payload in payloads:
            await sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))


async def _next(batches: AsyncIterator[list[str]]) -> list[str]:
    return await asyncio.wait_for(anext(batches), 10)


def test_wanted_payloads_arrive_in_order_and_unwanted_ones_never_wake_the_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    added = _counting_registrations(monkeypatch)

    async def test(
        listener: psycopg.AsyncConnection[object], sender: psycopg.AsyncConnection[object]
    ) -> None:
        seen: list[str] = []
        before = len(added)  # the LISTEN's own waits, psycopg's, registered too

        def theirs(payload: str) -> bool:
            seen.append(payload)
            return not payload.startswith("mine")

        batches = Listening(listener, theirs).batches()
        first = asyncio.ensure_future(_next(batches))
        await _notify(sender, "mine 1", "mine 2")
        # Read and judged (the filter saw both), yet nothing woke the reader.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(seen) < 2:
            assert loop.time() < deadline, "the listener never read the notifications"
            await asyncio.sleep(0.01)
        assert not first.done()
        await _notify(sender, "theirs 1", "mine 3", "theirs 2 with spaces \u00e9")
        assert await first == ["theirs 1", "theirs 2 with spaces \u00e9"]
        for n in range(3, 30):
            await _notify(sender, f"theirs {n}")
            assert await _next(batches) == [f"theirs {n}"]
        fd = listener.pgconn.socket
        assert added[before:].count(fd) == 1  # once, for 29 transactions' notifications
        await batches.aclose()
        assert not _registered(fd)

    _run(test)


def test_the_server_ending_the_session_fails_the_reading_and_leaves_nothing_registered() -> None:
    async def test(
        listener: psycopg.AsyncConnection[object], sender: psycopg.AsyncConnection[object]
    ) -> None:
        batches = Listening(listener, lambda p: True).batches()
        reading = asyncio.ensure_future(_next(batches))
        await _notify(sender, "before")
        assert await reading == ["before"]
        fd = listener.pgconn.socket
        assert _registered(fd)
        await sender.execute("SELECT pg_terminate_backend(%s)", (listener.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError):
            await _next(batches)
        assert not _registered(fd)

    _run(test)


class _StuckStore:
    """Events that never come: the relay is stopped while it reads them."""

    def __init__(self) -> None:
        self.reading = asyncio.Event()

    async def last_seq(self, conversation_id: str) -> int:
        return 1

    async def events_after(self, conversation_id: str, after: int) -> list[Any]:
        self.reading.set()
        await asyncio.Event().wait()
        return []


def test_the_relay_stopped_mid_relay_unregisters_its_socket_before_it_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cancelled (a process shutting down) while it reads what another process appended,
    the relay closes its reading before its connection: a registration left for a closed
    socket would leave the next socket given that number unwatched."""
    added = _counting_registrations(monkeypatch)

    async def main(url: str) -> None:
        store = _StuckStore()
        broker = Broker()
        broker.subscribe("c1")  # someone here watches c1
        relay = Relay(url, store, broker, origin="p_here")  # type: ignore[arg-type]
        task = asyncio.create_task(relay.run_forever())
        assert await relay.ready()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as other:
            # Another process's append, its events not carried: the relay reads them.
            await other.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, "c1 1 p_there"))
        await asyncio.wait_for(store.reading.wait(), 10)
        kept = [fd for fd in set(added) if _registered(fd)]
        assert kept, "the relay's socket is not registered while it listens"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not any(_registered(fd) for fd in kept)

    with fresh_schema() as url:
        asyncio.run(main(url))
