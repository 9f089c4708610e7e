"""The store's contract, on SQLite and on PostgreSQL alike (conftest's ``store`` fixture).

Races use real concurrency on PostgreSQL: one store (its own connection pool) per contender,
as separate processes would have, all awaited at once. A SQLite file has one process and one
connection: there the contenders take turns on it, whole transactions at a time.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hostcall.blocks import user_values
from hostcall.errors import LeaseLost, StoreError
from hostcall.guardrails import evaluate, parse_guardrails
from hostcall.protocol.events import (
    ReasoningEnd,
    ReasoningMessageContent,
    ReasoningMessageEnd,
    ReasoningMessageStart,
    ReasoningStart,
    RunFinished,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
    ToolCallStart,
)
from hostcall.store import Store, open_store
from hostcall.store.console_records import TITLE_CHARS, ConversationQuery, UsageRecord
from hostcall.store.migrations import Migration, pending
from hostcall.store.records import (
    Call,
    CallState,
    Conversation,
    OpenedStream,
    Run,
    RunStart,
    RunStatus,
    StoredMessage,
)
from hostcall.store.sqlite import SQLiteStore
from hostcall.transcript import recent_turns
from hostcall.visitors.visitor import Visitor

OPEN = [CallState.DISPATCHED, CallState.DELIVERED]


async def _conversation(store: Store, cid: str = "c1") -> None:
    await store.create_conversation(Conversation(cid, "planner", 1.0, "fr", ("read_board_tasks",)))


async def _call(store: Store, call_id: str = "k1", state: CallState = CallState.DISPATCHED) -> Call:
    call = Call(call_id, "c1", "r1", 1, "create_task", state, {"title": "é"}, '{"title":"é"}', 5.0)
    await store.add_call(call)
    return call


async def test_records_read_back_as_written(store: Store) -> None:
    await _conversation(store)
    assert await store.get_conversation("c1") == Conversation(
        "c1", "planner", 1.0, "fr", ("read_board_tasks",)
    )
    await store.set_handled_tools("c1", ("a", "b"))
    assert (await store.get_conversation("c1")).handled_tools == ("a", "b")
    assert await store.get_conversation("c_missing") is None

    first = StoredMessage("m1", "c1", "r1", "user", "bonjour ✓")
    second = StoredMessage(
        "m2",
        "c1",
        "r1",
        "assistant",
        "",
        tool_calls=({"id": "k1", "name": "t", "arguments": "{}"},),
    )
    await store.add_message(first)
    await store.add_message(second)
    assert await store.list_messages("c1") == [first, second]

    run = Run("r1", "c1", {"id": "planner", "nested": [1, None]}, RunStatus.RUNNING, simulate=True)
    await store.create_run(run)
    assert await store.get_run("r1") == run
    await store.update_run("r1", status=RunStatus.FAILED, step=3, error={"code": "x"})
    assert await store.get_run("r1") == Run(
        "r1", "c1", run.agent, RunStatus.FAILED, 3, {"code": "x"}, True
    )
    await store.create_run(Run("r2", "c1", {}, RunStatus.WAITING))
    assert (await store.latest_run("c1")).id == "r2"
    assert [r.id for r in await store.runs_with_status(RunStatus.WAITING)] == ["r2"]

    call = await _call(store)
    assert await store.get_call("k1") == call
    assert await store.list_calls("c1") == [call] == await store.calls_of_step("r1", 1)
    assert await store.calls_of_step("r1", 2) == []
    assert await store.count_calls("r1", "create_task") == 1
    assert await store.calls_in_states([CallState.DISPATCHED]) == [call]
    assert await store.due_calls(4.9) == [] and await store.due_calls(5.0) == [call]


async def test_a_call_moves_only_from_the_states_it_is_given(store: Store) -> None:
    await _call(store)
    assert not await store.transition_call("k1", [CallState.PROPOSED], CallState.ANSWERED)
    assert await store.transition_call(
        "k1", OPEN, CallState.ANSWERED, outcome={"output": [1]}, delivered=True
    )
    assert not await store.transition_call("k1", OPEN, CallState.FAILED, outcome={"error": {}})
    settled = await store.get_call("k1")
    assert settled is not None
    assert (settled.state, settled.outcome, settled.delivered) == (
        CallState.ANSWERED, {"output": [1]}, True,
    )  # fmt: skip
    assert await store.due_calls(100.0) == []


async def test_grants_are_per_conversation_and_tool(store: Store) -> None:
    assert not await store.has_grant("c1", "create_task")
    await store.add_grant("c1", "create_task", "k1")
    await store.add_grant("c1", "create_task", "k2")  # a second grant changes nothing
    assert await store.has_grant("c1", "create_task")
    assert not await store.has_grant("c2", "create_task")


async def test_events_are_numbered_per_conversation_without_gaps(store: Store) -> None:
    await _conversation(store, "c1")
    await _conversation(store, "c2")
    for i in range(3):
        await store.append_event("c1", TextMessageContent("m", f"{i}"))
    await store.append_event("c2", TextMessageContent("m", "0"))
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.append_event("c1", TextMessageContent("m", "rolled back"))
            raise RuntimeError
    event = await store.append_event("c1", TextMessageContent("m", "3"))
    assert event.seq == 4
    assert [(e.seq, e.data["delta"]) for e in await store.events_after("c1", 0)] == [
        (1, "0"), (2, "1"), (3, "2"), (4, "3"),
    ]  # fmt: skip
    assert [e.seq for e in await store.events_after("c1", 2, limit=1)] == [3]
    assert await store.last_seq("c1") == 4 and await store.last_seq("c2") == 1
    assert await store.last_seq("c_missing") == 0


async def test_reasoning_events_are_the_log_without_the_answers_text(store: Store) -> None:
    await _conversation(store, "c1")
    await store.append_events("c1", [
        ReasoningStart("r1"), ReasoningMessageStart("r1"), ReasoningMessageContent("r1", "hm"),
        ReasoningMessageEnd("r1"), ReasoningEnd("r1"),
        TextMessageStart("m1", "assistant"), TextMessageContent("m1", "answer"),
        ToolCallStart("k1", "lookup", "m1"), TextMessageEnd("m1"),
    ])  # fmt: skip
    found = await store.reasoning_events_after("c1", 0)
    assert [(e.seq, e.name) for e in found] == [
        (1, "REASONING_START"), (3, "REASONING_MESSAGE_CONTENT"), (6, "TEXT_MESSAGE_START"),
        (8, "TOOL_CALL_START"),
    ]  # fmt: skip
    assert [e.seq for e in await store.reasoning_events_after("c1", 3, limit=1)] == [6]


async def test_several_events_append_at_once_in_order_and_fenced_alike(store: Store) -> None:
    await _conversation(store)
    await store.append_event("c1", TextMessageContent("m", "0"))
    appended = await store.append_events(
        "c1", [TextMessageContent("m", "1"), TextMessageContent("m", "2")]
    )
    assert [(e.seq, e.data["delta"]) for e in appended] == [(2, "1"), (3, "2")]
    async with store.transaction():  # after an append in the same transaction, and before one
        await store.append_event("c1", TextMessageContent("m", "3"))
        inside = await store.append_events("c1", [TextMessageContent("m", f"{i}") for i in (4, 5)])
        last = await store.append_event("c1", TextMessageContent("m", "6"))
    assert [e.seq for e in inside] == [5, 6] and last.seq == 7
    assert await store.append_events("c1", []) == []
    # Fenced: all of them while the owner holds the lease; none once it lost it.
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    fenced = await store.append_events(
        "c1", [TextMessageContent("m", f"{i}") for i in (7, 8)], fence=("run:r1", "a")
    )
    assert [e.seq for e in fenced] == [8, 9]
    await store.take_lease("run:r1", "b", until=30.0, now=20.0)
    with pytest.raises(LeaseLost):
        await store.append_events(
            "c1", [TextMessageContent("m", "lost"), TextMessageContent("m", "lost")],
            fence=("run:r1", "a"),
        )  # fmt: skip
    stored = await store.events_after("c1", 0)
    assert [(e.seq, e.data["delta"]) for e in stored] == [(i + 1, f"{i}") for i in range(9)]
    assert await store.last_seq("c1") == 9


@pytest.mark.parametrize("count", [3, 32, 33, 70])
async def test_an_append_of_many_events_numbers_them_all_in_order(store: Store, count: int) -> None:
    # PostgreSQL writes up to 32 events as a VALUES list, more as two arrays.
    await _conversation(store)
    await store.append_event("c1", TextMessageContent("m", "first"))
    batch = [TextMessageContent("m", f'"{i}",\\{{}}é') for i in range(count)]
    appended = await store.append_events("c1", batch)
    assert [e.seq for e in appended] == list(range(2, count + 2))
    async with store.transaction():
        await store.append_event("c1", TextMessageContent("m", "x"))
        held = await store.append_events("c1", batch)  # held, then sent at COMMIT
    assert [e.seq for e in held] == list(range(count + 3, 2 * count + 3))
    stored = await store.events_after("c1", 0, limit=1000)
    deltas = [e.data["delta"] for e in stored]
    assert deltas == ["first", *(b.delta for b in batch), "x", *(b.delta for b in batch)]
    assert [e.seq for e in stored] == list(range(1, 2 * count + 3))


async def test_a_transaction_reads_back_every_event_it_appended(store: Store) -> None:
    # PostgreSQL holds a transaction's later appends back, to send them in one statement:
    # whatever the transaction reads must still see them, in order.
    await _conversation(store, "c1")
    await _conversation(store, "c2")
    async with store.transaction():
        for i in range(3):
            await store.append_event("c1", TextMessageContent("m", f"{i}"))
        await store.append_event("c2", TextMessageContent("m", "other"))
        await store.append_event("c1", TextMessageContent("m", "3"))
        inside = await store.events_after("c1", 0)
        assert [(e.seq, e.data["delta"]) for e in inside] == [(i + 1, f"{i}") for i in range(4)]
        assert await store.last_seq("c1") == 4
        await store.append_event("c1", TextMessageContent("m", "4"))
        await store.append_event("c2", TextMessageContent("m", "other 2"))
    after = await store.events_after("c1", 0)
    assert [(e.seq, e.data["delta"]) for e in after] == [(i + 1, f"{i}") for i in range(5)]
    assert [e.seq for e in await store.events_after("c2", 0)] == [1, 2]
    assert await store.last_seq("c1") == 5 and await store.last_seq("c2") == 2


async def test_appends_held_across_reads_of_other_tables_commit_in_order_or_not_at_all(
    store: Store,
) -> None:
    # PostgreSQL sends held appends only before a statement that reads events or
    # conversations, or at COMMIT: reads of calls, surfaces, grants and leases in between
    # leave them held, and nothing may be lost, reordered or numbered twice.
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
    await _call(store)
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)

    async def unit(tag: str) -> None:
        await store.append_event("c1", TextMessageContent("m", f"{tag}0"))
        await store.append_event("c1", TextMessageContent("m", f"{tag}1"))  # held
        assert await store.list_surfaces("c1") == []
        assert not await store.has_grant("c1", "create_task")
        assert await store.transition_call("k1", OPEN, CallState.DELIVERED, delivered=True)
        await store.append_event("c1", TextMessageContent("m", f"{tag}2"))  # held
        assert await store.update_run_leased("r1", ("run:r1", "a"), until=20.0, step=2)

    with pytest.raises(RuntimeError):
        async with store.transaction():
            await unit("x")
            raise RuntimeError
    assert await store.events_after("c1", 0) == [] and await store.last_seq("c1") == 0
    assert (await store.get_call("k1")).state is CallState.DISPATCHED
    async with store.transaction():
        await unit("y")
    stored = await store.events_after("c1", 0)
    assert [(e.seq, e.data["delta"]) for e in stored] == [(1, "y0"), (2, "y1"), (3, "y2")]
    assert await store.last_seq("c1") == 3
    assert (await store.get_run("r1")).step == 2


async def test_a_rolled_back_transaction_leaves_nothing(store: Store) -> None:
    await _conversation(store)
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
            async with store.transaction():  # nested: part of the outer one
                await _call(store)
            raise RuntimeError
    assert await store.get_run("r1") is None and await store.get_call("k1") is None


async def test_a_failing_statement_fails_its_transaction_and_leaves_nothing(store: Store) -> None:
    # PostgreSQL sends a transaction's statements pipelined: the error may arrive later than
    # the statement, but never after the transaction ends, and the store works on.
    await _conversation(store)
    await store.add_message(StoredMessage("m1", "c1", "r1", "user", "first"))
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        async with store.transaction():
            await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
            await store.add_message(StoredMessage("m1", "c1", "r1", "user", "same id"))
            await store.append_event("c1", TextMessageContent("m2", "x"))
            await store.append_event("c1", TextMessageContent("m2", "y"))
    assert await store.get_run("r1") is None
    assert await store.last_seq("c1") == 0 and await store.events_after("c1", 0) == []
    assert [m.text for m in await store.list_messages("c1")] == ["first"]
    async with store.transaction():
        await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
        event = await store.append_event("c1", TextMessageContent("m2", "x"))
    assert event.seq == 1 and await store.get_run("r1") is not None


async def test_messages_of_a_transaction_read_back_in_order_and_commit_together_or_not_at_all(
    store: Store,
) -> None:
    # PostgreSQL holds a transaction's messages back: each goes out with the transaction's
    # next append of its conversation, or before its next read of messages, or at COMMIT.
    await _conversation(store, "c1")
    await _conversation(store, "c2")
    first = StoredMessage("m0", "c1", "r0", "user", "before")
    await store.add_message(first)
    call = {"id": "k1", "name": "create_task", "arguments": '{"title":"é"}'}

    def written(tag: str) -> list[StoredMessage]:
        return [
            StoredMessage(f"{tag}1", "c1", "r1", "user", "with the first append"),
            StoredMessage(f"{tag}2", "c2", "r1", "user", "another conversation's"),
            StoredMessage(f"{tag}3", "c1", "r1", "assistant", "with a held append", (call,)),
            StoredMessage(f"{tag}4", "c1", "r1", "assistant", "cut", interrupted=True),
            StoredMessage(f"{tag}5", "c1", "r1", "tool", '{"ok":1}', (), "k1", "create_task"),
        ]

    async def unit(tag: str) -> None:
        one, other, held, cut, tool = written(tag)
        await store.add_message(one)
        await store.add_message(other)
        await store.append_event("c1", TextMessageContent("m", f"{tag}x"))
        await store.add_message(held)
        await store.append_event("c1", TextMessageContent("m", f"{tag}y"))  # itself held
        assert await store.list_messages("c1") == [first, one, held]
        assert await store.list_messages("c2") == [other]
        await store.add_message(cut)
        await store.add_message(tool)  # two messages, no append after them: at COMMIT

    with pytest.raises(RuntimeError):
        async with store.transaction():
            await unit("x")
            raise RuntimeError
    assert await store.list_messages("c1") == [first] and await store.list_messages("c2") == []
    assert await store.last_seq("c1") == 0
    async with store.transaction():
        await unit("y")
    one, other, held, cut, tool = written("y")
    assert await store.list_messages("c1") == [first, one, held, cut, tool]
    assert await store.list_messages("c2") == [other]
    assert [e.data["delta"] for e in await store.events_after("c1", 0)] == ["yx", "yy"]


async def test_a_fenced_append_that_lost_its_lease_leaves_no_message_of_its_transaction(
    store: Store,
) -> None:
    # A step's message goes out inside its fenced append on PostgreSQL: a process that
    # lost the run's lease stores neither.
    await _conversation(store)
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    await store.take_lease("run:r1", "b", until=30.0, now=20.0)  # a stalled; b took it over
    late = StoredMessage("m1", "c1", "r1", "assistant", "late")
    with pytest.raises(LeaseLost):
        async with store.transaction():
            await store.add_message(late)
            await store.append_events(
                "c1", [TextMessageContent("m1", "late")], fence=("run:r1", "a")
            )
    assert await store.list_messages("c1") == [] and await store.events_after("c1", 0) == []
    kept = StoredMessage("m2", "c1", "r1", "assistant", "kept")
    async with store.transaction():
        await store.add_message(kept)
        await store.append_events("c1", [TextMessageContent("m2", "kept")], fence=("run:r1", "b"))
    assert await store.list_messages("c1") == [kept]
    assert [e.seq for e in await store.events_after("c1", 0)] == [1]


async def test_a_step_s_calls_and_end_are_seen_by_its_reads_and_commit_with_it_or_not_at_all(
    store: Store,
) -> None:
    # PostgreSQL holds a transaction's new calls, and a step's end once a fenced append of
    # the transaction found the lease held, and sends them with its next statement or at
    # COMMIT, in one statement with the held appends: its reads must see them all the same.
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    fence = ("run:r1", "a")

    async def step(tag: str) -> None:
        await store.append_event("c1", TextMessageContent("m", f"{tag}0"), fence=fence)
        first = await _call(store)
        await _call(store, "k2", CallState.PROPOSED)
        assert await store.get_call("k1") == first
        assert await store.count_calls("r1", "create_task") == 2
        moved = await store.transition_call("k2", [CallState.PROPOSED], CallState.DISPATCHED)
        assert moved is not None and moved.state is CallState.DISPATCHED
        await store.append_event("c1", TextMessageContent("m", f"{tag}1"))
        await _call(store, "k3")
        assert await store.update_run_leased(
            "r1", fence, status=RunStatus.WAITING, step=1
        )  # fmt: skip

    with pytest.raises(RuntimeError):
        async with store.transaction():
            await step("x")
            raise RuntimeError
    assert await store.list_calls("c1") == [] and await store.last_seq("c1") == 0
    run = await store.get_run("r1")
    assert run is not None and (run.status, run.step) == (RunStatus.RUNNING, 0)
    async with store.transaction():
        await step("y")
    assert [(c.id, c.state) for c in await store.list_calls("c1")] == [
        ("k1", CallState.DISPATCHED),
        ("k2", CallState.DISPATCHED),
        ("k3", CallState.DISPATCHED),
    ]
    assert [e.data["delta"] for e in await store.events_after("c1", 0)] == ["y0", "y1"]
    run = await store.get_run("r1")
    assert run is not None and (run.status, run.step) == (RunStatus.WAITING, 1)
    assert await store.take_lease("run:r1", "b", until=10.0, now=0.0)  # released


async def test_a_step_s_end_fails_its_transaction_if_the_lease_went_after_its_fenced_append(
    store: Store,
) -> None:
    # On PostgreSQL the step's end is held, unasked, once a fence of the transaction found
    # the lease held, unless the transaction wrote a lease since (here it let it go): then
    # it is asked, finds the lease gone, and the transaction fails whole.
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    fence = ("run:r1", "a")
    with pytest.raises(LeaseLost):
        async with store.transaction():
            await store.append_event("c1", TextMessageContent("m", "x"), fence=fence)
            await store.release_lease(*fence)
            await _call(store)
            if not await store.update_run_leased("r1", fence, status=RunStatus.FINISHED, step=1):
                raise LeaseLost(*fence)  # as Leases.end_step does
    assert await store.list_calls("c1") == [] and await store.last_seq("c1") == 0
    run = await store.get_run("r1")
    assert run is not None and run.status is RunStatus.RUNNING
    assert not await store.take_lease("run:r1", "b", until=20.0, now=5.0)  # still a's


async def _end_then_append(store: Store, run_id: str, fence: tuple[str, str], **end: Any) -> None:
    """A run's end, then its last events fenced, in one transaction (a finished step)."""
    async with store.transaction():
        if not await store.update_run_leased(run_id, fence, **end):
            raise LeaseLost(*fence)  # as Leases.end_step does
        events = [TextMessageContent("m", "last"), RunFinished("c1", run_id)]
        await store.append_events("c1", events, fence=fence)


