"""Instance management from the console: the list, a conversation, and the
operator's actions, which go through the ledger's own path (first answer wins)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hostcall.notices import run_notice, tool_notice
from tests.support.harness import BOARD, Harness
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)


@pytest.fixture
def operator(harness: Harness) -> ConsoleClient:
    return ConsoleClient(harness.app, harness.runtime, "olga", "operator")


def _audit(harness: Harness) -> list[tuple[str, str, str | None]]:
    entries = harness.call(harness.runtime.store.list_audit)
    return [(e.actor, e.action, e.call_id) for e in reversed(entries) if e.action != "login"]


def test_operator_answers_a_waiting_call_and_the_visitors_second_answer_is_refused(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    r = operator.post(f"/console/api/calls/{call['toolCallId']}/answer", {"output": BOARD})
    assert r.status_code == 200 and r.json() == {"state": "answered"}
    snap = harness.settle(conv)
    assert snap["run"]["status"] == "finished"
    assert "Fix login bug" in harness.assistant_texts(conv)[-1]
    # The visitor's widget still holds its token: its answer is the second one, refused.
    late = harness.answer(call, {"tasks": []})
    assert late.status_code == 409 and late.json()["error"]["code"] == "call_already_settled"
    assert _audit(harness) == [("olga", "call.answer", call["toolCallId"])]
    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    assert detail["calls"][0]["answeredBy"] == {"actor": "olga", "action": "call.answer"}
    assert detail["runs"][0]["status"] == "finished"


def test_an_answer_that_does_not_match_the_output_schema_is_refused_and_the_call_stays_open(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    r = operator.post(f"/console/api/calls/{call['toolCallId']}/answer", {"output": {"x": 1}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_result"
    assert r.json()["error"]["details"]["errors"]
    assert harness.open_call(conv)["state"] == call["state"]
    assert _audit(harness) == []
    r = operator.post(f"/console/api/calls/{call['toolCallId']}/answer", {})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "output"


def test_operator_approves_with_edits_and_the_edited_input_is_dispatched(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "add a task to review the Q3 report before Friday")
    call = harness.open_call(conv, "awaiting_confirmation")
    edited = {**call["input"], "title": "Review the Q4 report"}
    r = operator.post(
        f"/console/api/calls/{call['toolCallId']}/decision",
        {"decision": "approve", "input": edited},
    )
    assert r.status_code == 200 and r.json()["state"] == "dispatched"
    moved = harness.call(harness.runtime.store.get_call, call["toolCallId"])
    assert moved is not None and moved.input == edited
    assert moved.extra["approval"]["edited"] is True
    # The visitor's decision token is for the old state: it cannot decide again.
    assert harness.decide(call, "reject").status_code in (409, 410)
    assert _audit(harness) == [("olga", "call.approve", call["toolCallId"])]


def test_an_edit_that_breaks_the_input_schema_is_refused_and_nothing_changes(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "add a task to plan the offsite")
    call = harness.open_call(conv, "awaiting_confirmation")
    r = operator.post(
        f"/console/api/calls/{call['toolCallId']}/decision",
        {"decision": "approve", "input": {"title": 42}},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_input"
    assert harness.open_call(conv)["state"] == "awaiting_confirmation"
    assert _audit(harness) == []


def test_operator_rejects_and_the_model_reads_that_an_operator_decided(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "add a task to plan the offsite")
    call = harness.open_call(conv, "awaiting_confirmation")
    r = operator.post(
        f"/console/api/calls/{call['toolCallId']}/decision",
        {"decision": "reject", "reason": "duplicate of t1"},
    )
    assert r.status_code == 200 and r.json()["state"] == "rejected"
    harness.settle(conv)
    tool_message = [
        m for m in harness.call(harness.runtime.store.list_messages, conv.id) if m.role == "tool"
    ]
    assert "(an operator decided) duplicate of t1" in tool_message[-1].text
    assert _audit(harness) == [("olga", "call.reject", call["toolCallId"])]


def _tool_message(harness: Harness, call_id: str) -> dict[str, Any]:
    """What the model read for a call: its tool message."""
    messages = harness.call(harness.runtime.store.list_messages, _conversation_of(harness, call_id))
    [message] = [m for m in messages if m.role == "tool" and m.tool_call_id == call_id]
    content: dict[str, Any] = json.loads(message.text)
    return content


def _conversation_of(harness: Harness, call_id: str) -> str:
    call = harness.call(harness.runtime.store.get_call, call_id)
    assert call is not None
    return call.conversation_id


def test_operator_ends_a_stuck_call_with_its_own_code_and_a_second_end_is_refused(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    url = f"/console/api/calls/{call['toolCallId']}/expire"
    assert operator.post(url).json() == {"state": "failed"}
    snap = harness.settle(conv)
    assert snap["run"]["status"] == "finished"
    # Not a timeout, not an approval that expired: the operator ended it, and each reader
    # is told so in their own words.
    [shown] = snap["calls"]
    assert shown["outcome"] == {"error": {"code": "operator_ended",
                                          "message": tool_notice("operator_ended")}}  # fmt: skip
    error = _tool_message(harness, call["toolCallId"])["error"]
    assert error["code"] == "operator_ended" and "operator ended" in error["message"]
    assert "deadline" not in error["message"] and "time" not in error["message"]
    # The operator's console shows the call as the model read it, not the visitor's sentence.
    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    assert detail["calls"][0]["outcome"]["error"] == error
    again = operator.post(url)
    assert again.status_code == 409
    assert harness.answer(call, BOARD).status_code == 409
    assert _audit(harness) == [("olga", "call.expire", call["toolCallId"])]


def test_operator_cancels_a_waiting_run_and_its_calls_say_so(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    run_id = harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    r = operator.post(f"/console/api/runs/{run_id}/cancel")
    assert r.status_code == 200
    snap = harness.snapshot(conv)
    assert snap["run"]["status"] == "failed"
    assert snap["run"]["error"] == {"code": "operator_cancelled",
                                    "message": run_notice("operator_cancelled")}  # fmt: skip
    assert "went wrong" not in snap["run"]["error"]["message"]
    assert snap["calls"][0]["state"] == "failed"
    assert snap["calls"][0]["outcome"]["error"]["code"] == "operator_cancelled"
    error = _tool_message(harness, call["toolCallId"])["error"]
    assert error["code"] == "operator_cancelled" and "operator cancelled" in error["message"]
    assert harness.answer(call, BOARD).status_code == 409
    again = operator.post(f"/console/api/runs/{run_id}/cancel")
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_not_active"
    assert operator.post("/console/api/runs/r_nope/cancel").status_code == 404


def test_unknown_calls_and_bad_decisions_are_clear_errors(
    harness: Harness, operator: ConsoleClient
) -> None:
    assert operator.post("/console/api/calls/k_nope/answer", {"output": {}}).status_code == 404
    conv = harness.conversation()
    harness.say(conv, "add a task to plan the offsite")
    call = harness.open_call(conv, "awaiting_confirmation")
    r = operator.post(f"/console/api/calls/{call['toolCallId']}/decision", {"decision": "maybe"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "decision"
    r = operator.post(f"/console/api/calls/{call['toolCallId']}/answer", {"output": {}})
    assert r.status_code == 409  # waiting for approval: not answerable yet
    assert harness.open_call(conv)["state"] == "awaiting_confirmation"


def test_the_list_filters_pages_and_validates_its_query(
    harness: Harness, operator: ConsoleClient
) -> None:
    waiting = harness.conversation()
    harness.say(waiting, "what should I work on next?")
    harness.open_call(waiting)
    done = harness.conversation()
    harness.say(done, "hello")
    harness.settle(done)

    def ids(query: str) -> list[str]:
        r = operator.http.get(f"/console/api/conversations{query}")
        assert r.status_code == 200, r.text
        return [c["id"] for c in r.json()["items"]]

    assert ids("") == [done.id, waiting.id]
    assert ids("?waiting=1") == [waiting.id]
    assert ids("?status=finished") == [done.id]
    assert ids("?q=LET+ME+LOOK") == [waiting.id]
    assert ids(f"?q={done.id}") == [done.id]
    assert ids("?agent=nobody") == []
    assert ids("?page=2") == []
    for bad in ("?status=sleeping", "?page=0", "?page=x"):
        assert operator.http.get(f"/console/api/conversations{bad}").status_code == 400


def test_operator_approves_for_the_conversation_and_later_calls_run_without_asking(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "add a task to review the Q3 report before Friday")
    call = harness.open_call(conv, "awaiting_confirmation")
    assert call["approval"]["scopes"] == ["once", "conversation"]
    r = operator.post(
        f"/console/api/calls/{call['toolCallId']}/decision",
        {"decision": "approve", "scope": "conversation"},
    )
    assert r.status_code == 200 and r.json()["state"] == "dispatched"
    harness.answer(harness.open_call(conv), {"id": "t9", "title": "Review the Q3 report",
                                             "status": "todo"})  # fmt: skip
    harness.settle(conv)
    harness.say(conv, "add a task to write the release notes")
    later = harness.open_call(conv)
    assert later["toolCallId"] != call["toolCallId"]
    assert later["state"] in ("dispatched", "delivered")  # not asked again: the grant
    assert later["approval"]["reason"] == "grant"
    entries = harness.call(harness.runtime.store.list_audit)
    approve = [e for e in entries if e.action == "call.approve"]
    assert [e.details.get("scope") for e in approve] == ["conversation"]


def test_a_scope_the_call_does_not_offer_is_refused_and_nothing_changes(
    harness: Harness, operator: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "add a task to review the Q3 report before Friday")
    call = harness.open_call(conv, "awaiting_confirmation")
    r = operator.post(
        f"/console/api/calls/{call['toolCallId']}/decision",
        {"decision": "approve", "scope": "forever"},
    )
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "scope"
    assert harness.open_call(conv, "awaiting_confirmation")["toolCallId"] == call["toolCallId"]
    assert _audit(harness) == []
