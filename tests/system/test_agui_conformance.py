"""Every event is AG-UI: checked by the official ``@ag-ui/core`` schemas, run in node.

tests/conftest.py checks every event every test stored; this file drives the flows of the
issue on purpose, so each kind of event is known to be covered, and checks the bytes on the
wire (a replay after ``Last-Event-ID``), not only the store.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hostcall.protocol.events import CustomName, EventType
from hostcall.settings import DEMO_AGENTS
from tests.agui import check_events, event_name
from tests.support.harness import BOARD, Harness, write_agent
from tests.support.live import live_server, settings_for


def test_the_checker_refuses_what_is_not_ag_ui() -> None:
    failures = check_events(
        [
            ("untyped", {"threadId": "c_1", "runId": "r_1"}),  # an older shape
            ("ours", {"type": "TOOL_CALL_DISPATCH", "toolCallId": "k_1"}),
            ("custom without name", {"type": "CUSTOM", "value": {}}),
            ("fine", {"type": "RUN_STARTED", "threadId": "c_1", "runId": "r_1"}),
        ]
    )
    assert [f["where"] for f in failures] == ["untyped", "ours", "custom without name"]


def test_each_flow_of_the_planner_streams_only_ag_ui_events(tmp_path: Path) -> None:
    h = Harness(tmp_path, DEMO_AGENTS)
    try:
        conv = h.conversation()
        h.say(conv, "What should I work on next?")  # client tool, answered
        assert h.answer(h.open_call(conv), BOARD).status_code == 200
        h.say(conv, "Add a task to write the notes")  # approved as proposed
        assert h.decide(h.open_call(conv), "approve").status_code == 200
        assert h.answer(h.open_call(conv), {"id": "t9", "title": "Write the notes",
                                            "status": "todo"}).status_code == 200  # fmt: skip
        h.say(conv, "Add a task to plan the week")  # approved with edits, then a form answer
        edited = {"title": "Plan next week", "description": "", "dueDate": ""}
        assert h.decide(h.open_call(conv), "approve", input=edited).status_code == 200
        call = h.open_call(conv)
        error = {"error": {"code": "no_handler", "message": "no form here"}}
        r = h.http.post(f"/api/calls/{call['toolCallId']}/result",
                        json={"token": call["resultToken"], **error})  # fmt: skip
        assert r.status_code == 200, r.text
        h.say(conv, "Add a task to nothing")  # rejected with a reason
        assert h.decide(h.open_call(conv), "reject", reason="not now").status_code == 200
        h.settle(conv)
        simulated = h.conversation()
        r = h.http.post(f"/api/conversations/{simulated.id}/messages",
                        json={"text": "What should I work on next?", "simulate": True},
                        headers=simulated.auth)  # fmt: skip
        assert r.status_code == 202, r.text
        h.settle(simulated)
        events = [("main", e) for e in _events(h, conv.id)]
        events += [("simulated", e) for e in _events(h, simulated.id)]
    finally:
        h.stop()
    names = {event_name(e) for _, e in events}
    reasoning = {t.value for t in EventType if t.value.startswith("REASONING")}  # below
    expected = {t.value for t in EventType} - {"CUSTOM", "RUN_ERROR"} - reasoning
    expected |= {CustomName.TOOL_CALL_DISPATCH, CustomName.TOOL_CALL_APPROVAL_REQUESTED}
    assert expected <= names, expected - names
    assert any(e.get("simulated") for _, e in events if e["type"] == "RUN_STARTED")
    assert check_events(events) == []


def test_a_model_reasoning_before_it_answers_streams_only_ag_ui_events(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    write_agent(agents, {
        "id": "thinker", "name": "Thinker", "tools": [],
        "model": {"kind": "scripted", "rules": [
            {"match": "plan", "reasoning": "Goals first, then days.", "reply": "Your plan."},
        ]},
    })  # fmt: skip
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("thinker")
        h.say(conv, "plan my week")
        h.settle(conv)
        events = [("reasoning", e) for e in _events(h, conv.id)]
    finally:
        h.stop()
    reasoning = {t.value for t in EventType if t.value.startswith("REASONING")}
    assert reasoning <= {event_name(e) for _, e in events}
    assert check_events(events) == []


def test_a_person_asked_for_joining_writing_and_leaving_streams_only_ag_ui_events(
    tmp_path: Path, agents_dir: Path
) -> None:
    from tests.unit.console_client import ConsoleClient
    from tests.unit.test_handoff import DESK

    write_agent(agents_dir, DESK)
    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation("desk")
        h.say(conv, "I want a person")
        h.finish(conv)
        olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
        path = f"/console/api/conversations/{conv.id}"
        assert olga.post(f"{path}/take-over", {}).status_code == 200
        r = h.http.post(f"/api/conversations/{conv.id}/messages", json={"text": "hi?"},
                        headers=conv.auth)  # fmt: skip
        assert r.status_code == 202 and r.json()["person"] == "olga"
        assert olga.post(f"{path}/messages", {"text": "Olga here."}).status_code == 201
        assert olga.post(f"{path}/hand-back", {}).status_code == 200
        events = [("handoff", e) for e in _events(h, conv.id)]
    finally:
        h.stop()
    names = {event_name(e) for _, e in events}
    people = {CustomName.PERSON_REQUESTED, CustomName.PERSON_JOINED, CustomName.PERSON_MESSAGE,
              CustomName.PERSON_LEFT}  # fmt: skip
    assert people <= names, people - names
    assert check_events(events) == []


def test_a_replay_after_last_event_id_sends_ag_ui_events(tmp_path: Path) -> None:
    with live_server(settings_for(tmp_path)) as live:
        conv, last = live.finished_conversation()
        headers = {"Last-Event-ID": f"{conv.id}:3"}
        with live.stream(live.events_url(conv), headers=headers) as stream:
            frames = [next(stream) for _ in range(last - 3)]
    assert [f.seq for f in frames] == list(range(4, last + 1))
    assert all(f.event == event_name(f.data) for f in frames)
    assert check_events([(f.id, f.data) for f in frames]) == []


def test_events_stored_before_issue_8_replay_as_ag_ui(tmp_path: Path) -> None:
    """A database written before events carried ``type``: its rows come out in today's shape."""
    h = Harness(tmp_path, DEMO_AGENTS)
    try:
        conv = h.conversation()
        h.say(conv, "What should I work on next?")
        call = h.open_call(conv)
        db = sqlite3.connect(h.settings.db_path)
        with db:
            for seq, name, data in db.execute(
                "SELECT seq, type, data FROM events WHERE conversation_id = ?", (conv.id,)
            ).fetchall():
                new = json.loads(data)
                old = new["value"] if new["type"] == "CUSTOM" else new
                old.pop("type", None)
                legacy = {"hostcall.tool_call_dispatch": "TOOL_CALL_DISPATCH"}.get(name, name)
                db.execute(
                    "UPDATE events SET type = ?, data = ? WHERE conversation_id = ? AND seq = ?",
                    (legacy, json.dumps(old), conv.id, seq),
                )
        db.close()
        replayed = h.call(h.runtime.store.events_after, conv.id, 0)
    finally:
        h.stop()
    dispatch = [e for e in replayed if e.name == CustomName.TOOL_CALL_DISPATCH]
    assert [e.data["value"]["toolCallId"] for e in dispatch] == [call["toolCallId"]]
    assert all(e.name == event_name(e.data) for e in replayed)
    assert check_events([(e.id, e.data) for e in replayed]) == []


def _events(h: Harness, conversation_id: str) -> list[dict[str, Any]]:
    return [e.data for e in h.call(h.runtime.store.events_after, conversation_id, 0)]
