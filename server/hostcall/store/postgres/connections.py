"""The PostgreSQL store's connections: an async pool, and the transaction of each task.

Every statement is awaited on a ``psycopg.AsyncConnection`` lent from a
``psycopg_pool.AsyncConnectionPool`` (hostcall/store/postgres/lending.py), so a round trip
to the database never blocks the event loop. Outside a transaction a statement borrows a
pooled connection in autocommit mode for its one round trip. Inside ``transaction()`` the
task that opened it keeps one connection, in pipeline mode, until COMMIT: its statements go
to that connection (they are found by task, not by context variable, so a task spawned
inside a transaction does not inherit it), and other tasks' statements go to other
connections meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from hostcall import metrics
from hostcall.store.health import WriteHealth
from hostcall.store.postgres.dialing import redacted, timeouts
from hostcall.store.postgres.held import HeldWrite, Params, Row, Transaction
from hostcall.store.postgres.lending import Lender
from hostcall.store.postgres.watched import WatchedConnection

log = logging.getLogger(__name__)

# Pool bounds per process. Each connection is a PostgreSQL backend process: a handful is
# plenty (a statement holds one for a round trip; a transaction for a few). Fewer backends
# cost PostgreSQL less CPU for the same work (cluster bench, 200 conversations at
# once, one and two processes: 10 -> 5 connections, PostgreSQL's CPU per conversation -11
# to -16%, Hostcall's about the same; 20 had cost PostgreSQL more; bench/README.md). Likely
# because each backend finds more statements waiting when it wakes, and fewer wait on each
# other's locks.
POOL_MIN = 2
POOL_MAX = 5
# How long a statement waits for a pooled connection before this process asks whether
# PostgreSQL is there at all. A connection is held for a round trip or a few, so a healthy
# pool answers in milliseconds; when PostgreSQL is down the pool has none to give, and a
# request should fail in seconds (503 store_unavailable), not hang for the pool's default
# 30. A pool that is only busy (a starved CPU holds connections longer) is not a failure:
# the statement waits on (hostcall/store/postgres/lending.py).
# HOSTCALL_DB_POOL_WAIT_SECONDS sets it.
POOL_WAIT_SECONDS = 3.0
# How long the pool keeps retrying a connection it lost (backing off: 1 s, 2 s, 4 s, ...)
# before it gives up, and the next statement that needs one tries again at once. Its
# default, 300 s, let the back-off grow to half a minute: PostgreSQL back after a 40 s
# outage could wait that long for its first connection. Short, it is back within seconds.
RECONNECT_SECONDS = 5.0
_PLACEHOLDER = re.compile(r"%s")


# What sends a transaction's held writes, deferred appends and held messages (see
# ``PostgresConnections.flush_with``): the current transaction, and whether to send all.
Flush = Callable[[Transaction, bool], Awaitable[None]]


class PostgresConnections:
    """What every part of ``PostgresStore`` shares, one object: the pool, ``transaction()``
    and the four ways to send a statement (``run`` sends and, in a transaction, does not
    wait; ``count``, ``one`` and ``all`` wait for the answer)."""

    def __init__(
        self, url: str, *, pool_max: int = POOL_MAX, pool_wait: float = POOL_WAIT_SECONDS
    ) -> None:
        self.url = url
        # dict_row makes every connection's rows dicts; the pool's type cannot say so itself.
        pool = cast(
            AsyncConnectionPool[psycopg.AsyncConnection[Row]],
            AsyncConnectionPool(
                url,
                min_size=min(POOL_MIN, pool_max),
                max_size=pool_max,
                kwargs={"autocommit": True, "row_factory": dict_row, **timeouts(url)},
                connection_class=WatchedConnection,
                open=False,
                name="hostcall",
                timeout=pool_wait,
                reconnect_timeout=RECONNECT_SECONDS,
            ),
        )
        self._transactions: dict[asyncio.Task[Any], Transaction] = {}
        # The last write PostgreSQL refused (a full disk, read-only): /healthz says so.
        self._health = WriteHealth()
        self._pool = pool  # (its settings, for the tests)
        self._lender = Lender(pool, pool_max=pool_max, target=redacted(url), probe=self._probe_once)
        # What every statement calls: a connection lent, and given back.
        self._borrow = self._lender.lend
        self._give_back = self._lender.give_back
        metrics.DB_POOL_SIZE.set(pool_max)
        self._flush: Flush | None = None

    def flush_with(self, flush: Flush) -> None:
        """Who sends what a transaction holds back: the event log, which knows how to carry
        held writes and messages inside its appends (events.py). Set once, before the first
        transaction."""
        self._flush = flush

    def refused_write(self) -> str | None:
        return self._health.refused()

    def connection_waiters(self) -> int:
        return self._lender.waiters

    async def close_pool(self) -> None:
        await self._lender.close()

    def current(self) -> Transaction | None:
        task = asyncio.current_task()
        return self._transactions.get(task) if task is not None else None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One transaction, in pipeline mode: statements whose results nobody reads (inserts,
        most event appends) go out without waiting for their answers, so a transaction
        costs a round trip per result read plus one to end it, not one per statement.
        Errors still surface before the transaction ends (at its end at the latest).
        The connection is taken with the first statement that is read, or the second sent;
        a transaction of one statement sends it alone, autocommitted. A nested call from
        the same task joins the open transaction.

        No BEGIN or COMMIT (two statements of every transaction, ~100 us of this
        process's CPU together): a pipeline's statements up to its Sync are one implicit
        transaction, which the Sync commits, or rolls back if one of them failed. Nothing
        here sends a Sync before the end (``count`` reads its rows instead of syncing).
        An exception of our own sends ROLLBACK first, so the Sync commits nothing.
        """
        task = asyncio.current_task()
        assert task is not None, "a transaction runs in a task"
        if task in self._transactions:
            yield
            return
        current = self._transactions[task] = Transaction()
        ending = False
        try:
            yield
            await self._send_deferred(current)
            if current.connection is None and len(current.unsent) == 1:
                # A pipeline's set-up and Sync cost ~40 us more for the same round trip.
                await self._alone(*current.unsent.pop())
                self._health.committed()
            elif current.connection is None and current.unsent:
                await self._begin(current)
            if current.connection is not None:
                ending = True
                await current.piped.aclose()  # the Sync commits: an error raises here
                self._health.committed()  # it sent something, and it committed
            for then in current.committed:
                then()
        except BaseException as exc:
            self._health.failed(exc)
            # Nothing may commit: ROLLBACK (which the server skips if an error already
            # aborted the pipeline: the Sync then rolls back), then the Sync. If the
            # connection is still in a transaction after that, or broken, the pool's
            # putconn rolls it back or discards it.
            connection = current.connection
            if connection is not None:
                with contextlib.suppress(psycopg.Error):
                    if not ending:
                        await connection.execute("ROLLBACK")
                with contextlib.suppress(psycopg.Error):
                    await current.piped.__aexit__(*sys.exc_info())
                if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        await connection.execute("ROLLBACK")
            raise
        finally:
            del self._transactions[task]
            if current.connection is not None:
                await self._give_back(current.connection)

    async def _begin(self, current: Transaction) -> psycopg.AsyncConnection[Row]:
        connection = current.connection = await self._borrow()
        current.pipeline = await current.piped.enter_async_context(connection.pipeline())
        unsent, current.unsent = current.unsent, []
        for sql, params in unsent:
            await connection.execute(sql, params)
        return connection

    async def _probe_once(self) -> bool:
        """Whether a connection of its own, past the pool's bound, opens (and it is closed
        at once): the lender's check that PostgreSQL is there at all."""
        try:
            connection = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, **timeouts(self.url)
            )
        except (psycopg.Error, OSError):
            return False
        with contextlib.suppress(psycopg.Error):
            await connection.close()
        return True

    async def _in(self, current: Transaction, *, reads: bool) -> psycopg.AsyncConnection[Row]:
        """The transaction's connection. ``reads``: the caller reads the statement's answer,
        which must see every event appended and message added before it in the
        transaction (the deferred ones are sent first). A statement that reads none of
        ``events``, ``conversations`` and ``messages`` (the only tables a held write
        touches) passes ``sees_appends=False`` to ``one``, ``all`` or ``count``: the
        held writes wait for a later statement or COMMIT, and go in together (one
        statement, not one per read in between)."""
        if current.writes or (reads and (current.deferred or current.messages or current.touched)):
            await self._send_deferred(current, everything=reads)
        return current.connection or await self._begin(current)

    def lease_written(self) -> None:
        """The task's transaction writes a lease: what its fences proved may no longer hold
        (see ``Transaction.fenced``)."""
        current = self.current()
        if current is not None:
            current.fenced.clear()

    async def hold(
        self,
        current: Transaction,
        table: str,
        ctes: str,
        values: Sequence[Any],
        *,
        fence: tuple[str, str] | None = None,
        check: str = "",
    ) -> None:
        """Hold a write whose answer nobody reads: it goes out inside the transaction's next
        statement (any statement: held writes keep their order with the others), or its
        flush of appends at COMMIT, as CTEs of that one statement. ``ctes`` names its CTEs
        ``{p}<name>`` and takes ``values`` as %s, in order: both are made unique here.
        ``table``: what it writes. One statement's CTEs run in no set order, so a second
        write of one table sends the first before it is held (two rows inserted by two CTEs
        could take their ``pos`` in either order). ``fence`` and ``check``: see ``HeldWrite``
        (``check`` names CTEs as ``ctes`` does)."""
        if any(w.table == table for w in current.writes):
            await self._send_deferred(current, everything=False)
        current.serial += 1
        prefix = f"h{current.serial}_"
        names = iter(range(len(values)))
        sql = _PLACEHOLDER.sub(lambda _: f"%({prefix}{next(names)})s", ctes.replace("{p}", prefix))
        params = {f"{prefix}{i}": value for i, value in enumerate(values)}
        current.writes.append(HeldWrite(sql, params, table, fence, check.replace("{p}", prefix)))

    def after_commit(self, then: Callable[[], None]) -> None:
        """Call ``then`` once what the task sent so far is committed: at its transaction's
        COMMIT, or now if it has none (its statements were autocommitted)."""
        current = self.current()
        if current is None:
            then()
        else:
            current.committed.append(then)

    async def _send_deferred(self, current: Transaction, *, everything: bool = True) -> None:
        """Send the transaction's held writes, and with ``everything`` its deferred appends
        and held messages too (``flush_with``)."""
        if self._flush is not None:
            await self._flush(current, everything)
        else:
            assert not current.writes, "held writes, and nothing set to send them"

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """The task's transaction's connection, or a pooled one for the block."""
        current = self.current()
        if current is not None:
            yield await self._in(current, reads=True)
            return
        connection = await self._borrow()
        try:
            yield connection
        finally:
            await self._give_back(connection)

    # The four ways to send a statement: spelled out, as they run for every statement.

    async def run(self, sql: str, params: Params = None) -> None:
        current = self.current()
        if current is not None:
            if current.writes:
                await self._send_deferred(current, everything=False)
            if current.connection is None:  # the first: it may be the only one
                current.unsent.append((sql, params))
                return
            await current.connection.execute(sql, params)
            return
        await self._alone(sql, params)

    async def _alone(self, sql: str, params: Params) -> None:
        connection = await self._borrow()
        try:
            await connection.execute(sql, params)
        finally:
            await self._give_back(connection)

    async def count(self, sql: str, params: Params = None, *, sees_appends: bool = True) -> int:
        """Rows the statement (an INSERT, UPDATE or DELETE) changed. In a transaction, read
        as rows it returns: the rowcount waits for a Sync, which would commit."""
        current = self.current()
        if current is not None:
            connection = await self._in(current, reads=sees_appends)
            cursor = await connection.execute(sql + " RETURNING 1", params)
            return len(await cursor.fetchall())
        connection = await self._borrow()
        try:
            return (await connection.execute(sql, params)).rowcount
        finally:
            await self._give_back(connection)

    async def one(
        self, sql: str, params: Params = None, *, sees_appends: bool = True
    ) -> Row | None:
        current = self.current()
        if current is not None:
            cursor = await (await self._in(current, reads=sees_appends)).execute(sql, params)
            return await cursor.fetchone()
        connection = await self._borrow()
        try:
            return await (await connection.execute(sql, params)).fetchone()
        finally:
            await self._give_back(connection)

    async def all(self, sql: str, params: Params = None, *, sees_appends: bool = True) -> list[Row]:
        current = self.current()
        if current is not None:
            cursor = await (await self._in(current, reads=sees_appends)).execute(sql, params)
            return await cursor.fetchall()
        connection = await self._borrow()
        try:
            return await (await connection.execute(sql, params)).fetchall()
        finally:
            await self._give_back(connection)


class Part:
    """One aggregate's statements, on the store's shared ``PostgresConnections``."""

    def __init__(self, db: PostgresConnections) -> None:
        self.db = db