async def test_a_run_s_end_before_its_fenced_last_events_is_made_only_with_them(
    store: Store,
) -> None:
    # A finished step ends its run, then appends its last events (PostgreSQL: one statement,
    # the end made only if the append's fence holds; SQLite: the fence knows the
    # transaction let the lease go while it was held).
    await _conversation(store)
    for run_id in ("r1", "r2", "r3"):
        await store.create_run(Run(run_id, "c1", {}, RunStatus.RUNNING, step=1))
        await store.take_lease(f"run:{run_id}", "a", until=10.0, now=0.0)
    await _end_then_append(store, "r1", ("run:r1", "a"), status=RunStatus.FINISHED, step=2)
    run = await store.get_run("r1")
    assert run is not None and (run.status, run.step) == (RunStatus.FINISHED, 2)
    assert [e.seq for e in await store.events_after("c1", 0)] == [1, 2]
    assert await store.take_lease("run:r1", "c", until=1.0, now=0.0)  # released
    assert await store.release_lease("run:r1", "c")
    # Renewed, not released: the same.
    await _end_then_append(
        store, "r2", ("run:r2", "a"), until=99.0, status=RunStatus.RUNNING, step=2
    )
    assert (await store.get_run("r2")).step == 2
    assert await store.expired_leases(50.0) == ["run:r3"]  # r2's renewed to 99
    # Another process took the lease over: neither the end nor the events are made.
    assert await store.take_lease("run:r3", "b", until=30.0, now=20.0)
    with pytest.raises(LeaseLost):
        await _end_then_append(store, "r3", ("run:r3", "a"), status=RunStatus.FINISHED, step=2)
    run = await store.get_run("r3")
    assert run is not None and (run.status, run.step) == (RunStatus.RUNNING, 1)
    assert await store.last_seq("c1") == 4
    assert await store.keep_lease("run:r3", "b", until=40.0)  # still b's
    # Nor when no fenced append follows it: checked where it goes out (at COMMIT here).
    with pytest.raises(LeaseLost):
        async with store.transaction():
            if not await store.update_run_leased("r3", ("run:r3", "a"), status=RunStatus.FAILED):
                raise LeaseLost("run:r3", "a")
            await store.append_event("c1", TextMessageContent("m", "unfenced"))
    assert (await store.get_run("r3")).status is RunStatus.RUNNING
    assert await store.last_seq("c1") == 4


