"""Human handoff: an operator takes a conversation over from the console, the agent stops
answering, the operator writes as themselves, and hands back to an agent that reads the
exchange. One person holds a conversation at a time; every action is audited."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import store_url
from tests.support.harness import Conv, Harness, allow_hosts, write_agent
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    with store_url(request.param) as url:
        h = Harness(tmp_path, agents_dir, database_url=url)
        yield h
        h.stop()


def _audit(h: Harness) -> list[tuple[str, str, str | None]]:
    entries = h.call(h.runtime.store.list_audit)
    return [
        (e.actor, e.action, e.conversation_id)
        for e in reversed(entries)
        if e.action.startswith("conversation.")
    ]


def _post(h: Harness, conv: Conv, text: str) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": text}, headers=conv.auth
    )


def test_a_taken_over_conversation_starts_no_run_and_the_person_answers_live(
    both: Harness,
) -> None:
    h = both
    conv = h.conversation()
    h.say(conv, "hello")
    h.settle(conv)
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    r = olga.post(f"/console/api/conversations/{conv.id}/take-over", {})
    assert r.status_code == 200, r.text
    assert r.json()["handoff"]["state"] == "taken" and r.json()["handoff"]["person"] == "olga"
    runs = len(h.call(h.runtime.store.list_runs, conv.id))

    # The visitor writes: kept for the person, no run starts.
    r = _post(h, conv, "hello, is anyone there?")
    assert r.status_code == 202, r.text
    assert r.json()["person"] == "olga" and "runId" not in r.json()
    assert len(h.call(h.runtime.store.list_runs, conv.id)) == runs
    r = olga.post(f"/console/api/conversations/{conv.id}/messages", {"text": "Yes, Olga here."})
    assert r.status_code == 201, r.text
    said = r.json()["messageId"]

    snap = h.snapshot(conv)
    assert snap["person"] == "olga"
    assert [(m["role"], m["text"], m.get("name")) for m in snap["messages"][-2:]] == [
        ("user", "hello, is anyone there?", None),
        ("operator", "Yes, Olga here.", "olga"),
    ]
    events = h.events(conv)
    names = [name for name, _ in events]
    assert "hostcall.person_joined" in names
    assert ("hostcall.person_message", {"messageId": said, "name": "olga",
            "text": "Yes, Olga here."}) in events  # fmt: skip
    assert names.count("RUN_STARTED") == runs
    # A person's message is not one of the agent's replies: the visitor cannot rate it.
    r = h.http.post(f"/api/conversations/{conv.id}/messages/{said}/feedback",
                    json={"rating": "up"}, headers=conv.auth)  # fmt: skip
    assert r.status_code == 422 and r.json()["error"]["code"] == "not_a_reply"
    assert h.call(h.runtime.store.feedback_of, conv.id) == []

    r = olga.post(f"/console/api/conversations/{conv.id}/hand-back", {})
    assert r.status_code == 200 and r.json() == {"handoff": None}
    assert ("hostcall.person_left", {"name": "olga"}) in h.events(conv)
    assert h.snapshot(conv).get("person") is None
    # The agent answers again.
    h.say(conv, "hello again")
    assert h.settle(conv)["run"]["status"] == "finished"
    assert _audit(h) == [
        ("olga", "conversation.take_over", conv.id),
        ("olga", "conversation.message", conv.id),
        ("olga", "conversation.hand_back", conv.id),
    ]
    detail = olga.http.get(f"/console/api/conversations/{conv.id}").json()
    assert detail["handoff"] is None
    assert any(m["role"] == "operator" and m["author"] == "olga" for m in detail["messages"])


def test_a_second_operator_cannot_take_over_write_or_hand_back(both: Harness) -> None:
    h = both
    conv = h.conversation()
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    piet = ConsoleClient(h.app, h.runtime, "piet", "operator")
    assert olga.post(f"/console/api/conversations/{conv.id}/take-over", {}).status_code == 200
    before = (h.events(conv), h.snapshot(conv)["messages"])
    r = piet.post(f"/console/api/conversations/{conv.id}/take-over", {})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conversation_taken"
    assert r.json()["error"]["details"]["person"] == "olga"
    r = olga.post(f"/console/api/conversations/{conv.id}/take-over", {})  # twice: refused too
    assert r.status_code == 409 and r.json()["error"]["code"] == "conversation_taken"
    r = piet.post(f"/console/api/conversations/{conv.id}/messages", {"text": "Piet here"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_taken_over"
    r = piet.post(f"/console/api/conversations/{conv.id}/hand-back", {})
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_taken_over"
    r = olga.post(f"/console/api/conversations/{conv.id}/messages", {"text": "  "})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_message"
    # Nothing of the refused actions was kept: no event, no message, no audit entry.
    assert (h.events(conv), h.snapshot(conv)["messages"]) == before
    assert _audit(h) == [("olga", "conversation.take_over", conv.id)]
    held = h.call(h.runtime.store.get_handoff, conv.id)
    assert held is not None and (held.state, held.person) == ("taken", "olga")


def test_a_missing_or_finished_conversation_cannot_be_taken_over(
    tmp_path: Path, agents_dir: Path
) -> None:
    write_agent(agents_dir, {"id": "brief", "name": "Brief", "model": {"kind": "scripted"},
                             "tools": []})  # fmt: skip
    h = Harness(tmp_path, agents_dir)
    try:
        olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
        r = olga.post("/console/api/conversations/c_nope/take-over", {})
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_conversation"
        conv = h.conversation("brief")
        (agents_dir / "brief.json").unlink()
        h.runtime.reload_agents()
        r = olga.post(f"/console/api/conversations/{conv.id}/take-over", {})
        assert r.status_code == 409 and r.json()["error"]["code"] == "conversation_finished"
        assert h.call(h.runtime.store.get_handoff, conv.id) is None
        assert _audit(h) == []
        r = olga.post("/console/api/conversations/c_nope/messages", {"text": "hi"})
        assert r.status_code == 404
        anonymous = h.http.post(f"/console/api/conversations/{conv.id}/take-over")
        assert anonymous.status_code in (401, 403)
    finally:
        h.stop()


def test_taking_over_a_run_waiting_on_a_call_cancels_it(both: Harness) -> None:
    h = both
    conv = h.conversation()
    h.say(conv, "what should I work on next?")
    call = h.open_call(conv)
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    assert olga.post(f"/console/api/conversations/{conv.id}/take-over", {}).status_code == 200
    snap = h.snapshot(conv)
    # An operator's cancel: the run and its open call end as the console's cancel ends them.
    assert snap["run"]["status"] == "failed"
    assert snap["run"]["error"]["code"] == "operator_cancelled"
    [ended] = [c for c in snap["calls"] if c["toolCallId"] == call["toolCallId"]]
    assert ended["state"] == "failed"
    assert ended["outcome"]["error"]["code"] == "operator_cancelled"


@pytest.fixture(params=["sqlite", "postgres"])
def teller(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """An agent whose story streams slowly: a run still running when the operator comes."""
    agents = tmp_path / "agents"
    story = {"match": "(?i)story", "reply": "Once upon a time " * 30, "pace_seconds": 0.1}
    write_agent(agents, {
        "id": "teller", "allowed_origins": ["http://testserver"],
        "model": {"kind": "scripted", "rules": [story]},
    })  # fmt: skip
    with store_url(request.param) as url:
        h = Harness(tmp_path, agents, database_url=url)
        yield h
        h.stop()


def test_taking_over_while_the_agent_is_answering_stops_it_first(teller: Harness) -> None:
    h = teller
    conv = h.conversation("teller")
    h.say(conv, "tell me a story")
    while "TEXT_MESSAGE_CONTENT" not in [name for name, _ in h.events(conv)]:
        time.sleep(0.02)
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    r = olga.post(f"/console/api/conversations/{conv.id}/take-over", {})
    assert r.status_code == 200, r.text
    assert r.json()["handoff"]["person"] == "olga"
    snap = h.snapshot(conv)
    assert snap["run"]["status"] == "failed"
    assert snap["run"]["error"]["code"] == "operator_cancelled"
    names = [name for name, _ in h.events(conv)]
    # The reply so far is ended before the person joins, and nothing of it comes after.
    joined = names.index("hostcall.person_joined")
    # The words so far are taken back (as the visitor's Stop takes them), before she joins.
    assert names.index("hostcall.text_message_discarded") < joined
    assert names.count("TEXT_MESSAGE_START") == names.count("TEXT_MESSAGE_END")
    assert "TEXT_MESSAGE_CONTENT" not in names[joined:]
    # Until the step's task has ended: one that went on writes the rest of the story first.
    h.call(h.runtime.engine.drain)
    assert [name for name, _ in h.events(conv)] == names
    entry = next(e for e in h.call(h.runtime.store.list_audit) if e.action.endswith("take_over"))
    assert entry.details["cancelled_run"] is True


def test_after_the_hand_back_the_agent_reads_the_exchange(
    tmp_path: Path, agents_dir: Path, provider: FakeProvider
) -> None:
    write_agent(agents_dir, {
        "id": "talker", "name": "Talker",
        "model": {"kind": "openai", "base_url": provider.base_url, "model": "m"},
        "tools": [],
    })  # fmt: skip
    allow_hosts(agents_dir, provider.base_url)
    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation("talker")
        olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
        assert olga.post(f"/console/api/conversations/{conv.id}/take-over", {}).status_code == 200
        assert _post(h, conv, "my order 1234 is late").status_code == 202
        said = {"text": "I have rushed order 1234; it ships today."}
        assert olga.post(f"/console/api/conversations/{conv.id}/messages", said).status_code == 201
        assert olga.post(f"/console/api/conversations/{conv.id}/hand-back", {}).status_code == 200
        assert provider.received == []  # no model call while the person held it
        provider.replies.append(Reply([text("Glad it is sorted."), chunk({}, "stop"), DONE]))
        h.say(conv, "thanks!")
        assert h.settle(conv)["run"]["status"] == "finished"
        [request] = provider.received
        sent = [
            (m["role"], m["content"]) for m in request.body["messages"] if m["role"] != "system"
        ]
        assert sent == [
            ("user", "my order 1234 is late"),
            ("assistant", "[olga, a person of the team] I have rushed order 1234; it ships today."),
            ("user", "thanks!"),
        ]
    finally:
        h.stop()


DESK = {
    "id": "desk", "name": "Help desk", "model": {"kind": "scripted", "rules": [
        {"match": "(?i)a person", "tool": "ask_for_person",
         "arguments": {"reason": "the visitor asked"},
         "reply": "{% if result.queued %}Someone from the team will join you here."
                  "{% else %}Someone is already on their way.{% endif %}"},
        {"match": ".", "say": "I am the desk's agent."},
    ]},
    "tools": [{"kind": "person", "name": "ask_for_person",
               "description": "Ask for a person of the team when you cannot help."}],
}  # fmt: skip


def test_the_agents_ask_for_person_queues_the_conversation_for_the_console(
    tmp_path: Path, agents_dir: Path
) -> None:
    write_agent(agents_dir, DESK)
    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation("desk")
        quiet = h.conversation("desk")
        h.say(quiet, "hello")
        h.settle(quiet)
        h.say(conv, "I want to talk to a person")
        snap = h.finish(conv)
        assert h.assistant_texts(conv)[-1] == "Someone from the team will join you here."
        [call] = snap["calls"]
        assert (call["kind"], call["state"], call["outcome"]) == (
            "person", "answered", {"output": {"queued": True}})  # fmt: skip
        assert ("hostcall.person_requested", {}) in h.events(conv)
        olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
        waiting = olga.http.get("/console/api/conversations?handoff=waiting").json()["items"]
        assert [(i["id"], i["handoff"], i["heldBy"]) for i in waiting] == [(conv.id, "waiting", "")]
        # Asked again while it waits: not queued twice.
        h.say(conv, "a person, please")
        h.finish(conv)
        assert h.assistant_texts(conv)[-1] == "Someone is already on their way."
        assert [n for n, _ in h.events(conv)].count("hostcall.person_requested") == 1
        # Taking it over takes it off the waiting list.
        assert olga.post(f"/console/api/conversations/{conv.id}/take-over", {}).status_code == 200
        assert olga.http.get("/console/api/conversations?handoff=waiting").json()["items"] == []
        taken = olga.http.get("/console/api/conversations?handoff=taken").json()["items"]
        assert [(i["id"], i["heldBy"]) for i in taken] == [(conv.id, "olga")]
        r = olga.http.get("/console/api/conversations?handoff=maybe")
        assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "handoff"
    finally:
        h.stop()


def test_the_console_ledger_shows_the_person_tool_ran_on_the_server(
    tmp_path: Path, agents_dir: Path
) -> None:
    """The built-in tool is a block the server runs: its call never went to a form, and no
    visitor nor page answered it (the stored route is only the default of a call's row)."""
    write_agent(agents_dir, DESK)
    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation("desk")
        h.say(conv, "I want to talk to a person")
        h.finish(conv)
        olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
        r = olga.http.get(f"/console/api/conversations/{conv.id}")
        assert r.status_code == 200, r.text
        [call] = r.json()["calls"]
        assert (call["kind"], call["state"], call["route"], call["answeredBy"]) == (
            "person", "answered", "server", None)  # fmt: skip
        assert call["surfaceId"] is None and "formReason" not in call
    finally:
        h.stop()


def test_a_person_tool_with_a_schema_of_its_own_is_refused(tmp_path: Path) -> None:
    from hostcall.tools import parse_tool

    tool, problems = parse_tool(
        {"kind": "person", "name": "ask_for_person", "description": "x", "input_schema": {}},
        "desk.json: tool #1",
    )
    assert tool is None
    assert problems == ["desk.json: tool 'ask_for_person': unknown key 'input_schema'"]


def test_an_ag_ui_run_on_a_thread_a_person_holds_is_refused(harness: Harness) -> None:
    from hostcall.agui import thread_conversation_id

    h = harness
    hello = {"threadId": "t-1", "runId": "r1", "tools": [],
             "messages": [{"id": "m1", "role": "user", "content": "hello"}]}  # fmt: skip
    first = h.http.post("/agui/planner", json=hello)
    assert first.status_code == 200 and "RUN_FINISHED" in first.text
    cid = thread_conversation_id("planner", "t-1")
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    assert olga.post(f"/console/api/conversations/{cid}/take-over", {}).status_code == 200
    before = h.call(h.runtime.store.events_after, cid, 0)
    again = {**hello, "runId": "r2", "messages": [*hello["messages"],
             {"id": "m2", "role": "user", "content": "hello again"}]}  # fmt: skip
    r = h.http.post("/agui/planner", json=again)
    assert r.status_code == 409 and r.json()["error"]["code"] == "conversation_taken"
    assert r.json()["error"]["details"]["person"] == "olga"
    assert h.call(h.runtime.store.events_after, cid, 0) == before
