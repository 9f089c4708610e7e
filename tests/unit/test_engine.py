"""The run engine and the ledger, driven through the real HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hostcall.call_answers
from hostcall.models.base import Message
from hostcall.protocol.frames import Event
from hostcall.responses import WireResponse
from hostcall.runs.stepping import _model_message
from tests.support.databases import fresh_schema
from tests.support.harness import BOARD, Harness, planner_definition, write_agent


def test_read_board_flow_answers_with_priority_order(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    call = harness.open_call(conv, "dispatched")
    assert call["toolCallName"] == "read_board_tasks"
    assert call["input"] == {"boardId": "main"}
    assert harness.snapshot(conv)["run"]["status"] == "waiting"

    r = harness.answer(call, BOARD)
    assert r.status_code == 200 and r.json() == {"state": "answered"}
    snap = harness.settle(conv)
    assert snap["run"]["status"] == "finished"
    reply = harness.assistant_texts(conv)[-1]
    assert reply.index("Fix login bug") < reply.index("Write release notes")
    assert "Plan sprint" not in reply


def test_streams_get_the_result_and_the_resumed_steps_first_text_before_the_answers_response(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the person waits for (the result, then the next step's first words)
    goes to the streams before the answering page gets its 200, not after it. A reader
    subscribed as a stream records, in the app's event loop, what it is woken with."""
    h = harness
    conv = h.conversation()
    h.say(conv, "What should I work on next?")
    call = h.open_call(conv, "dispatched")
    order: list[str] = []

    class Recorded(WireResponse):
        async def __call__(self, *args: Any) -> None:
            order.append("response")
            await super().__call__(*args)

    monkeypatch.setattr(hostcall.call_answers, "WireResponse", Recorded)

    async def subscribe() -> asyncio.Queue[Event | None]:
        return h.runtime.broker.subscribe(conv.id)

    queue = h.call(subscribe)

    async def read() -> None:
        while (event := await queue.get()) is not None:
            order.append(event.name)
            if event.name == "RUN_FINISHED":
                return

    assert h.client is not None and h.client.portal is not None
    reading = h.client.portal.start_task_soon(read)
    assert h.answer(call, BOARD).status_code == 200
    reading.result(timeout=5)
    assert order.index("TOOL_CALL_RESULT") < order.index("TEXT_MESSAGE_START")
    assert order.index("TEXT_MESSAGE_START") < order.index("TEXT_MESSAGE_CONTENT")
    assert order.index("TEXT_MESSAGE_CONTENT") < order.index("response")
    h.settle(conv)
    assert "Fix login bug" in h.assistant_texts(conv)[-1]