async def test_a_first_stream_redeems_its_ticket_only_for_its_conversation_and_generation(
    store: Store,
) -> None:
    await _conversation(store)
    conversation = await store.get_conversation("c1")
    # No conversation, or another session generation: refused, and the ticket stays usable.
    assert await store.open_stream("c_missing", 0, "n1", 100.0, 1.0) == OpenedStream(None, False)
    assert await store.open_stream("c1", 1, "n1", 100.0, 1.0) == OpenedStream(conversation, False)
    assert await store.open_stream("c1", 0, "n1", 100.0, 1.0) == OpenedStream(conversation, True)
    used = await store.open_stream("c1", 0, "n1", 100.0, 2.0)
    assert used == OpenedStream(conversation, False)
    assert not await store.consume_ticket("n1", 100.0, 2.0)
    assert await store.rotate_session("c1", 0)
    rotated = await store.get_conversation("c1")
    assert rotated is not None and rotated.session_generation == 1
    assert await store.open_stream("c1", 0, "n2", 100.0, 3.0) == OpenedStream(rotated, False)
    assert await store.open_stream("c1", 1, "n2", 100.0, 3.0) == OpenedStream(rotated, True)
    # With the conversation's last seq as the same read saw it, redeemed or not.
    await store.append_events("c1", [TextMessageContent("m", "a"), TextMessageContent("m", "b")])
    assert await store.open_stream("c1", 1, "n3", 100.0, 4.0) == OpenedStream(rotated, True, 2)
    assert await store.open_stream("c1", 0, "n4", 100.0, 4.0) == OpenedStream(rotated, False, 2)


