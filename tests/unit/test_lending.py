"""The PostgreSQL store's connections handed from statement to statement while every one is
lent (hostcall/store/postgres/lending.py), on a real database: every waiter gets one, in
turn, a waiter cancelled while it waits loses nobody a connection, and one given back in a
transaction goes back to the pool, which rolls it back, never to the next statement."""

from __future__ import annotations

import asyncio

import pytest
from psycopg_pool import PoolClosed

from hostcall.store.postgres.connections import PostgresConnections
from tests.support.databases import fresh_schema


def _run(test: object, *, pool_wait: float = 5.0) -> None:
    with fresh_schema() as url:
        db = PostgresConnections(url, pool_max=1, pool_wait=pool_wait)

        async def main() -> None:
            try:
                await test(db)  # type: ignore[operator]
            finally:
                await db.close_pool()

        asyncio.run(main())


async def _waiting(db: PostgresConnections, n: int) -> None:
    """Until ``n`` statements wait for a connection (polled: the waiting has no event)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while db.connection_waiters() < n:
        assert loop.time() < deadline, f"{n} statements never waited for a connection"
        await asyncio.sleep(0.01)


def test_waiters_on_a_one_connection_pool_each_get_it_in_turn_and_a_cancelled_one_loses_none() -> (
    None
):
    async def test(db: PostgresConnections) -> None:
        held = await db._borrow()  # every connection lent
        waiters = [asyncio.ensure_future(db.one("SELECT %s::int AS n", (n,))) for n in range(4)]
        await _waiting(db, 4)
        waiters[1].cancel()
        await db._give_back(held)  # handed to the first waiter, then on down the queue
        done = await asyncio.gather(*waiters, return_exceptions=True)
        assert isinstance(done[1], asyncio.CancelledError)
        assert [r for i, r in enumerate(done) if i != 1] == [{"n": 0}, {"n": 2}, {"n": 3}]
        # Nothing lent, nobody waiting: the one connection is free for the next statement.
        assert db._lender._places == 0 and db.connection_waiters() == 0
        assert await asyncio.wait_for(db.one("SELECT 1 AS one"), 5) == {"one": 1}

    _run(test)


def test_a_connection_given_back_in_a_transaction_is_not_handed_over_in_it() -> None:
    async def test(db: PostgresConnections) -> None:
        left = await db._borrow()
        await left.execute("BEGIN")
        await left.execute("CREATE TEMP TABLE leftover (n int)")
        waiter = asyncio.ensure_future(db.one("SELECT pg_current_xact_id_if_assigned() AS x"))
        await _waiting(db, 1)
        await db._give_back(left)  # in a transaction: to the pool, which rolls it back
        # The waiter takes it from the pool at once, not after its wait for a connection
        # runs out (60 s here: a ceiling of 30 tells the two apart on a loaded machine).
        assert await asyncio.wait_for(waiter, 30) == {"x": None}
        assert await db.one("SELECT to_regclass('pg_temp.leftover') AS t") == {"t": None}

    _run(test, pool_wait=60.0)


@pytest.mark.parametrize("cancelled_first", [True, False])
def test_a_waiter_cancelled_as_it_is_handed_the_connection_passes_it_on(
    cancelled_first: bool,
) -> None:
    async def test(db: PostgresConnections) -> None:
        held = await db._borrow()
        first = asyncio.ensure_future(db.one("SELECT 1 AS n"))
        second = asyncio.ensure_future(db.one("SELECT 2 AS n"))
        await _waiting(db, 2)
        if cancelled_first:
            first.cancel()
            await db._give_back(held)
        else:
            await db._give_back(held)  # the first waiter has it, and is cancelled before it runs
            first.cancel()
        assert await asyncio.wait_for(second, 5) == {"n": 2}
        assert first.cancelled()
        assert await asyncio.wait_for(db.one("SELECT 3 AS n"), 5) == {"n": 3}
        assert db._lender._places == 0

    _run(test)


def test_a_statement_waiting_when_the_pool_closes_fails_at_once() -> None:
    async def test(db: PostgresConnections) -> None:
        held = await db._borrow()
        waiter = asyncio.ensure_future(db.one("SELECT 1 AS n"))
        await _waiting(db, 1)
        await db.close_pool()
        with pytest.raises(PoolClosed):
            await asyncio.wait_for(waiter, 1)  # not the pool's 5 s wait
        await db._give_back(held)

    _run(test)
