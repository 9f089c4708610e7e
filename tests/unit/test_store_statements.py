"""What the PostgreSQL store sends: the statements a transaction costs (the
cluster's throughput is bounded by statements per conversation), and the guarantees of
the statements that carry several writes. The behaviour both stores share is in
test_store.py; these count and inspect PostgreSQL's own statements."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hostcall.errors import LeaseLost
from hostcall.protocol.events import TextMessageContent
from hostcall.store import rows
from hostcall.store.postgres import PostgresStore, messages
from hostcall.store.postgres.events import append_sql
from hostcall.store.records import (
    Call,
    CallState,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
)
from tests.support.databases import fresh_schema
from tests.support.harness import BOARD, Conv, Harness


@pytest.fixture
async def store() -> AsyncIterator[PostgresStore]:
    with fresh_schema() as url:
        opened = PostgresStore(url)
        await opened.create_conversation(Conversation("c1", "planner", 1.0, "fr"))
        yield opened
        await opened.close()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement any connection sends from here on, first word and all."""
    statements: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(" ".join(str(query).split()))
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted)
    return statements


async def test_a_transaction_is_one_without_begin_or_commit_and_only_its_end_commits(
    store: PostgresStore, sent: list[str]
) -> None:
    # Its statements up to the pipeline's Sync are one implicit transaction: nothing is
    # seen by others before the end, and a lock taken by its first statement holds to it.
    other = PostgresStore(store.url)
    try:
        async with store.transaction():
            await store.db.run("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", ("c1",))
            await store.append_event("c1", TextMessageContent("m", "a"))  # waited for
            await store.add_message(_message("m1", "one"))
            assert await store.last_seq("c1") == 1 and len(await store.list_messages("c1")) == 1
            assert await other.last_seq("c1") == 0 and await other.list_messages("c1") == []
            with pytest.raises(psycopg.errors.LockNotAvailable):
                await other.db.one("SELECT 1 FROM conversations WHERE id = 'c1' FOR UPDATE NOWAIT")
        assert await other.last_seq("c1") == 1 and len(await other.list_messages("c1")) == 1
        assert await other.db.one("SELECT 1 FROM conversations WHERE id = 'c1' FOR UPDATE NOWAIT")
        assert not {"BEGIN", "COMMIT", "ROLLBACK"} & {s.split()[0] for s in sent}
        # An exception of ours rolls back what the server already ran.
        with pytest.raises(RuntimeError):
            async with store.transaction():
                await store.append_event("c1", TextMessageContent("m", "b"))
                assert await store.last_seq("c1") == 2
                raise RuntimeError
        assert await other.last_seq("c1") == 1 and await store.last_seq("c1") == 1
        assert await other.db.one("SELECT 1 FROM conversations WHERE id = 'c1' FOR UPDATE NOWAIT")
        # A count inside a transaction reads rows, and does not end it either.
        async with store.transaction():
            await store.append_event("c1", TextMessageContent("m", "c"))
            assert await store.take_lease("run:r1", "a", until=10.0, now=0.0)
            assert await other.last_seq("c1") == 1
            assert await other.db.one("SELECT 1 FROM leases WHERE key = 'run:r1'") is None
        assert await other.last_seq("c1") == 2
        assert await other.db.one("SELECT 1 FROM leases WHERE key = 'run:r1'")
    finally:
        await other.close()