# ---- races -----------------------------------------------------------------------------


def _peers(store: Store, store_target: str | Path, count: int) -> list[Store]:
    """``count`` handles on the same data: SQLite shares its one connection."""
    if isinstance(store, SQLiteStore):
        return [store] * count
    return [open_store(store_target) for _ in range(count)]


async def _race(peers: list[Store], attempt: Callable[[Store, int], Awaitable[bool]]) -> list[int]:
    """Every contender at once: on PostgreSQL each peer has its own connections, so the
    database sees the transactions overlap; a SQLite file's tasks take turns, whole
    transactions at a time (its statements never yield to another task)."""
    won = await asyncio.gather(*(attempt(peer, index) for index, peer in enumerate(peers)))
    return [index for index, winner in enumerate(won) if winner]


async def test_concurrent_answers_have_one_winner_whose_result_is_stored(
    store: Store, store_target: str | Path
) -> None:
    peers = _peers(store, store_target, 8)
    try:
        for round_ in range(5):
            call_id = f"k{round_}"
            await _call(store, call_id)

            async def answer(peer: Store, index: int, call_id: str = call_id) -> bool:
                return await peer.transition_call(
                    call_id, OPEN, CallState.ANSWERED, outcome={"output": {"by": index}}
                )

            winners = await _race(peers, answer)
            assert len(winners) == 1
            stored = await store.get_call(call_id)
            assert stored is not None and stored.outcome == {"output": {"by": winners[0]}}
    finally:
        for peer in set(peers) - {store}:
            await peer.close()


async def test_concurrent_event_appends_keep_one_gapless_sequence(
    store: Store, store_target: str | Path
) -> None:
    await _conversation(store)
    peers = _peers(store, store_target, 4)
    try:

        async def append(peer: Store, index: int) -> bool:
            for i in range(25):
                async with peer.transaction():
                    await peer.append_event("c1", TextMessageContent(f"m{index}", f"{i}"))
            return True

        assert len(await _race(peers, append)) == 4
        events = await store.events_after("c1", 0)
        assert [e.seq for e in events] == list(range(1, 101))
        for index in range(4):  # each writer's events in its own order
            mine = [e.data["delta"] for e in events if e.data["messageId"] == f"m{index}"]
            assert mine == [f"{i}" for i in range(25)]
    finally:
        for peer in set(peers) - {store}:
            await peer.close()


# ---- leases ----------------------------------------------------------------------------


async def test_a_lease_belongs_to_one_owner_until_it_expires(store: Store) -> None:
    assert await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    assert not await store.take_lease("run:r1", "b", until=20.0, now=5.0)  # live: refused
    assert await store.take_lease("run:r1", "a", until=12.0, now=5.0)  # its owner may renew
    assert await store.expired_leases(11.0) == []
    assert await store.expired_leases(13.0) == ["run:r1"]
    assert await store.expired_leases(13.0, other_than="a") == []  # not another's
    assert await store.take_lease("run:r1", "b", until=30.0, now=13.0)  # expired: taken over
    assert not await store.keep_lease("run:r1", "a", until=40.0)  # the old owner is fenced off
    assert not await store.release_lease("run:r1", "a")
    assert await store.keep_lease("run:r1", "b", until=40.0)
    await store.take_lease("call:k1", "b", until=1.0, now=0.0)
    assert await store.renew_leases("b", until=50.0) == 2
    assert await store.expired_leases(45.0) == []
    assert await store.release_lease("run:r1", "b")
    assert await store.take_lease("run:r1", "c", until=1.0, now=0.0)  # released: free again


async def test_a_run_starts_with_its_lease_only_when_none_is_in_progress(store: Store) -> None:
    await _conversation(store)
    await _conversation(store, "c2")

    async def start(run_id: str, cid: str = "c1", key: str = "") -> Any:
        async with store.transaction():
            # What locks the conversation for the check: an append of its events first.
            await store.append_event(cid, TextMessageContent("m", run_id))
            run = Run(run_id, cid, {"id": "planner"}, RunStatus.RUNNING)
            return await store.create_run_alone(run, (key or f"run:{run_id}", "a", 10.0))

    assert await start("r1") == RunStart(None, ())  # no message before it
    assert (await store.get_run("r1")).agent == {"id": "planner"}
    assert not await store.take_lease("run:r1", "b", until=20.0, now=5.0)  # a's, live
    assert await store.expired_leases(11.0) == ["run:r1"]
    # In progress (running, then waiting): refused, naming it, and nothing stored.
    assert await start("r2") == RunStart(("r1", RunStatus.RUNNING))
    await store.update_run("r1", status=RunStatus.WAITING)
    assert await start("r2") == RunStart(("r1", RunStatus.WAITING))
    assert await store.get_run("r2") is None and await store.expired_leases(11.0) == ["run:r1"]
    assert await start("r9", "c2") == RunStart(
        None, ()
    )  # another conversation's run is no obstacle
    # With the messages before it, oldest first, exactly as list_messages reads them.
    earlier = [
        StoredMessage("m1", "c1", "r1", "user", "é\n", interrupted=True),
        StoredMessage(
            "m2", "c1", "r1", "assistant", "", ({"id": "k1", "name": "t", "arguments": "{}"},)
        ),
        StoredMessage("m3", "c1", "r1", "tool", "[1]", tool_call_id="k1", tool_name="t"),
    ]
    for message in earlier:
        await store.add_message(message)
    await store.update_run("r1", status=RunStatus.FINISHED)
    assert await start("r2") == RunStart(None, tuple(earlier))
    assert await store.list_messages("c1") == earlier
    assert [r.id for r in await store.list_runs("c1")] == ["r1", "r2"]
    # A lease already there is not taken over: neither the run nor the lease is stored.
    await store.update_run("r2", status=RunStatus.FAILED)
    with pytest.raises(Exception):  # noqa: B017 (each store's driver says it its own way)
        await start("r3", key="run:r1")
    assert await store.get_run("r3") is None
    assert await store.keep_lease("run:r1", "a", until=40.0)  # still a's


