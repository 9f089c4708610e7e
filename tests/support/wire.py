"""What a store sends to its database per operation of a conversation: statements and round
trips, counted where they leave the process. A count does not move with the machine's load,
so it shows what a change to the store's statements bought, and a test can hold it.

- PostgreSQL: every statement a psycopg cursor executes, async or not (the lease renewal
  thread's too). A round trip is a wait for the server's answer: a statement outside a
  pipeline; inside one (a transaction, hostcall/store/postgres/connections.py), a fetch of
  a result not read yet, and the Sync that ends it. A statement sent inside a pipeline whose
  answer nobody reads costs no round trip of its own.
- SQLite: every statement its connection runs (``set_trace_callback``), BEGIN and COMMIT
  counted apart. A statement is a call into the library, not a round trip.

``turn`` drives one conversation through the load bench's flow (bench/load_flow.py: create,
capabilities, stream, message, dispatch, delivered, result, ``RUN_FINISHED``) against a live
server and returns the counts per operation; ``fan_out`` the same with the stream on a
second server (another process's), where each event reaches the stream through NOTIFY.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from psycopg import AsyncCursor, AsyncPipeline, Cursor

from tests.support.harness import BOARD, Conv
from tests.support.live import Frame, Live, frames

ASK = "What should I work on next?"
DISPATCH = "hostcall.tool_call_dispatch"
# The flow's operations, in order, each with what it waits for before the next is counted.
OPERATIONS = (
    "create conversation",
    "capabilities",
    "open stream",
    "post message -> dispatch",
    "delivered",
    "result -> RUN_FINISHED",
    "stream replay (reopened, all events)",
)
# The lease renewal (hostcall/leases.py): every process renews its leases on a clock of its
# own, however many conversations it serves; it is not counted.
RENEWAL = "UPDATE leases SET until = "
QUIET = 0.15  # seconds with no statement counted: the operation's work is done


@dataclass
class Tally:
    """Counts since the last ``take``: statements (by first word), round trips."""

    statements: Counter[str] = field(default_factory=Counter)
    round_trips: int = 0
    sent: list[str] = field(default_factory=list)  # each statement, as one line
    changed: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def statement(self, sql: str, *, round_trip: bool) -> None:
        if sql.lstrip().startswith(RENEWAL) and " WHERE owner = " in sql:
            return  # the process's, on its own clock: not a conversation's
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
        with self.lock:
            self.statements[word] += 1
            self.sent.append(("* " if round_trip else "  ") + " ".join(sql.split()))
            self.round_trips += round_trip
            self.changed = time.monotonic()

    def round_trip(self) -> None:
        with self.lock:
            self.round_trips += 1
            self.sent.append("* (waits for an answer)")
            self.changed = time.monotonic()

    def take(self) -> Counted:
        """What was counted since the last take, once nothing more has been for ``QUIET``
        seconds (a run's step goes on after the request that started it answered)."""
        while time.monotonic() - self.changed < QUIET:
            time.sleep(QUIET / 3)
        with self.lock:
            taken = Counted(Counter(self.statements), self.round_trips, tuple(self.sent))
            self.statements.clear()
            self.sent.clear()
            self.round_trips = 0
        return taken


@dataclass(frozen=True)
class Counted:
    by_word: Counter[str]
    round_trips: int
    sent: tuple[str, ...] = ()  # in order; "*": waited for an answer

    @property
    def statements(self) -> int:
        """Statements, without SQLite's BEGIN and COMMIT (PostgreSQL's transactions send
        none: a pipeline's Sync ends them)."""
        return sum(n for word, n in self.by_word.items() if word not in ("BEGIN", "COMMIT"))

    @property
    def transactions(self) -> int:
        return self.by_word["BEGIN"]


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tally]:
    """Counts every psycopg statement and round trip in this process from here on (SQLite
    stores are counted by ``count_sqlite``)."""
    tally = Tally()
    execute, execute_sync = AsyncCursor.execute, Cursor.execute
    fetch, end = AsyncCursor._fetch_pipeline, AsyncPipeline.__aexit__

    async def counted(self: AsyncCursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        tally.statement(str(query), round_trip=self._conn._pipeline is None)
        return await execute(self, query, *args, **kwargs)

    def counted_sync(self: Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        tally.statement(str(query), round_trip=True)
        return execute_sync(self, query, *args, **kwargs)

    async def fetched(self: AsyncCursor[Any]) -> None:
        if not self.pgresult and self._conn._pipeline:
            tally.round_trip()  # its answer is not here yet: flush, and wait for it
        await fetch(self)

    async def ended(self: AsyncPipeline, *exc: Any) -> None:
        tally.round_trip()  # the Sync, and every answer not read yet
        await end(self, *exc)

    monkeypatch.setattr(AsyncCursor, "execute", counted)
    monkeypatch.setattr(Cursor, "execute", counted_sync)
    monkeypatch.setattr(AsyncCursor, "_fetch_pipeline", fetched)
    monkeypatch.setattr(AsyncPipeline, "__aexit__", ended)
    yield tally


def count_sqlite(live: Live, tally: Tally) -> None:
    """Counts every statement of the live server's SQLite store into ``tally``."""
    connection: sqlite3.Connection = live.app.state.hostcall.store.db.connection
    connection.set_trace_callback(lambda sql: tally.statement(sql, round_trip=False))


def _until(stream: Iterator[Frame], event: str) -> Frame:
    for frame in stream:
        if frame.event == event:
            return frame
    raise AssertionError(f"the stream ended before {event}")


def turn(live: Live, tally: Tally, streamed: Live | None = None) -> dict[str, Counted]:
    """One conversation of the load bench's flow on ``live``, its stream on ``streamed``
    (default: the same server); the counts of each of ``OPERATIONS``."""
    streamed = streamed or live
    found: dict[str, Counted] = {}
    tally.take()  # nothing of before
    r = live.client.post("/api/agents/load/conversations")
    assert r.status_code == 201, r.text
    body = r.json()
    conv = Conv(body["conversationId"], body["sessionToken"], body["streamToken"])
    found["create conversation"] = tally.take()
    r = live.client.post(
        f"/api/conversations/{conv.id}/capabilities",
        json={"tools": ["read_board_tasks", "create_task"]},
        headers=conv.auth,
    )
    assert r.status_code == 200, r.text
    found["capabilities"] = tally.take()
    with ExitStack() as stack:
        response = stack.enter_context(
            streamed.client.stream("GET", streamed.events_url(conv), timeout=30.0)
        )
        assert response.status_code == 200
        stream = frames(response)
        found["open stream"] = tally.take()
        r = live.client.post(
            f"/api/conversations/{conv.id}/messages", json={"text": ASK}, headers=conv.auth
        )
        assert r.status_code == 202, r.text
        call = _until(stream, DISPATCH).data["value"]
        found["post message -> dispatch"] = tally.take()
        r = live.client.post(
            f"/api/calls/{call['toolCallId']}/delivered", json={"token": call["resultToken"]}
        )
        assert r.status_code == 200 and r.json()["first"], r.text
        found["delivered"] = tally.take()
        r = live.client.post(
            f"/api/calls/{call['toolCallId']}/result",
            json={"token": call["resultToken"], "output": BOARD},
        )
        assert r.status_code == 200, r.text
        _until(stream, "RUN_FINISHED")
        found["result -> RUN_FINISHED"] = tally.take()
    r = streamed.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert r.status_code == 200, r.text
    token = r.json()["streamToken"]
    with streamed.client.stream(
        "GET", streamed.events_url(conv, token=token), timeout=30.0
    ) as response:
        assert response.status_code == 200
        _until(frames(response), "RUN_FINISHED")
        found["stream replay (reopened, all events)"] = tally.take()
    return found


def total(found: dict[str, Counted], *, but: tuple[str, ...] = ()) -> Counted:
    words: Counter[str] = Counter()
    trips = 0
    for name, counted in found.items():
        if name not in but:
            words.update(counted.by_word)
            trips += counted.round_trips
    return Counted(words, trips)
