"""The PostgreSQL connection that keeps its socket registered with the event loop between
statements (hostcall/store/postgres/watched.py), on a real database: it registers once for
many statements, and the registration never outlives the socket, whichever way the socket
goes (closed, a statement cancelled mid-way, the server ending the session)."""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import contextlib
import gc
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from hostcall.store.postgres.watched import WatchedConnection
from tests.support.databases import fresh_schema

Test = Callable[[WatchedConnection, str], Awaitable[None]]


def _run(test: Test) -> None:
    with fresh_schema() as url:

        async def main() -> None:
            connection = await WatchedConnection.connect(url, autocommit=True)
            try:
                await test(connection, url)
            finally:
                await connection.close()

        asyncio.run(main())


def _registered(fd: int) -> bool:
    """Whether the running loop's selector holds a key for ``fd`` (its own record of what it
    watches; read, not changed)."""
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    return fd in selector.get_map()


def _counting_registrations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    added: list[int] = []
    loop_class = asyncio.selector_events.BaseSelectorEventLoop
    original = loop_class.add_reader

    def add_reader(self: Any, fd: Any, *args: Any) -> Any:
        added.append(fd)
        return original(self, fd, *args)

    monkeypatch.setattr(loop_class, "add_reader", add_reader)
    return added


def test_many_statements_register_the_socket_once(monkeypatch: pytest.MonkeyPatch) -> None:
    added = _counting_registrations(monkeypatch)

    async def test(connection: WatchedConnection, _: str) -> None:
        fd = connection.pgconn.socket
        added.clear()  # the connect's own waits (psycopg's) registered it already
        for n in range(20):
            cursor = await connection.execute("SELECT %s::int AS n", (n,))
            assert await cursor.fetchone() == (n,)
        assert added.count(fd) == 1, f"registered {added.count(fd)} times for 20 statements"
        # A pipeline (the store's transactions) waits the same way; answers that come while
        # no statement waits (a piped statement's) are taken in, not a reason to let go.
        async with connection.pipeline():
            await connection.execute("CREATE TEMP TABLE t (x int)")
            await connection.execute("INSERT INTO t VALUES (1), (2)")
            cursor = await connection.execute("SELECT sum(x) FROM t")
            assert await cursor.fetchone() == (3,)
        assert added.count(fd) == 1
        assert _registered(fd)

    _run(test)


def test_closing_unregisters_before_the_socket_goes() -> None:
    async def test(connection: WatchedConnection, url: str) -> None:
        await connection.execute("SELECT 1")
        fd = connection.pgconn.socket
        assert _registered(fd)
        await connection.close()
        assert not _registered(fd)
        # A new connection may get the same descriptor: it is watched, not left silent.
        other = await WatchedConnection.connect(url, autocommit=True)
        try:
            cursor = await other.execute("SELECT 2")
            assert await cursor.fetchone() == (2,)
        finally:
            await other.close()

    _run(test)


def test_a_statement_cancelled_mid_way_is_cancelled_on_the_server_and_the_connection_goes_on() -> (
    None
):
    async def test(connection: WatchedConnection, url: str) -> None:
        await connection.execute("SELECT 1")
        fd = connection.pgconn.socket
        task = asyncio.create_task(connection.execute("SELECT pg_sleep(30)"))
        while connection.info.transaction_status != psycopg.pq.TransactionStatus.ACTIVE:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        # As psycopg's own wait does: the query cancelled, its answers read to the end, the
        # connection idle and usable, watched again by its next statement.
        assert connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        cursor = await connection.execute("SELECT 4")
        assert await cursor.fetchone() == (4,)
        assert _registered(fd)

    _run(test)


def test_a_pipeline_interrupted_at_its_end_leaves_no_generator_behind() -> None:
    """The store's transactions are pipelines: one cancelled while its Sync is awaited
    (a request's task cancelled at shutdown) ends its generator, as psycopg does; left
    suspended, it fails when collected ("Exception ignored", an error under pytest)."""

    async def test(connection: WatchedConnection, url: str) -> None:
        async def piped() -> None:
            async with connection.pipeline():
                await connection.execute("SELECT pg_sleep(30)")

        task = asyncio.create_task(piped())
        while connection.info.transaction_status != psycopg.pq.TransactionStatus.ACTIVE:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        del task
        gc.collect()
        cursor = await connection.execute("SELECT 5")
        assert await cursor.fetchone() == (5,)

    _run(test)


def test_a_pipeline_ended_on_a_lost_connection_leaves_no_generator_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transaction whose connection the server ended (an outage, a proxy cut) is rolled
    back and its pipeline exited by the store, on a connection already lost: the exit fails
    at once, as psycopg's does, with no generator started and left for the collector to
    finish (it would fail there, "Exception ignored", blamed on whichever test runs then)."""
    unseen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unseen.append(repr(u.exc_value)))

    async def test(connection: WatchedConnection, url: str) -> None:
        async with contextlib.AsyncExitStack() as admin_stack:
            admin = await admin_stack.enter_async_context(
                await psycopg.AsyncConnection.connect(url, autocommit=True)
            )
            piped = contextlib.AsyncExitStack()
            await piped.enter_async_context(connection.pipeline())
            cursor = await connection.execute("SELECT 1")
            assert await cursor.fetchone() == (1,)
            fd = connection.pgconn.socket
            await admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while _registered(fd):  # the reader took the end of the session in
                assert loop.time() < deadline, "still watched after the session ended"
                await asyncio.sleep(0.01)
            with pytest.raises(psycopg.OperationalError):
                await connection.execute("ROLLBACK")
            with pytest.raises(psycopg.OperationalError):
                await piped.aclose()
        gc.collect()
        assert unseen == []

    _run(test)


def test_the_server_ending_the_session_while_idle_unregisters_and_the_next_statement_fails() -> (
    None
):
    async def test(connection: WatchedConnection, url: str) -> None:
        cursor = await connection.execute("SELECT pg_backend_pid()")
        row = await cursor.fetchone()
        assert row is not None
        fd = connection.pgconn.socket
        assert _registered(fd)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        # The socket turns readable with no statement waiting: the registration goes.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while _registered(fd):
            assert loop.time() < deadline, "still watched after the server ended the session"
            await asyncio.sleep(0.01)
        # The next statement fails at once, as psycopg's own wait would (no hang).
        with pytest.raises(psycopg.OperationalError):
            await asyncio.wait_for(connection.execute("SELECT 1"), 10)

    _run(test)


def test_a_wait_with_a_timeout_is_psycopgs_own_and_leaves_nothing_registered() -> None:
    async def test(connection: WatchedConnection, url: str) -> None:
        await connection.execute("SELECT 1")
        fd = connection.pgconn.socket
        assert _registered(fd)
        # notifies() with a timeout waits psycopg's way: the kept registration is dropped
        # first (psycopg registers and unregisters its own).
        received = [n async for n in connection.notifies(timeout=0.05)]
        assert received == []
        assert not _registered(fd)
        cursor = await connection.execute("SELECT 3")
        assert await cursor.fetchone() == (3,)
        assert _registered(fd)

    _run(test)