async def test_a_step_ends_its_run_only_while_it_holds_the_lease(store: Store) -> None:
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING, step=1))
    await store.take_lease("run:r1", "b", until=10.0, now=0.0)
    # Another process's lease: refused, and neither the run nor the lease changed.
    assert not await store.update_run_leased("r1", ("run:r1", "a"), status=RunStatus.FINISHED)
    assert not await store.update_run_leased(
        "r1", ("run:r1", "a"), until=99.0, status=RunStatus.WAITING, step=2
    )
    run = await store.get_run("r1")
    assert (run.status, run.step) == (RunStatus.RUNNING, 1)
    assert await store.expired_leases(11.0) == ["run:r1"]  # still b's, still until 10
    # Its owner renews it with the change (until 20), then releases it with the last one.
    assert await store.update_run_leased(
        "r1", ("run:r1", "b"), until=20.0, status=RunStatus.RUNNING, step=2
    )
    assert await store.expired_leases(11.0) == []
    assert (await store.get_run("r1")).step == 2
    assert await store.update_run_leased(
        "r1", ("run:r1", "b"), status=RunStatus.FAILED, error={"code": "x"}
    )
    run = await store.get_run("r1")
    assert (run.status, run.step, run.error) == (RunStatus.FAILED, 2, {"code": "x"})
    assert await store.take_lease("run:r1", "c", until=1.0, now=0.0)  # released: free again


async def test_concurrent_takers_of_an_expired_lease_have_one_winner(
    store: Store, store_target: str | Path
) -> None:
    await store.take_lease("run:r1", "dead", until=1.0, now=0.0)
    peers = _peers(store, store_target, 6)
    try:

        async def take(peer: Store, i: int) -> bool:
            return await peer.take_lease("run:r1", f"p{i}", 100.0, 50.0)

        winners = await _race(peers, take)
        assert len(winners) == 1
    finally:
        for peer in set(peers) - {store}:
            await peer.close()


async def test_a_waiting_run_is_claimed_only_when_its_calls_are_settled_and_its_lease_free(
    store: Store,
) -> None:
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {}, RunStatus.WAITING, step=1))
    await _call(store, "k1")  # step 1, still open
    assert await store.claim_ready_run("r1", "run:r1", "a", until=10.0, now=0.0) is None
    assert await store.expired_leases(1e9) == []  # no lease was taken for it
    await store.transition_call("k1", OPEN, CallState.ANSWERED, outcome={"output": {}})
    await store.take_lease("run:r1", "b", until=10.0, now=0.0)  # another process's, live
    assert await store.claim_ready_run("r1", "run:r1", "a", until=10.0, now=5.0) is None
    assert (await store.get_run("r1")).status is RunStatus.WAITING
    # Once that lease lapsed, the run is claimable: running, with the lease ours.
    await store.add_message(StoredMessage("m1", "c1", "r1", "user", "hi"))
    await store.add_message(StoredMessage("m2", "c2", "r2", "user", "another conversation's"))
    await store.add_message(StoredMessage("m3", "c1", "r1", "tool", "{}", tool_call_id="k1"))
    claimed = await store.claim_ready_run("r1", "run:r1", "a", until=30.0, now=20.0)
    assert claimed is not None and claimed.run == await store.get_run("r1")
    assert claimed.run.status is RunStatus.RUNNING and claimed.run.step == 1
    # With its conversation's messages: the next step's history, as list_messages reads it.
    assert list(claimed.history) == await store.list_messages("c1")
    assert [m.id for m in claimed.history] == ["m1", "m3"]
    assert not await store.keep_lease("run:r1", "b", until=40.0)
    assert await store.keep_lease("run:r1", "a", until=40.0)
    # Running now: a second claim (by anyone) finds nothing to claim.
    assert await store.claim_ready_run("r1", "run:r1", "a", until=50.0, now=21.0) is None
    assert await store.claim_ready_run("r_missing", "run:r_missing", "a", 50.0, 21.0) is None


async def test_concurrent_claimers_of_a_ready_run_have_one_winner_holding_its_lease(
    store: Store, store_target: str | Path
) -> None:
    await _conversation(store)
    peers = _peers(store, store_target, 6)
    try:
        for round_ in range(4):
            run_id = f"r{round_}"
            await store.create_run(Run(run_id, "c1", {}, RunStatus.WAITING, step=1))

            async def claim(peer: Store, index: int, run_id: str = run_id) -> bool:
                found = await peer.claim_ready_run(run_id, f"run:{run_id}", f"p{index}", 99.0, 1.0)
                return found is not None

            winners = await _race(peers, claim)
            assert len(winners) == 1
            assert (await store.get_run(run_id)).status is RunStatus.RUNNING
            # The lease is the winner's alone: nobody else can renew it.
            for index in range(6):
                kept = await store.keep_lease(f"run:{run_id}", f"p{index}", until=99.0)
                assert kept is (index == winners[0])
    finally:
        for peer in set(peers) - {store}:
            await peer.close()


async def test_stalled_runs_are_runs_no_process_can_move(store: Store) -> None:
    await _conversation(store)
    await store.create_run(Run("r_owned", "c1", {}, RunStatus.RUNNING))
    await store.take_lease("run:r_owned", "a", 10.0, 0.0)
    await store.create_run(Run("r_orphan", "c1", {}, RunStatus.RUNNING))
    await store.create_run(Run("r_waits", "c1", {}, RunStatus.WAITING, step=1))
    await store.add_call(Call("k1", "c1", "r_waits", 1, "t", CallState.DISPATCHED, {}, "{}", 9.0))
    await store.create_run(Run("r_ready", "c1", {}, RunStatus.WAITING, step=1))
    await store.add_call(Call("k2", "c1", "r_ready", 1, "t", CallState.ANSWERED, {}, "{}", 9.0))
    await store.create_run(Run("r_done", "c1", {}, RunStatus.FINISHED))
    assert [r.id for r in await store.stalled_runs()] == ["r_orphan", "r_ready"]


async def test_the_sweeper_turn_is_held_by_one_store_at_a_time(
    store: Store, store_target: str | Path
) -> None:
    assert await store.try_singleton("sweeper", "a", 10.0, 0.0)
    assert await store.try_singleton("sweeper", "a", 12.0, 2.0)  # held: asking renews it
    if isinstance(store, SQLiteStore):
        return  # one process per file: it is always that process's turn
    other = open_store(store_target)
    try:
        assert not await other.try_singleton("sweeper", "b", 15.0, 5.0)
        # The bulk renewal (the renewal thread's) leaves the turn alone: a holder renews
        # it only by asking, so a process that stops sweeping loses it.
        assert await store.renew_leases("a", 99.0) == 0
        assert not await other.try_singleton("sweeper", "b", 21.9, 11.9)
        # "a" stopped asking (paused, connections open): past its lease the turn is b's.
        assert await other.try_singleton("sweeper", "b", 22.1, 12.1)
        assert not await store.try_singleton("sweeper", "a", 22.2, 12.2)  # a wakes: not its
        assert await other.try_singleton("sweeper", "b", 23.0, 13.0)
    finally:
        await other.close()


# ---- migrations ------------------------------------------------------------------------


async def test_migrations_apply_once_and_a_reopened_store_keeps_its_data(
    store: Store, store_target: str | Path
) -> None:
    version = store.schema_version  # type: ignore[attr-defined]
    assert version >= 2
    if isinstance(store, SQLiteStore):
        # Stamped by the database, in seconds since the epoch, as PostgreSQL's now() does.
        (stamp,) = store._db.execute("SELECT MAX(applied_at) FROM schema_migrations").fetchone()
        assert time.time() - 600 < stamp <= time.time() + 1
    await _conversation(store)
    await store.close()
    again = open_store(store_target)
    try:
        assert again.schema_version == version  # type: ignore[attr-defined]
        assert await again.get_conversation("c1") is not None
    finally:
        await again.close()
        # The fixture closes ``store`` again; both stores allow a second close.


async def test_a_database_from_a_newer_hostcall_is_refused(store: Store, store_target: Any) -> None:
    future = "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', "
    if isinstance(store, SQLiteStore):
        store._db.execute(future + "?)", (1.0,))
    else:
        with psycopg.connect(str(store_target), autocommit=True) as db:
            db.execute(future + "%s)", ("2030-01-01",))
    await store.close()
    with pytest.raises(StoreError, match="version 999, newer than this Hostcall"):
        open_store(store_target)


