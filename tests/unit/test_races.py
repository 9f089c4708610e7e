"""Race losers get the code a late request gets for the same situation
(docs/protocol.md), whether they lost at the first check or at the conditional UPDATE."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import pytest

from hostcall.errors import Conflict
from tests.support.databases import fresh_schema
from tests.support.harness import BOARD, Conv, Harness
from tests.support.live import live_server, settings_for
from tests.unit.test_bad_input import CREATE, assert_error, create_call, read_call


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_concurrent_decisions_one_wins_the_rest_are_not_awaiting_decision(
    tmp_path: Path, kind: str
) -> None:
    """Twenty approvals and rejections racing on one call: one wins, every loser gets the
    documented 409 (never a 500), and the call is decided once: one dispatch or one
    result, never both, never two."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if kind == "postgres" else None
        server = stack.enter_context(live_server(settings_for(tmp_path, database_url=url)))
        conv = server.conversation()
        server.say(conv, CREATE)
        call = next(c for c in server.settle(conv)["calls"] if c.get("decisionToken"))
        url = f"/api/calls/{call['toolCallId']}/decision"
        bodies = [
            {"token": call["decisionToken"], "decision": "approve" if i % 2 else "reject"}
            for i in range(20)
        ]
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            responses = await asyncio.gather(*(client.post(url, json=b) for b in bodies))
            late = await client.post(url, json=bodies[0])
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] + [409] * 19, [r.text for r in responses if r.status_code != 409]
        codes = {r.json()["error"]["code"] for r in [*responses, late] if r.status_code == 409}
        assert codes == {"call_not_awaiting_decision"}, codes
        assert late.status_code == 409
        won = next(r for r in responses if r.status_code == 200).json()["state"]
        snap = server.settle(conv)
        decided = next(c for c in snap["calls"] if c["toolCallId"] == call["toolCallId"])
        last = int(snap["lastEventId"].rpartition(":")[2])
        with server.stream(server.events_url(conv)) as stream:
            frames = [next(stream) for _ in range(last)]
        mine = [
            f
            for f in frames
            if f.data.get("toolCallId") == call["toolCallId"]
            or f.data.get("value", {}).get("toolCallId") == call["toolCallId"]
        ]
        dispatches = [f for f in mine if f.event == "hostcall.tool_call_dispatch"]
        results = [f for f in mine if f.event == "TOOL_CALL_RESULT"]
        if won == "rejected":
            assert decided["state"] == "rejected" and not dispatches, decided
            assert len(results) == 1
        else:
            assert won == "dispatched" and len(dispatches) == 1, [f.event for f in mine]
            assert all(r.data.get("state") != "rejected" for r in results)


def test_late_decisions_and_late_answers_say_where_the_call_is(harness: Harness) -> None:
    _, call = create_call(harness)
    assert harness.decide(call, "reject").status_code == 200
    for decision in ("approve", "reject"):
        error = assert_error(harness.decide(call, decision), 409, "call_not_awaiting_decision")
        assert error["details"]["state"] == "rejected"
    _, call = read_call(harness)
    assert harness.answer(call, BOARD).status_code == 200
    error = assert_error(harness.answer(call, BOARD), 409, "call_already_settled")
    assert error["details"]["state"] == "answered"


def test_a_decision_that_loses_at_the_update_gets_what_a_late_one_gets(harness: Harness) -> None:
    # Read while it awaited a decision, decided by someone else before its UPDATE: the
    # loser's refusal names where the call is, as the late decisions above get.
    _, call = create_call(harness)
    stale = harness.call(harness.runtime.store.get_call, call["toolCallId"])
    assert stale is not None
    assert harness.decide(call, "reject").status_code == 200
    with pytest.raises(Conflict) as refused:
        harness.call(harness.runtime.engine.ledger.answers.approve, stale, None)
    assert refused.value.code == "call_not_awaiting_decision"
    assert refused.value.details["state"] == "rejected"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_messages_posted_at_once_start_one_run(tmp_path: Path, kind: str) -> None:
    """Two tabs (or two processes) sending at the same moment: one message starts a run, the
    others get run_in_progress, and the conversation holds one run's user message, not two
    runs answering each other's question. The check and the start share one transaction,
    the conversation locked (on PostgreSQL each statement of a request suspends it)."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if kind == "postgres" else None
        server = stack.enter_context(live_server(settings_for(tmp_path, database_url=url)))
        convs = [server.conversation() for _ in range(5)]
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:

            async def send(conv: Conv, n: int) -> httpx.Response:
                return await client.post(
                    f"/api/conversations/{conv.id}/messages",
                    json={"text": f"What should I work on next? ({n})"}, headers=conv.auth,
                )  # fmt: skip

            for conv in convs:
                responses = await asyncio.gather(*(send(conv, n) for n in range(4)))
                statuses = sorted(r.status_code for r in responses)
                assert statuses == [202, 409, 409, 409], [r.text for r in responses]
                for r in responses:
                    if r.status_code == 409:
                        assert r.json()["error"]["code"] == "run_in_progress"
        for conv in convs:
            snap = server.settle(conv)
            users = [m for m in snap["messages"] if m["role"] == "user"]
            assert len(users) == 1, users
            # A refused start leaves no event either (its events went in before the check,
            # and were rolled back): one run's, numbered with no gap.
            last = int(snap["lastEventId"].rpartition(":")[2])
            with server.stream(server.events_url(conv)) as stream:
                frames = [next(stream) for _ in range(last)]
            assert [f.seq for f in frames] == list(range(1, last + 1))
            assert [f.event for f in frames].count("RUN_STARTED") == 1
            texts = [f.data["delta"] for f in frames if f.event == "TEXT_MESSAGE_CONTENT"]
            assert texts[0] == users[0]["text"]