async def test_a_transaction_of_one_statement_sends_it_alone_and_of_more_in_one_pipeline(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One statement is a transaction of its own: no pipeline to set up, no Sync to wait for.
    pipelines: list[object] = []
    pipeline = psycopg.AsyncConnection.pipeline

    def counted(self: psycopg.AsyncConnection[Any]) -> Any:
        pipelines.append(self)
        return pipeline(self)

    monkeypatch.setattr(psycopg.AsyncConnection, "pipeline", counted)
    locale = "SELECT locale FROM conversations WHERE id = 'c1'"
    set_locale = "UPDATE conversations SET locale = %s WHERE id = 'c1'"
    async with store.transaction():
        await store.db.run(set_locale, ("de",))
    assert pipelines == [] and await store.db.one(locale) == {"locale": "de"}
    # It fails as a transaction does, at its end at the latest, and commits nothing.
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with store.transaction():
            await store.db.run("INSERT INTO conversations (id, agent_id, created_at) "
                               "VALUES ('c1', 'planner', 1)")  # fmt: skip
    # Two are one transaction, in order: the second's failure takes the first back.
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with store.transaction():
            await store.db.run(set_locale, ("it",))
            await store.db.run("INSERT INTO conversations (id, agent_id, created_at) "
                               "VALUES ('c1', 'planner', 1)")  # fmt: skip
    assert len(pipelines) == 1 and await store.db.one(locale) == {"locale": "de"}
    async with store.transaction():
        await store.db.run(set_locale, ("it",))
        assert await store.db.one(locale) == {"locale": "it"}  # it went out before the read
        await store.db.run(set_locale, ("fr",))
    assert len(pipelines) == 2 and await store.db.one(locale) == {"locale": "fr"}
    # Nothing sent before an exception of ours, nothing to take back.
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.db.run(set_locale, ("es",))
            raise RuntimeError
    assert len(pipelines) == 2 and await store.db.one(locale) == {"locale": "fr"}


def _message(message_id: str, text: str) -> StoredMessage:
    return StoredMessage(message_id, "c1", "r1", "assistant", text)


async def test_a_transaction_s_messages_go_out_inside_its_appends(
    store: PostgresStore, sent: list[str]
) -> None:
    async with store.transaction():
        await store.add_message(_message("m1", "one"))
        await store.append_event("c1", TextMessageContent("m1", "a"))  # sent, with m1
        await store.add_message(_message("m2", "two"))
        await store.append_event("c1", TextMessageContent("m2", "b"))  # held, with m2
    # Two appends each carrying its message: no INSERT INTO messages alone.
    assert [s.split()[0] for s in sent] == ["WITH", "WITH"]
    assert all("INSERT INTO messages" in s for s in sent)
    assert [m.text for m in await store.list_messages("c1")] == ["one", "two"]


async def test_held_messages_with_no_append_after_them_go_out_in_one_insert(
    store: PostgresStore, sent: list[str]
) -> None:
    async with store.transaction():
        for i in range(3):
            await store.add_message(_message(f"m{i}", f"{i}"))
    assert [s.split()[0] for s in sent] == ["WITH"]
    assert sent[0].count("INSERT INTO messages") == 1
    assert [m.text for m in await store.list_messages("c1")] == ["0", "1", "2"]


async def test_a_step_s_calls_and_end_go_out_with_its_held_appends_at_commit(
    store: PostgresStore, sent: list[str]
) -> None:
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    call = Call("k1", "c1", "r1", 1, "create_task", CallState.DISPATCHED, {}, "{}", 5.0)
    sent.clear()
    async with store.transaction():
        await store.add_message(_message("m1", "text"))
        await store.append_event("c1", TextMessageContent("m1", "a"), fence=("run:r1", "a"))
        await store.add_call(call)
        await store.append_event("c1", TextMessageContent("m1", "b"))
        assert await store.update_run_leased(
            "r1", ("run:r1", "a"), status=RunStatus.WAITING, step=1
        )  # fmt: skip
    # The fenced append with the message, then one statement at the end: the held append,
    # the call, the run's change and the lease's release.
    assert [s.split()[0] for s in sent] == ["WITH", "WITH"]
    flush = sent[1]
    assert "INSERT INTO events" in flush and "INSERT INTO calls" in flush
    assert "DELETE FROM leases" in flush and "UPDATE runs" in flush
    assert [c.id for c in await store.list_calls("c1")] == ["k1"]
    run = await store.get_run("r1")
    assert run is not None and (run.status, run.step) == (RunStatus.WAITING, 1)


async def test_a_run_s_end_goes_out_inside_the_fenced_append_that_follows_it(
    store: PostgresStore, sent: list[str]
) -> None:
    # A finished step: its end (unproven: no fence of the transaction found the lease yet)
    # waits for its last events' fenced append, and goes in it: one statement, not two.
    await store.create_run(Run("r1", "c1", {}, RunStatus.RUNNING))
    await store.take_lease("run:r1", "a", until=10.0, now=0.0)
    sent.clear()
    async with store.transaction():
        await store.add_message(_message("m1", "text"))
        assert await store.update_run_leased(
            "r1", ("run:r1", "a"), status=RunStatus.FINISHED, step=1
        )  # fmt: skip
        await store.append_event("c1", TextMessageContent("m1", "a"), fence=("run:r1", "a"))
    assert len(sent) == 1
    assert "INSERT INTO events" in sent[0] and "INSERT INTO messages" in sent[0]
    assert "DELETE FROM leases" in sent[0] and "UPDATE runs" in sent[0]
    run = await store.get_run("r1")
    assert run is not None and (run.status, run.step) == (RunStatus.FINISHED, 1)
    assert await store.take_lease("run:r1", "b", until=20.0, now=0.0)  # released


async def test_an_append_carrying_messages_writes_none_when_its_fence_fails_even_alone(
    store: PostgresStore,
) -> None:
    # Inside a transaction LeaseLost rolls everything back; the statement itself must not
    # depend on that: run on its own (autocommit), a failed fence writes nothing at all.
    await store.take_lease("run:r1", "b", until=30.0, now=20.0)
    params = store.events._append_params(
        "c1",
        [("TEXT_MESSAGE_CONTENT", '{"delta":"late"}')],
        ("run:r1", "a"),
        [("m1", "c1", "r1", "assistant", "late", "[]", None, None, False, None, None, None)],
    )
    row = await store.db.one(append_sql(fenced=True, notify=True, count=1, carried=1), params)
    assert row is None
    assert await store.list_messages("c1") == [] and await store.last_seq("c1") == 0
    with pytest.raises(LeaseLost):  # and through the store's interface
        async with store.transaction():
            await store.add_message(_message("m1", "late"))
            await store.append_event("c1", TextMessageContent("m1", "x"), fence=("run:r1", "a"))
    assert await store.list_messages("c1") == []


async def test_a_claim_that_waited_out_a_step_of_its_run_claims_nothing(
    store: PostgresStore,
) -> None:
    # The claim reads the step's history with its statement's snapshot: it must not claim
    # a run that another process stepped while the claim waited for the lease row (the run
    # then waits at a step the snapshot cannot see, with calls open and a message more).
    await store.create_run(Run("r1", "c1", {}, RunStatus.WAITING, step=1))
    await store.take_lease("run:r1", "b", until=99.0, now=0.0)
    other = await psycopg.AsyncConnection.connect(store.url)
    try:
        # b's step ends, not committed yet: its lease row stays locked meanwhile.
        await other.execute("DELETE FROM leases WHERE key = 'run:r1'")
        await other.execute("UPDATE runs SET step = 2 WHERE id = 'r1'")
        await other.execute(messages.INSERT_ONE, rows.message_values(_message("m1", "b's")))
        claim = asyncio.create_task(store.claim_ready_run("r1", "run:r1", "a", 99.0, 1.0))
        while not await store.db.one(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%%WITH ready%%'"
        ):
            await asyncio.sleep(0.01)
        await other.commit()
        assert await claim is None
    finally:
        await other.close()
    run = await store.get_run("r1")
    assert run is not None and (run.status, run.step) == (RunStatus.WAITING, 2)
    assert await store.expired_leases(float("inf")) == []  # the lease taken went back


async def test_a_conversation_s_steps_read_no_messages_and_its_start_locks_nothing_apart(
    tmp_path: Path, agents_dir: Path, sent: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A step's history comes with its run's start or claim; the SELECT of
    # messages each step sent is gone. Only the test's snapshots (GET of the conversation,
    # which lists its messages) read them now. The run's start locks the conversation with
    # the append of its first events, not a SELECT ... FOR UPDATE of its own.
    with fresh_schema() as url:
        # No sweeper pass: its reads, sent from another task at any moment, would fall
        # between the statements whose order this test reads.
        h = Harness(tmp_path, agents_dir, database_url=url, sweep_seconds=3600)
        snapshots: list[str] = []
        snapshot = h.snapshot

        def counted(conv: Conv) -> dict[str, Any]:
            snapshots.append(conv.id)
            return snapshot(conv)

        monkeypatch.setattr(h, "snapshot", counted)
        try:
            conv = h.conversation()
            h.say(conv, "What should I work on next?")
            h.answer(h.open_call(conv), BOARD)
            assert h.finish(conv)["run"]["status"] == "finished"
        finally:
            h.stop()
    assert len([s for s in sent if "WITH next AS" in s]) >= 4  # the steps' appends counted
    reads = [s for s in sent if s.startswith("SELECT * FROM messages")]
    assert len(reads) == len(snapshots) > 0
    assert not [s for s in sent if "FOR UPDATE" in s]
    # The finished step's end went out inside its last fenced append, not alone; the
    # visitor's answer is audited inside the append of its outcome, not alone either.
    assert not [s for s in sent if s.startswith("WITH h")]
    assert len([s for s in sent if "INTO audit" in s and "INSERT INTO events" in s]) == 1
    assert len([s for s in sent if "DELETE FROM leases" in s and "FOR SHARE" in s]) == 1
    start = next(i for i, s in enumerate(sent) if "INSERT INTO runs" in s)
    # (A process's first run writes its definition in between.)
    before = [s for s in sent[:start] if not s.startswith("INSERT INTO agent_definitions")][-1]
    assert "INSERT INTO messages" in before and "INSERT INTO events" in before


async def test_a_run_s_touch_rides_in_its_first_append_and_never_moves_time_back(
    store: PostgresStore, sent: list[str]
) -> None:
    # A run's start touches its conversation before its first append: the append's UPDATE
    # of the row sets updated_at too (one statement, not two).
    async with store.transaction():
        await store.touch_conversation("c1", 50.0)
        await store.append_event("c1", TextMessageContent("m", "a"))
    assert len(sent) == 1 and "updated_at = GREATEST" in sent[0]
    assert await _updated_at(store) == 50.0
    # An earlier time leaves it, as the UPDATE ... WHERE updated_at < did.
    async with store.transaction():
        await store.touch_conversation("c1", 40.0)
        await store.append_event("c1", TextMessageContent("m", "b"))
    assert await _updated_at(store) == 50.0
    # With no append after it, it goes out by itself at the end; rolled back, not at all.
    async with store.transaction():
        await store.touch_conversation("c1", 60.0)
    assert await _updated_at(store) == 60.0
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.touch_conversation("c1", 70.0)
            await store.append_event("c1", TextMessageContent("m", "c"))
            raise RuntimeError
    assert await _updated_at(store) == 60.0


async def _updated_at(store: PostgresStore) -> float:
    row = await store.db.one("SELECT updated_at FROM conversations WHERE id = 'c1'")
    assert row is not None
    return float(row["updated_at"])
