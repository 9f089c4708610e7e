"""Run ownership by lease, in the engine: set up what another process left, then
let this one sweep, with the real app on a real store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostcall.store.records import CallState, Run, RunStatus, StoredMessage
from tests.support.databases import fresh_schema
from tests.support.harness import Harness

ASK = "What should I work on next?"


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


def _left_mid_step(h: Harness, *, owner: str, until: float) -> str:
    """A run another process is stepping: running, its user message stored, its lease held."""
    store = h.runtime.store
    conv = h.conversation()

    async def leave() -> None:
        async with store.transaction():
            await store.create_run(
                Run("r_other", conv.id, h.runtime.agents["planner"].source, RunStatus.RUNNING)
            )
            await store.add_message(StoredMessage("m_other", conv.id, "r_other", "user", ASK))
            assert await store.take_lease("run:r_other", owner, until, time.time())

    h.call(leave)
    return conv.id


def _sweep(h: Harness) -> None:
    """One sweep on the app's event loop (where the engine starts its steps), then wait."""
    assert h.client is not None and h.client.portal is not None
    engine = h.runtime.engine
    h.client.portal.call(lambda: engine.sweep(stalled=True))
    h.client.portal.call(engine.drain)


def test_a_live_lease_is_never_adopted_and_a_lapsed_one_is(
    tmp_path: Path, agents_dir: Path, pg_url: str
) -> None:
    h = Harness(tmp_path, agents_dir, database_url=pg_url, lease_seconds=1.0)
    try:
        store = h.runtime.store
        cid = _left_mid_step(h, owner="other-process", until=time.time() + 60)
        _sweep(h)
        # The other process is alive (its lease is live): nothing of its step is re-run.
        assert h.call(store.get_run, "r_other").status is RunStatus.RUNNING  # type: ignore[union-attr]
        assert [m.role for m in h.call(store.list_messages, cid)] == ["user"]
        assert h.call(store.list_calls, cid) == []

        # It dies: its lease lapses, and this process takes the step over, once.
        h.call(store.take_lease, "run:r_other", "other-process", time.time() - 1, time.time())
        _sweep(h)
        _sweep(h)
        run = h.call(store.get_run, "r_other")
        assert run is not None and run.status is RunStatus.WAITING
        assert [m.role for m in h.call(store.list_messages, cid)] == ["user", "assistant"]
        assert [c.tool_name for c in h.call(store.list_calls, cid)] == ["read_board_tasks"]
        # Handed back when the step ended; only this process's own leases are left: its
        # life's, and the sweeper's turn.
        left = sorted(h.call(store.expired_leases, float("inf")))
        assert left == [f"process:{h.runtime.leases.owner}", "turn:sweeper"]
    finally:
        h.stop()


def test_only_the_process_with_the_sweeper_turn_expires_calls(
    tmp_path: Path, agents_dir: Path, pg_url: str
) -> None:
    # Only the sweeps below run: a background sweep of the first process could expire the
    # call before the second's sweep is checked (the test then failed on a loaded machine).
    first = Harness(tmp_path / "a", agents_dir, database_url=pg_url, sweep_seconds=3600)
    second = Harness(tmp_path / "b", agents_dir, database_url=pg_url, sweep_seconds=3600)
    try:
        _sweep(first)  # the first to sweep takes the cluster's sweeper turn, and keeps it
        conv = first.conversation()
        first.say(conv, ASK)
        call = first.open_call(conv)
        store = second.runtime.store
        # Push the deadline into the past, as time passing would.
        state = CallState(call["state"])
        second.call(store.transition_call, call["toolCallId"], [state], state, deadline=0.0)
        _sweep(second)  # not its turn: the first process started first
        assert second.call(store.get_call, call["toolCallId"]).state.open  # type: ignore[union-attr]
        _sweep(first)
        assert second.call(store.get_call, call["toolCallId"]).state.value == "expired"  # type: ignore[union-attr]
    finally:
        second.stop()
        first.stop()


def test_a_step_left_by_a_killed_process_resumes_when_its_sqlite_file_reopens(
    tmp_path: Path, agents_dir: Path
) -> None:
    h = Harness(tmp_path, agents_dir)
    try:
        # Its lease is "live" by the clock, but the process that held it is gone: nobody
        # else can have the file open, so every lease in it is stale at start.
        cid = _left_mid_step(h, owner="killed-process", until=time.time() + 3600)
        h.restart()
        store = h.runtime.store
        deadline = time.monotonic() + 5
        while h.call(store.get_run, "r_other").status is RunStatus.RUNNING:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the interrupted step was not resumed"
            time.sleep(0.02)
        assert [c.tool_name for c in h.call(store.list_calls, cid)] == ["read_board_tasks"]
    finally:
        h.stop()