def test_events_follow_agui_names_and_increase_by_one(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    harness.answer(harness.open_call(conv), BOARD)
    harness.settle(conv)
    store = harness.runtime.store
    events = harness.call(store.events_after, conv.id, 0)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    names = [e.name for e in events]
    assert names[0] == "RUN_STARTED" and names[-1] == "RUN_FINISHED"
    for expected in (
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "hostcall.tool_call_dispatch",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_CONTENT",
    ):
        assert expected in names
    dispatch = next(e.data["value"] for e in events if e.name == "hostcall.tool_call_dispatch")
    for key in (
        "toolCallId",
        "toolCallName",
        "input",
        "inputSchema",
        "outputSchema",
        "deadline",
        "resultToken",
    ):
        assert key in dispatch


def test_confirmation_approve_with_edits_dispatches_the_edited_input(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "Add a task to review the Q3 report before Friday")
    call = harness.open_call(conv, "awaiting_confirmation")
    assert call["input"] == {
        "title": "Review the Q3 report",
        "description": "Added from the chat.",
        "dueDate": "Friday",
    }
    assert "resultToken" not in call and "decisionToken" in call

    edited = {"title": "Review the Q3 report draft", "dueDate": "Friday"}
    r = harness.decide(call, "approve", input=edited)
    assert r.status_code == 200 and r.json() == {"state": "dispatched"}
    dispatched = harness.open_call(conv, "dispatched")
    assert dispatched["input"] == edited

    r = harness.answer(dispatched, {"id": "t9", "title": edited["title"], "status": "todo"})
    assert r.status_code == 200
    harness.settle(conv)
    assert "Review the Q3 report draft" in harness.assistant_texts(conv)[-1]


def test_reject_with_reason_reaches_the_model(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "Add a task to review the Q3 report before Friday")
    call = harness.open_call(conv, "awaiting_confirmation")
    r = harness.decide(call, "reject", reason="not this week")
    assert r.status_code == 200 and r.json() == {"state": "rejected"}
    snap = harness.settle(conv)
    assert snap["run"]["status"] == "finished"
    assert snap["calls"][-1]["outcome"]["error"]["code"] == "approval_rejected"
    assert "not this week" in harness.assistant_texts(conv)[-1]


def test_surface_errors_reach_the_model(harness: Harness) -> None:
    for code in ("no_handler", "client_error"):
        conv = harness.conversation()
        harness.say(conv, "What should I work on next?")
        call = harness.open_call(conv)
        r = harness.http.post(
            f"/api/calls/{call['toolCallId']}/result",
            json={
                "token": call["resultToken"],
                "error": {"code": code, "message": "board offline"},
            },
        )
        assert r.status_code == 200 and r.json() == {"state": "failed"}
        harness.settle(conv)
        error = harness.model_error(call)
        assert error["code"] == code and "board offline" in error["message"]
        # The demo's reply is a sentence for people: no code, no page's words.
        reply = harness.assistant_texts(conv)[-1]
        assert code not in reply and "board offline" not in reply


def test_delivered_is_recorded_once_and_only_the_first_delivery_may_run(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    call = harness.open_call(conv)
    firsts = []
    for _ in range(3):
        r = harness.http.post(
            f"/api/calls/{call['toolCallId']}/delivered", json={"token": call["resultToken"]}
        )
        assert r.status_code == 200 and r.json()["state"] == "delivered"
        firsts.append(r.json()["first"])
    assert firsts == [True, False, False]
    again = harness.open_call(conv)
    assert again["state"] == "delivered" and again["delivered"] is True
    # Delivery is a claim, not news: no event tells every stream about it.
    assert [t for t, _ in harness.events(conv) if t == "hostcall.tool_call_state"] == []
    assert harness.answer(again, BOARD).status_code == 200


def test_capabilities_route_calls_to_handler_or_form(harness: Harness) -> None:
    conv = harness.conversation()
    r = harness.http.post(
        f"/api/conversations/{conv.id}/capabilities",
        json={"tools": ["read_board_tasks"]},
        headers=conv.auth,
    )
    assert r.status_code == 200
    harness.say(conv, "What should I work on next?")
    assert harness.open_call(conv)["route"] == "handler"
    harness.answer(harness.open_call(conv), BOARD)
    harness.settle(conv)
    harness.say(conv, "Add a task to call Bob")
    assert harness.open_call(conv)["route"] == "form"


def test_message_while_run_waits_is_refused_and_nothing_lost(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    harness.open_call(conv)
    before = harness.events(conv)
    r = harness.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": "hello"}, headers=conv.auth
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_in_progress"
    assert harness.events(conv) == before
    assert harness.snapshot(conv)["run"]["status"] == "waiting"


def test_fallback_reply_without_tools(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "Tell me a joke")
    snap = harness.settle(conv)
    assert snap["run"]["status"] == "finished" and snap["calls"] == []
    assert "add a task" in harness.assistant_texts(conv)[-1]


def test_an_optional_group_that_did_not_match_leaves_its_argument_out(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "Add a task to ship the release")
    call = harness.open_call(conv, "awaiting_confirmation")
    assert call["input"] == {"title": "Ship the release", "description": "Added from the chat."}


# ---- a step's history, read with its run's start or claim -----------------------


@pytest.fixture(params=["sqlite", "postgres"])
def any_harness(
    request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path
) -> Iterator[Harness]:
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        h = Harness(tmp_path, agents_dir, **({"database_url": url} if url else {}))
        stack.callback(h.stop)
        yield h


def test_each_step_s_history_is_the_conversation_s_messages_as_stored_when_it_starts(
    any_harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first step's history comes with its run's start, a resumed step's with its claim
    # (no read of their own on PostgreSQL): each must be what a read then finds.
    h = any_harness
    engine = h.runtime.engine
    conv = h.conversation()
    given: list[tuple[list[Message], list[Message]]] = []
    build = engine.agents.model

    class Recording:
        def __init__(self, model: Any) -> None:
            self.model = model

        async def stream(self, history: list[Message], *args: Any, **kwargs: Any) -> Any:
            stored = await h.runtime.store.list_messages(conv.id)
            given.append((list(history), [_model_message(m) for m in stored]))
            async for item in self.model.stream(history, *args, **kwargs):
                yield item

    monkeypatch.setattr(engine.agents, "model", lambda agent: Recording(build(agent)))
    for text in ("What should I work on next?", "What should I work on next?"):
        h.say(conv, text)
        h.answer(h.open_call(conv), BOARD)
        assert h.finish(conv)["run"]["status"] == "finished"
    # Two runs of two steps: each started with the history a read found at that moment.
    assert len(given) == 4
    for history, stored in given:
        assert history == stored
    assert [m.role for m in given[-1][0]] == [
        *("user", "assistant", "tool", "assistant"),
        *("user", "assistant", "tool"),
    ]


# ---- the turns a step sends the model -------------------------------------------------------


def _windowed_harness(tmp_path: Path, agents_dir: Path, turns: int) -> Harness:
    data = planner_definition()
    data["history_turns"] = turns
    write_agent(agents_dir, data)
    return Harness(tmp_path, agents_dir)


def _recorded(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[list[Message]]:
    """Every history a model step of ``h`` is sent, from here on."""
    given: list[list[Message]] = []
    build = h.runtime.engine.agents.model

    class Recording:
        def __init__(self, model: Any) -> None:
            self.model = model

        async def stream(self, history: list[Message], *args: Any, **kwargs: Any) -> Any:
            given.append(list(history))
            async for item in self.model.stream(history, *args, **kwargs):
                yield item

    monkeypatch.setattr(h.runtime.engine.agents, "model", lambda agent: Recording(build(agent)))
    return given


def test_the_model_is_sent_the_last_history_turns_with_every_call_beside_its_result(
    tmp_path: Path, agents_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = _windowed_harness(tmp_path, agents_dir, 2)
    try:
        given = _recorded(h, monkeypatch)
        conv = h.conversation()
        replies = []
        for _ in range(4):
            h.say(conv, "What should I work on next?")
            h.answer(h.open_call(conv), BOARD)
            assert h.finish(conv)["run"]["status"] == "finished"
            replies.append(h.assistant_texts(conv)[-1])
            h.say(conv, "hello")
            assert h.finish(conv)["run"]["status"] == "finished"
        stored = h.call(h.runtime.store.list_messages, conv.id)
    finally:
        h.stop()
    assert sum(m.role == "user" for m in stored) == 8
    assert len(given) == 12  # a step per "hello", two per board question
    for history in given:
        assert 1 <= sum(m.role == "user" for m in history) <= 2
        assert history[0].role == "user"
        asked = [c.call_id for m in history if m.role == "assistant" for c in m.tool_calls]
        answered = [m.tool_call_id for m in history if m.role == "tool"]
        assert answered == asked  # each call with its result, none without the other
    # The board question's second step: the last turn before it, then the turn in progress.
    assert [m.role for m in given[-2]] == [
        *("user", "assistant"),
        *("user", "assistant", "tool"),
    ]
    # The scripted model answers as it did with the whole conversation.
    assert len(set(replies)) == 1
    assert replies[0].index("Fix login bug") < replies[0].index("Write release notes")


def test_what_a_step_costs_stays_flat_as_the_conversation_grows(
    tmp_path: Path, agents_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With every turn sent, each step counted all the turns before it against the budget.
    h = _windowed_harness(tmp_path, agents_dir, 3)
    spent: list[int] = []
    record = h.runtime.quotas.record_tokens

    async def counted(
        agent_id: str, limits: Any, conversation_id: str, tokens: int, **person: Any
    ) -> None:
        spent.append(tokens)
        await record(agent_id, limits, conversation_id, tokens, **person)

    monkeypatch.setattr(h.runtime.quotas, "record_tokens", counted)
    try:
        conv = h.conversation()
        for _ in range(8):
            h.say(conv, "hello")
            assert h.finish(conv)["run"]["status"] == "finished"
    finally:
        h.stop()
    assert len(spent) == 8
    assert spent[0] < spent[1] < spent[2] == spent[3] == spent[7]