def test_pending_migrations_are_the_missing_ones_in_order() -> None:
    plan = [Migration(1, "a", ""), Migration(2, "b", ""), Migration(3, "c", "")]
    assert [m.version for m in pending(plan, [], target="x")] == [1, 2, 3]
    assert [m.version for m in pending(plan, [1, 2], target="x")] == [3]
    assert pending(plan, [1, 2, 3], target="x") == []
    with pytest.raises(AssertionError):
        pending([Migration(1, "a", ""), Migration(3, "c", "")], [], target="x")


# ---- SQLite: one process per file ------------------------------------------------------


async def test_a_second_store_on_one_sqlite_file_is_refused_clearly(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    first = SQLiteStore(db)
    await first.create_conversation(Conversation("c1", "planner", 1.0))
    with pytest.raises(StoreError, match=r"another Hostcall process \(pid \d+\) is serving"):
        SQLiteStore(db)
    assert await first.get_conversation("c1") is not None  # the first one is untouched
    await first.close()
    second = SQLiteStore(db)  # once it is gone, the file opens again
    assert await second.get_conversation("c1") is not None
    await second.close()


@pytest.mark.parametrize("link", ["symlink", "hard link"])
async def test_a_second_store_through_a_link_to_the_sqlite_file_is_refused(
    tmp_path: Path, link: str
) -> None:
    db = tmp_path / "one.db"
    first = SQLiteStore(db)
    await first.create_conversation(Conversation("c1", "planner", 1.0))
    other = tmp_path / "elsewhere" / "two.db"
    other.parent.mkdir()
    if link == "symlink":
        other.symlink_to(db)
    else:
        os.link(db, other)
    refusal = rf"another Hostcall process \(pid {os.getpid()}\) is serving the SQLite database"
    with pytest.raises(StoreError, match=refusal):
        SQLiteStore(other)
    assert await first.get_conversation("c1") is not None  # the first one is untouched
    await first.close()
    second = SQLiteStore(other)  # once it is gone, the file opens again by any name
    try:
        assert await second.get_conversation("c1") is not None
    finally:
        await second.close()


# ---- surfaces -----------------------------------------------------------------------


async def test_a_surface_counts_its_streams_and_stamps_when_the_last_one_closes(
    store: Store,
) -> None:
    from hostcall.store.records import Surface

    await _conversation(store)
    async with store.transaction():
        await store.save_surface_tools("c1", "tab-a-0000", ("read_board_tasks",), 10.0)
    # New: present for the grace period, as if its stream had just closed.
    assert await store.get_surface("c1", "tab-a-0000") == Surface(
        "tab-a-0000", "c1", ("read_board_tasks",), 10.0, 0, 10.0, False
    )
    async with store.transaction():
        await store.attach_surface("c1", "tab-a-0000", 11.0)
        await store.attach_surface("c1", "tab-a-0000", 12.0)  # a reconnect overlapping the old one
        await store.detach_surface("c1", "tab-a-0000", 13.0)
    surface = await store.get_surface("c1", "tab-a-0000")
    assert surface is not None and (surface.streams, surface.detached_at) == (1, None)
    assert surface.present(now=100.0, grace=5.0)
    async with store.transaction():
        await store.detach_surface("c1", "tab-a-0000", 14.0)
        await store.detach_surface("c1", "tab-a-0000", 15.0)  # one too many: never below zero
    surface = await store.get_surface("c1", "tab-a-0000")
    assert surface is not None and (surface.streams, surface.detached_at) == (0, 14.0)
    assert surface.present(now=18.0, grace=5.0) and not surface.present(now=19.0, grace=5.0)
    assert surface.tools == ("read_board_tasks",) and surface.last_active == 12.0


async def test_a_dead_process_s_streams_stop_counting_and_a_late_detach_counts_nothing(
    store: Store,
) -> None:
    """Streams are counted per serving process; ``drop_streams`` counts off those
    of a process taken for dead (its lease lapsed), on both stores."""
    await _conversation(store)
    await _conversation(store, "c2")
    async with store.transaction():
        await store.attach_surface("c1", "tab-a-0000", 1.0, "dead")
        await store.attach_surface("c1", "tab-a-0000", 2.0, "dead")  # a reconnect, same process
        await store.attach_surface("c1", "tab-b-0000", 3.0, "dead")
        await store.attach_surface("c1", "tab-b-0000", 4.0, "alive")  # also on a live process
        await store.attach_surface("c2", "tab-c-0000", 5.0, "alive")
    async with store.transaction():
        assert await store.drop_streams("dead", 20.0) == 2
    a, b = await store.get_surface("c1", "tab-a-0000"), await store.get_surface("c1", "tab-b-0000")
    assert a is not None and (a.streams, a.detached_at) == (0, 20.0)  # the grace period starts
    assert a.present(now=24.0, grace=5.0) and not a.present(now=25.0, grace=5.0)
    assert b is not None and (b.streams, b.detached_at) == (1, None)  # still served
    c = await store.get_surface("c2", "tab-c-0000")
    assert c is not None and c.streams == 1
    async with store.transaction():
        await store.detach_surface("c1", "tab-a-0000", 30.0, "dead")  # the dead one, late: nothing
        assert await store.drop_streams("dead", 31.0) == 0  # nothing left to drop
    a = await store.get_surface("c1", "tab-a-0000")
    assert a is not None and (a.streams, a.detached_at) == (0, 20.0)
    async with store.transaction():
        await store.detach_surface("c1", "tab-b-0000", 32.0, "alive")
    b = await store.get_surface("c1", "tab-b-0000")
    assert b is not None and (b.streams, b.detached_at) == (0, 32.0)


async def test_surfaces_are_listed_most_recently_active_first_and_leaving_is_final(
    store: Store,
) -> None:
    await _conversation(store)
    await _conversation(store, "c2")
    async with store.transaction():
        await store.attach_surface("c1", "tab-a-0000", 1.0)
        await store.attach_surface("c1", "tab-b-0000", 2.0)
        await store.attach_surface("c2", "tab-a-0000", 9.0)  # same id, another conversation
        await store.touch_surface("c1", "tab-a-0000", 3.0)
        await store.touch_surface("c1", "tab-b-0000", 0.5)  # activity never goes back in time
    assert [s.id for s in await store.list_surfaces("c1")] == ["tab-a-0000", "tab-b-0000"]
    assert [s.last_active for s in await store.list_surfaces("c1")] == [3.0, 2.0]
    async with store.transaction():
        await store.leave_surface("c1", "tab-a-0000", 4.0)
    left = await store.get_surface("c1", "tab-a-0000")
    assert left is not None and left.left and not left.present(now=4.0, grace=60.0)
    other = await store.get_surface("c2", "tab-a-0000")
    assert other is not None and not other.left
    assert await store.get_surface("c1", "nope-0000") is None


async def test_a_conversation_read_with_its_surfaces_is_as_read_apart(store: Store) -> None:
    """One statement on PostgreSQL (the surfaces as JSON, read back by column): the same
    conversation and surfaces, fields and order, as its two reads apart."""
    await _conversation(store)
    await _conversation(store, "c2")
    assert await store.conversation_with_surfaces("nope") is None
    conversation = await store.get_conversation("c1")
    assert await store.conversation_with_surfaces("c1") == (conversation, [])
    page_tool = {"name": "sizes", "description": "the sizes in stock", "input_schema": {}}
    async with store.transaction():
        await store.attach_surface("c1", "tab-a-0000", 1.25)
        await store.save_surface_tools("c1", "tab-a-0000", ("read_board_tasks",), 1.5)
        await store.save_surface_tools("c1", "tab-b-0000", (), 2.0, (page_tool,))
        await store.touch_surface("c1", "tab-a-0000", 1700000000.123456)
        await store.detach_surface("c1", "tab-a-0000", 1700000001.5)
        await store.attach_surface("c2", "tab-c-0000", 9.0)
    found = await store.conversation_with_surfaces("c1")
    assert found == (conversation, await store.list_surfaces("c1"))
    assert [s.id for s in found[1]] == ["tab-a-0000", "tab-b-0000"]
    assert found[1][0].tools == ("read_board_tasks",) and found[1][1].page_tools == (page_tool,)


async def test_a_reassigning_move_happens_only_while_the_call_is_on_the_surface_read(
    store: Store,
) -> None:
    await _conversation(store)
    await _call(store)
    assert await store.transition_call(
        "k1", OPEN, CallState.DISPATCHED, assigned=(None, 0), surface_id="tab-a-0000",
        assignment=1, route="handler",
    )  # fmt: skip
    # A stream of the old assignment (none, 0) can no longer claim it; its own can, once.
    assert not await store.transition_call(
        "k1", [CallState.DISPATCHED], CallState.DELIVERED, assigned=(None, 0), delivered=True
    )
    claim = {"assigned": ("tab-a-0000", 1), "delivered": True}
    assert await store.transition_call("k1", [CallState.DISPATCHED], CallState.DELIVERED, **claim)
    assert not await store.transition_call(
        "k1", [CallState.DISPATCHED], CallState.DELIVERED, **claim
    )
    call = await store.get_call("k1")
    assert call is not None
    assert (call.state, call.surface_id, call.assignment, call.route, call.delivered) == (
        CallState.DELIVERED, "tab-a-0000", 1, "handler", True,
    )  # fmt: skip


# ---- counters (hostcall/counters.py) -------------------------------------------------------


async def test_a_counter_counts_within_its_limit_and_starts_again_each_window(
    store: Store,
) -> None:
    assert await store.add_to_counter("k", 60.0, 1, limit=2)
    assert await store.add_to_counter("k", 60.0, 1, limit=2)
    assert not await store.add_to_counter("k", 60.0, 1, limit=2)  # full: nothing added
    assert await store.counted("k", 60.0) == 2
    assert not await store.add_to_counter("k", 60.0, 5, limit=4)
    assert await store.add_to_counter("k", 60.0, 7)  # no limit: a cost is always counted
    assert await store.counted("k", 60.0) == 9
    assert await store.counted("k", 120.0) == 0  # another window
    assert await store.add_to_counter("k", 120.0, 1, limit=1)  # the old window's count is gone
    assert await store.counted("k", 120.0) == 1 and await store.counted("k", 60.0) == 0
    assert await store.counted("other", 120.0) == 0


async def test_concurrent_takers_of_a_counter_get_exactly_its_limit(
    store: Store, store_target: str | Path
) -> None:
    peers = _peers(store, store_target, 8)
    try:

        async def take(peer: Store, index: int) -> bool:
            return await peer.add_to_counter("conv-agent", 0.0, 1, limit=5)

        assert len(await _race(peers, take)) == 5
        assert await store.counted("conv-agent", 0.0) == 5
    finally:
        for peer in set(peers) - {store}:
            await peer.close()


# ---- model usage ----------------------------------------------------------------------------

DAY = 86400.0
JAN_1 = 1767225600.0  # 2026-01-01 00:00 UTC


def _usage(run: str, conversation: str, agent: str, at: float, tokens: tuple[int, int],
           cost: float | None, source: str = "provider") -> UsageRecord:  # fmt: skip
    return UsageRecord(run, conversation, agent, 1, "gpt-4o-mini", *tokens, source, cost, at, 0.5)


async def test_usage_adds_up_per_day_and_agent_per_conversation_and_per_run(store: Store) -> None:
    for record in (
        _usage("r1", "c1", "a", JAN_1 + 10, (100, 10), 0.5),
        _usage("r1", "c1", "a", JAN_1 + 20, (200, 20), None, "estimate"),
        _usage("r2", "c1", "a", JAN_1 + DAY + 5, (300, 30), 0.25),
        _usage("r3", "c2", "b", JAN_1 + DAY + 7, (1, 1), None),
        _usage("r4", "c3", "a", JAN_1 - DAY, (9, 9), 9.0),  # before the period
    ):
        await store.add_usage(record)
    days = await store.usage_by_day("2026-01-01")
    assert [(d.key, d.agent_id, d.input_tokens, d.output_tokens, d.cost, d.steps, d.estimated)
            for d in days] == [
        ("2026-01-02", "a", 300, 30, 0.25, 1, 0),
        ("2026-01-02", "b", 1, 1, None, 1, 0),
        ("2026-01-01", "a", 300, 30, 0.5, 2, 1),
    ]  # fmt: skip
    conversations = await store.usage_by_conversation(JAN_1, 10)
    assert [(c.key, c.tokens, c.cost) for c in conversations] == [
        ("c1", 660, 0.75),
        ("c2", 2, None),
    ]
    assert [c.key for c in await store.usage_by_conversation(JAN_1, 1)] == ["c1"]
    run = await store.usage_of_run("c1", "r1")
    assert run is not None
    assert (run.tokens, run.steps, run.estimated, run.first_at, run.last_at) == (
        330,
        2,
        1,
        JAN_1 + 10,
        JAN_1 + 20,
    )
    assert await store.usage_of_run("c2", "r1") is None
    assert await store.usage_of_conversation("c_none") is None


async def test_usage_written_in_a_rolled_back_transaction_is_not_counted(store: Store) -> None:
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.add_usage(_usage("r1", "c1", "a", JAN_1, (5, 5), 1.0))
            await store.add_message(StoredMessage("m1", "c1", "r1", "assistant", "x"))
            raise RuntimeError("the step's unit failed")
    assert await store.usage_of_conversation("c1") is None


async def test_a_persons_conversations_are_theirs_listed_last_written_first(store: Store) -> None:
    await store.create_conversation(Conversation("c1", "planner", 1.0, person="ann"))
    await store.create_conversation(Conversation("c2", "planner", 2.0, person="ann"))
    await store.create_conversation(Conversation("c3", "planner", 3.0))  # anonymous
    await store.create_conversation(Conversation("c4", "planner", 4.0, person="bob"))
    await store.create_conversation(Conversation("c5", "helper", 5.0, person="ann"))
    assert (await store.get_conversation("c1")).person == "ann"
    assert (await store.get_conversation("c3")).person is None
    await store.add_message(StoredMessage("m1", "c1", "r1", "assistant", "hello"))
    await store.add_message(StoredMessage("m2", "c1", "r1", "user", "x" * 300))
    await store.add_message(StoredMessage("m3", "c1", "r1", "user", "later"))

    listed = await store.person_conversations("planner", "ann")
    assert [(p.id, p.title, p.created_at, p.updated_at) for p in listed] == [
        ("c2", "", 2.0, 2.0),
        ("c1", "x" * TITLE_CHARS, 1.0, 1.0),
    ]
    await store.touch_conversation("c1", 10.0)
    await store.touch_conversation("c1", 9.0)  # never moves it back
    assert [(p.id, p.updated_at) for p in await store.person_conversations("planner", "ann")] == [
        ("c1", 10.0),
        ("c2", 2.0),
    ]

    # Adoption: an anonymous conversation becomes the person's, never another person's.
    assert await store.set_person("c3", "ann") is True
    assert await store.set_person("c3", "ann") is True
    assert await store.set_person("c3", "bob") is False
    assert await store.set_person("c4", "ann") is False
    assert await store.set_person("c_missing", "ann") is False
    assert (await store.get_conversation("c3")).person == "ann"
    assert (await store.get_conversation("c4")).person == "bob"

    first = await store.person_conversations("planner", "ann", limit=2)
    assert [p.id for p in first] == ["c1", "c3"]
    last = first[-1]
    rest = await store.person_conversations(
        "planner", "ann", limit=2, before=(last.updated_at, last.id)
    )
    assert [p.id for p in rest] == ["c2"]
    assert [p.id for p in await store.person_conversations("planner", "bob")] == ["c4"]
    assert [p.id for p in await store.person_conversations("helper", "ann")] == ["c5"]
    assert await store.person_conversations("planner", "nobody") == []
    summaries = await store.list_conversations(ConversationQuery(person="ann"))
    assert [s.conversation.id for s in summaries] == ["c5", "c3", "c2", "c1"]


async def test_a_run_keeps_the_visitor_it_acts_for(store: Store) -> None:
    await _conversation(store)
    ann = Visitor("ann", {"sub": "ann", "plan": "pro", "n": [1, 2]})
    await store.create_run(Run("r1", "c1", {"id": "planner"}, RunStatus.WAITING, visitor=ann))
    lease = ("run:r2", "me", 10.0)
    await store.create_run(Run("r0", "c1", {"id": "planner"}, RunStatus.FINISHED))
    assert (await store.get_run("r1")).visitor == ann
    assert (await store.get_run("r0")).visitor is None
    await store.update_run("r1", status=RunStatus.FINISHED)
    start = await store.create_run_alone(
        Run("r2", "c1", {"id": "planner"}, RunStatus.RUNNING, visitor=ann), lease
    )
    assert start.busy is None
    assert (await store.latest_run("c1")).visitor == ann


# The ``identity`` column's text as every release so far has written it: a run stored then
# must resume with the same ``$user`` values (and a run stored now is written the same way).
STORED_VISITOR = '{"sub":"ann","claims":{"sub":"ann","plan":"pro","tier":2,"n":[1,2]}}'


async def test_a_run_stored_with_the_old_visitor_json_renders_user_the_same(
    store: Store, store_target: Any
) -> None:
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {"id": "planner"}, RunStatus.WAITING))
    update = "UPDATE runs SET identity = {} WHERE id = 'r1'"
    if isinstance(store, SQLiteStore):
        store._db.execute(update.format("?"), (STORED_VISITOR,))
    else:
        with psycopg.connect(str(store_target), autocommit=True) as db:
            db.execute(update.format("%s"), (STORED_VISITOR,))
    run = await store.get_run("r1")
    assert run.visitor == Visitor("ann", {"sub": "ann", "plan": "pro", "tier": 2, "n": [1, 2]})
    keys = ["$user.sub", "$user.claims.plan", "$user.claims.tier", "$fromAI.q"]
    assert user_values(run.visitor, keys) == {
        "$user.sub": "ann", "$user.claims.plan": "pro", "$user.claims.tier": 2,
    }  # fmt: skip
    pro = parse_guardrails(
        [{"name": "pro", "on": "input", "action": "log",
          "when": {"path": "$user/claims/plan", "op": "equals", "value": "pro"}}]
    )  # fmt: skip
    assert [h.rule for h in evaluate(pro, "input", {}, visitor=run.visitor)] == ["pro"]
    # Written back as it was read.
    await store.create_run(
        Run("r2", "c1", {"id": "planner"}, RunStatus.FINISHED, visitor=run.visitor)
    )
    select = "SELECT identity FROM runs WHERE id = 'r2'"
    if isinstance(store, SQLiteStore):
        written = store._db.execute(select).fetchone()[0]
    else:
        with psycopg.connect(str(store_target), autocommit=True) as db:
            row = db.execute(select).fetchone()
            assert row is not None
            written = row[0]
    assert written == STORED_VISITOR


async def test_a_broken_lease_fences_its_holder_out_of_every_write(store: Store) -> None:
    """Stop breaks a run's lease whoever holds it: the step holding it then appends nothing
    and cannot end the run, in its transaction or outside one; breaking it again is a no."""
    await _conversation(store)
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    async with store.transaction():
        await store.append_event("c1", TextMessageContent("m", "0"), fence=("run:r1", "a"))
    assert await store.break_lease("run:r1")
    assert not await store.break_lease("run:r1")
    with pytest.raises(LeaseLost):
        await store.append_event("c1", TextMessageContent("m", "late"), fence=("run:r1", "a"))
    assert not await store.update_run_leased("r1", ("run:r1", "a"), status=RunStatus.FINISHED)
    # In a transaction, as a step ends (Leases.end_step): refused there, or at its commit.
    with pytest.raises(LeaseLost):
        async with store.transaction():
            if not await store.update_run_leased("r1", ("run:r1", "a"), status=RunStatus.FINISHED):
                raise LeaseLost("run:r1", "a")
    assert (await store.get_run("r1")).status is RunStatus.RUNNING
    assert [e.data["delta"] for e in await store.events_after("c1", 0)] == ["0"]


async def test_a_run_s_start_and_claim_read_only_the_turns_its_steps_send(store: Store) -> None:
    """``turns``: the history read with a run's start and claim, and by ``recent_messages``,
    is the last turns only — from the person's ``turns``-th last message on, whatever came
    between — exactly as hostcall/transcript.py's ``recent_turns`` cuts the whole."""
    await _conversation(store)
    await _conversation(store, "c2")
    written: list[StoredMessage] = []
    for turn in range(5):
        for message in (
            StoredMessage(f"u{turn}", "c1", "r0", "user", f"question {turn}"),
            StoredMessage(
                f"a{turn}",
                "c1",
                "r0",
                "assistant",
                "",
                ({"id": f"k{turn}", "name": "t", "arguments": "{}"},),
            ),
            StoredMessage(f"t{turn}", "c1", "r0", "tool", "{}", tool_call_id=f"k{turn}"),
            StoredMessage(f"o{turn}", "c1", "r0", "operator", "a person wrote", author="olga"),
        ):
            await store.add_message(message)
            written.append(message)
    await store.add_message(StoredMessage("x", "c2", "r9", "user", "another conversation's"))
    everything = await store.list_messages("c1")
    assert everything == written
    for turns in (1, 2, 4, 5, 6, 1000):
        expected = list(recent_turns(everything, turns))
        assert await store.recent_messages("c1", turns) == expected, turns
    assert [m.id for m in await store.recent_messages("c1", 2)][:2] == ["u3", "a3"]
    assert await store.recent_messages("c3", 2) == []  # no such conversation: nothing

    # A run's start: its own message is the last of the window.
    async with store.transaction():
        await store.append_event("c1", TextMessageContent("m", "r1"))
        await store.add_message(StoredMessage("u5", "c1", "r1", "user", "question 5"))
        run = Run("r1", "c1", {"id": "planner"}, RunStatus.RUNNING)
        start = await store.create_run_alone(run, ("run:r1", "a", 10.0), turns=2)
    assert [m.id for m in start.history] == ["u4", "a4", "t4", "o4", "u5"]
    # Its claim, once it waits with nothing open.
    await store.update_run("r1", status=RunStatus.WAITING)
    await store.release_lease("run:r1", "a")
    claimed = await store.claim_ready_run("r1", "run:r1", "a", until=30.0, now=20.0, turns=1)
    assert claimed is not None and [m.id for m in claimed.history] == ["u5"]
    # Without ``turns``: every message, as before.
    await store.update_run("r1", status=RunStatus.WAITING)
    claimed = await store.claim_ready_run("r1", "run:r1", "a", until=40.0, now=30.0)
    assert claimed is not None and list(claimed.history) == await store.list_messages("c1")
