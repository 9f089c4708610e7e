"""Bad input of every kind: the exact error, and nothing lost or changed by it."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostcall.settings import DEMO_AGENTS
from hostcall.tokens import Claims, Purpose, input_digest
from tests.support.harness import BOARD, ORIGIN, Conv, Harness, planner_definition, write_agent
from tests.support.live import live_server, settings_for

READ = "What should I work on next?"
CREATE = "Add a task to review the Q3 report before Friday"
LIMIT = 256 * 1024


def assert_nothing_to_resume(response: Any) -> None:
    """``POST …/session`` with nothing to resume: ``204``, no body, no cookie set (a first
    visit is no error: docs/protocol.md)."""
    assert response.status_code == 204, response.text
    assert response.content == b"" and "set-cookie" not in response.headers


def assert_error(response: Any, status: int, code: str, *mentions: str) -> dict[str, Any]:
    """The one error shape of docs/protocol.md, with a readable message naming ``mentions``."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"].strip(), error
    for mention in mentions:
        assert mention in error["message"], (mention, error["message"])
    return error


def state(h: Harness, conv: Conv) -> tuple[Any, ...]:
    """Everything a bad request must leave alone: the event log, every message, the snapshot."""
    snap = h.snapshot(conv)
    for call in snap["calls"]:
        for key in ("resultToken", "decisionToken"):
            if key in call:  # signed afresh on every request: keep presence, not the value
                call[key] = "<token>"
    return h.events(conv), h.call(h.runtime.store.list_messages, conv.id), snap


def read_call(h: Harness) -> tuple[Conv, dict[str, Any]]:
    conv = h.conversation()
    h.say(conv, READ)
    return conv, h.open_call(conv, "dispatched")


def create_call(h: Harness) -> tuple[Conv, dict[str, Any]]:
    conv = h.conversation()
    h.say(conv, CREATE)
    return conv, h.open_call(conv, "awaiting_confirmation")


def results_of(h: Harness, conv: Conv, call_id: str) -> list[dict[str, Any]]:
    return [d for t, d in h.events(conv) if t == "TOOL_CALL_RESULT" and d["toolCallId"] == call_id]


def tool_messages(h: Harness, conv: Conv, call_id: str) -> list[Any]:
    """What the model reads for the call, decoded."""
    return [
        json.loads(m.text)
        for m in h.call(h.runtime.store.list_messages, conv.id)
        if m.role == "tool" and m.tool_call_id == call_id
    ]


def answers_correctly(h: Harness, conv: Conv) -> None:
    """The open read_board_tasks call still takes a good answer, and the run finishes."""
    call = h.open_call(conv, "dispatched")
    r = h.answer(call, BOARD)
    assert r.status_code == 200 and r.json() == {"state": "answered"}, r.text
    assert h.settle(conv)["run"]["status"] == "finished"
    assert len(results_of(h, conv, call["toolCallId"])) == 1


def approves_correctly(h: Harness, conv: Conv) -> None:
    call = h.open_call(conv, "awaiting_confirmation")
    r = h.decide(call, "approve")
    assert r.status_code == 200 and r.json() == {"state": "dispatched"}, r.text


def tamper(token: str) -> str:
    """Flip the first character of the signature (the last one may only carry padding bits)."""
    payload, timestamp, signature = token.rsplit(".", 2)
    return f"{payload}.{timestamp}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"


def post_result(h: Harness, call: dict[str, Any], **body: Any) -> Any:
    return h.http.post(f"/api/calls/{call['toolCallId']}/result", json=body)


def post_decision(h: Harness, call: dict[str, Any], **body: Any) -> Any:
    return h.http.post(f"/api/calls/{call['toolCallId']}/decision", json=body)


def short_deadlines(tmp_path: Path) -> Path:
    data = planner_definition()
    tools = {t["name"]: t for t in data["tools"]}
    tools["read_board_tasks"]["deadline_seconds"] = 0.3
    tools["create_task"]["approval_timeout_seconds"] = 0.3
    directory = tmp_path / "short-deadlines"
    shutil.copytree(DEMO_AGENTS, directory)  # with the demo's platform file, if any
    write_agent(directory, data, name="planner.json")
    return directory


# ---- tokens -----------------------------------------------------------------------------


def test_result_token_with_a_tampered_signature_is_refused(harness: Harness) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    r = post_result(harness, call, token=tamper(call["resultToken"]), output=BOARD)
    assert_error(r, 401, "bad_token", "call-result")
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


def test_result_token_with_a_tampered_payload_is_refused(harness: Harness) -> None:
    conv, call = read_call(harness)
    _, other = read_call(harness)
    before = state(harness, conv)
    payload, timestamp, signature = call["resultToken"].rsplit(".", 2)
    other_payload = other["resultToken"].rsplit(".", 2)[0]
    flipped = ("A" if payload[1] != "A" else "B").join((payload[:1], payload[2:]))
    for forged in (
        f"{other_payload}.{timestamp}.{signature}",
        f"{flipped}.{timestamp}.{signature}",
    ):
        assert_error(post_result(harness, call, token=forged, output=BOARD), 401, "bad_token")
        assert_error(post_result(harness, other, token=forged, output=BOARD), 401, "bad_token")
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


def test_expired_call_tokens_are_refused(tmp_path: Path, agents_dir: Path) -> None:
    h = Harness(tmp_path, agents_dir, call_token_max_age=1)
    try:
        conv, call = read_call(h)
        other, decision = create_call(h)
        before = state(h, conv), state(h, other)
        h.clock.advance(2.1)  # itsdangerous ages in whole seconds and expires past max_age
        r = h.answer(call, BOARD)
        assert_error(r, 401, "expired_token", "call-result")
        r = h.decide(decision, "approve")
        assert_error(r, 401, "expired_token", "call-decision")
        assert (state(h, conv), state(h, other)) == before
        answers_correctly(h, conv)  # with the fresh token the snapshot now carries
        approves_correctly(h, other)
    finally:
        h.stop()


def test_expired_session_token_is_refused(tmp_path: Path, agents_dir: Path) -> None:
    h = Harness(tmp_path, agents_dir, session_max_age=1)
    try:
        old = h.conversation()

        def fresh() -> Conv:
            return Conv(old.id, h.runtime.tokens.sign(Purpose.SESSION, Claims(old.id)), old.stream)

        h.say(fresh(), READ)
        h.open_call(fresh())
        before = state(h, fresh())
        h.clock.advance(2.1)
        assert_error(
            h.http.get(f"/api/conversations/{old.id}", headers=old.auth),
            401,
            "expired_token",
            "session",
        )
        assert_error(
            h.http.post(
                f"/api/conversations/{old.id}/messages", json={"text": "hi"}, headers=old.auth
            ),
            401,
            "expired_token",
        )
        assert_error(
            h.http.post(f"/api/conversations/{old.id}/stream-token", headers=old.auth),
            401,
            "expired_token",
        )
        assert state(h, fresh()) == before
        answers_correctly(h, fresh())
    finally:
        h.stop()


def test_result_token_of_another_call_is_refused(harness: Harness) -> None:
    conv, call = read_call(harness)
    other, other_call = read_call(harness)
    before = state(harness, conv), state(harness, other)
    r = post_result(harness, call, token=other_call["resultToken"], output=BOARD)
    assert_error(r, 403, "wrong_token", call["toolCallId"])
    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/delivered", json={"token": other_call["resultToken"]}
    )
    assert_error(r, 403, "wrong_token")
    assert (state(harness, conv), state(harness, other)) == before
    answers_correctly(harness, conv)
    answers_correctly(harness, other)


def test_decision_token_of_another_call_is_refused(harness: Harness) -> None:
    conv, call = create_call(harness)
    other, other_call = create_call(harness)
    before = state(harness, conv), state(harness, other)
    r = post_decision(harness, call, token=other_call["decisionToken"], decision="approve")
    assert_error(r, 403, "wrong_token", call["toolCallId"])
    assert (state(harness, conv), state(harness, other)) == before
    approves_correctly(harness, conv)
    approves_correctly(harness, other)


def test_session_token_of_another_conversation_is_refused(harness: Harness) -> None:
    conv, _ = read_call(harness)
    other = harness.conversation()
    before = state(harness, conv), state(harness, other)
    r = harness.http.get(f"/api/conversations/{other.id}", headers=conv.auth)
    assert_error(r, 403, "wrong_token", other.id)
    r = harness.http.post(
        f"/api/conversations/{other.id}/messages", json={"text": "hello"}, headers=conv.auth
    )
    assert_error(r, 403, "wrong_token", other.id)
    r = harness.http.post(f"/api/conversations/{other.id}/stream-token", headers=conv.auth)
    assert_error(r, 403, "wrong_token", other.id)
    assert (state(harness, conv), state(harness, other)) == before
    assert harness.snapshot(other)["run"] is None
    answers_correctly(harness, conv)


def test_tokens_of_another_purpose_are_refused(harness: Harness) -> None:
    conv, read = read_call(harness)
    other, create = create_call(harness)
    before = state(harness, conv), state(harness, other)
    r = post_result(harness, create, token=create["decisionToken"], output=BOARD)
    assert_error(r, 403, "wrong_token", "call-result")
    r = post_decision(harness, read, token=read["resultToken"], decision="approve")
    assert_error(r, 403, "wrong_token", "call-decision")
    r = post_result(harness, read, token=conv.session, output=BOARD)
    assert_error(r, 403, "wrong_token")
    r = harness.http.get(
        f"/api/conversations/{conv.id}", headers={"Authorization": f"Bearer {conv.stream}"}
    )
    assert_error(r, 403, "wrong_token", "session")
    assert (state(harness, conv), state(harness, other)) == before
    answers_correctly(harness, conv)
    approves_correctly(harness, other)


# ---- settling once ----------------------------------------------------------------------


def test_second_answer_to_an_answered_call_is_refused_and_the_model_got_one_answer(
    harness: Harness,
) -> None:
    conv, call = read_call(harness)
    assert harness.answer(call, BOARD).status_code == 200
    harness.settle(conv)
    before = state(harness, conv)
    r = harness.answer(call, {"tasks": []})
    error = assert_error(r, 409, "call_already_settled", call["toolCallId"])
    assert error["details"] == {"state": "answered"}
    r = post_result(
        harness, call, token=call["resultToken"], error={"code": "client_error", "message": "late"}
    )
    assert_error(r, 409, "call_already_settled")
    assert state(harness, conv) == before
    [result] = results_of(harness, conv, call["toolCallId"])
    assert result["outcome"] == {"output": BOARD}
    assert tool_messages(harness, conv, call["toolCallId"]) == [BOARD]


async def test_exactly_one_of_concurrent_answers_wins(tmp_path: Path) -> None:
    with live_server(settings_for(tmp_path)) as server:
        conv = server.conversation()
        server.say(conv, READ)
        call = server.settle(conv)["calls"][-1]
        url = f"/api/calls/{call['toolCallId']}/result"
        outputs = [
            {"tasks": [{"id": f"t{i}", "title": f"answer {i}", "status": "todo"}]}
            for i in range(10)
        ]
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            responses = await asyncio.gather(
                *(
                    client.post(url, json={"token": call["resultToken"], "output": output})
                    for output in outputs
                )
            )
        statuses = [r.status_code for r in responses]
        assert sorted(statuses) == [200] + [409] * 9, statuses
        for r in responses:
            if r.status_code == 409:
                assert r.json()["error"]["code"] == "call_already_settled"
        winner = outputs[statuses.index(200)]
        assert server.settle(conv)["run"]["status"] == "finished"
        store = server.app.state.hostcall.store
        events = await store.events_after(conv.id, 0)
        results = [e.data for e in events if e.name == "TOOL_CALL_RESULT"]
        assert [r["outcome"] for r in results] == [{"output": winner}]
        messages = await store.list_messages(conv.id)
        assert [json.loads(m.text) for m in messages if m.role == "tool"] == [winner]


def test_answer_after_the_deadline_is_gone_and_the_model_got_timeout(tmp_path: Path) -> None:
    h = Harness(tmp_path, short_deadlines(tmp_path))
    try:
        conv, call = read_call(h)
        h.clock.advance(0.4)
        r = h.answer(call, BOARD)
        assert_error(r, 410, "call_expired", call["toolCallId"])
        snap = h.settle(conv)
        assert snap["run"]["status"] == "finished"
        [result] = results_of(h, conv, call["toolCallId"])
        assert result["state"] == "expired"
        assert result["outcome"]["error"]["code"] == "timeout"
        assert json.loads(result["content"])["error"]["code"] == "timeout"
        assert h.assistant_texts(conv)[-1].startswith("I couldn't read your board just now")
        assert_error(h.answer(call, BOARD), 410, "call_expired")  # and stays gone
        assert len(results_of(h, conv, call["toolCallId"])) == 1
    finally:
        h.stop()


def test_decision_after_the_approval_timeout_is_gone_and_the_call_never_ran(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, short_deadlines(tmp_path))
    try:
        conv, call = create_call(h)
        h.clock.advance(0.4)
        r = h.decide(call, "approve")
        assert_error(r, 410, "call_expired", call["toolCallId"])
        snap = h.settle(conv)
        assert snap["run"]["status"] == "finished"
        [result] = results_of(h, conv, call["toolCallId"])
        assert result["state"] == "expired"
        assert result["outcome"]["error"]["code"] == "approval_expired"
        dispatched = [
            d
            for t, d in h.events(conv)
            if t == "hostcall.tool_call_dispatch" and d["toolCallId"] == call["toolCallId"]
        ]
        assert dispatched == []
        assert "Nobody confirmed the task in time" in h.assistant_texts(conv)[-1]
        assert_error(h.decide(call, "reject"), 410, "call_expired")
    finally:
        h.stop()


# ---- schemas ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "path"),
    [
        ({"tasks": [{"id": "t1", "title": 7}]}, "/tasks/0/title"),
        ({"tasks": "none"}, "/tasks"),
        ({"items": []}, "/tasks"),  # the missing property itself
        ([], "/"),
    ],
)
def test_result_violating_the_output_schema_is_refused_and_the_call_stays_open(
    harness: Harness, output: Any, path: str
) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    error = assert_error(harness.answer(call, output), 422, "invalid_result", "read_board_tasks")
    errors = error["details"]["errors"]
    assert [e["path"] for e in errors] == [path]
    assert all(isinstance(e["message"], str) and e["message"] for e in errors)
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


@pytest.mark.parametrize(
    ("edited", "path", "words"),
    [
        ({"title": ""}, "/title", "non-empty"),
        ({"description": "no title"}, "/title", "'title' is a required property"),
        ({"title": 42}, "/title", "not of type 'string'"),
    ],
)
def test_edited_input_violating_the_input_schema_is_refused_and_the_call_still_awaits(
    harness: Harness, edited: dict[str, Any], path: str, words: str
) -> None:
    conv, call = create_call(harness)
    before = state(harness, conv)
    error = assert_error(
        harness.decide(call, "approve", input=edited), 422, "invalid_input", "create_task"
    )
    [problem] = error["details"]["errors"]
    assert problem["path"] == path and words in problem["message"]
    assert state(harness, conv) == before
    assert harness.open_call(conv)["state"] == "awaiting_confirmation"
    approves_correctly(harness, conv)


# ---- unknown things ---------------------------------------------------------------------


def test_session_token_for_a_conversation_that_does_not_exist_is_not_found(
    harness: Harness,
) -> None:
    token = harness.runtime.tokens.sign(Purpose.SESSION, Claims("c_doesnotexist"))
    auth = {"Authorization": f"Bearer {token}"}
    r = harness.http.get("/api/conversations/c_doesnotexist", headers=auth)
    assert_error(r, 404, "unknown_conversation", "c_doesnotexist")
    r = harness.http.post(
        "/api/conversations/c_doesnotexist/messages", json={"text": "hi"}, headers=auth
    )
    assert_error(r, 404, "unknown_conversation", "c_doesnotexist")
    assert harness.call(harness.runtime.store.get_conversation, "c_doesnotexist") is None


def test_result_token_for_a_call_that_does_not_exist_is_not_found(harness: Harness) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    token = harness.runtime.tokens.sign(
        Purpose.CALL_RESULT,
        Claims(conv.id, "k_doesnotexist", "read_board_tasks", input_digest(call["input"])),
    )
    r = harness.http.post(
        "/api/calls/k_doesnotexist/result", json={"token": token, "output": BOARD}
    )
    assert_error(r, 404, "unknown_call", "k_doesnotexist")
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


def test_unknown_agent_is_not_found(harness: Harness) -> None:
    r = harness.http.post("/api/agents/nope/conversations")
    assert_error(r, 404, "unknown_agent", "nope")


# ---- malformed bodies -------------------------------------------------------------------


@dataclass
class Target:
    conv: Conv
    url: str
    headers: dict[str, str]
    still_works: Any


def target(h: Harness, endpoint: str) -> Target:
    if endpoint == "messages":
        conv = h.conversation()

        def starts_a_run() -> None:
            assert h.snapshot(conv)["run"] is None
            h.say(conv, "hello")
            assert h.settle(conv)["run"]["status"] == "finished"

        return Target(conv, f"/api/conversations/{conv.id}/messages", conv.auth, starts_a_run)
    if endpoint == "result":
        conv, call = read_call(h)
        return Target(
            conv, f"/api/calls/{call['toolCallId']}/result", {}, lambda: answers_correctly(h, conv)
        )
    conv, call = create_call(h)
    return Target(
        conv, f"/api/calls/{call['toolCallId']}/{endpoint}", {}, lambda: approves_correctly(h, conv)
    )


ENDPOINTS = ["messages", "result", "decision"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe{}"])
def test_malformed_json_is_refused(harness: Harness, endpoint: str, body: bytes) -> None:
    t = target(harness, endpoint)
    before = state(harness, t.conv)
    r = harness.http.post(
        t.url, content=body, headers={**t.headers, "Content-Type": "application/json"}
    )
    assert_error(r, 400, "malformed_json", "JSON")
    assert state(harness, t.conv) == before
    t.still_works()


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("body", [[{"text": "hi"}], "hi", None])
def test_json_that_is_not_an_object_is_refused(harness: Harness, endpoint: str, body: Any) -> None:
    t = target(harness, endpoint)
    before = state(harness, t.conv)
    headers = {**t.headers, "Content-Type": "application/json"}
    r = harness.http.post(t.url, content=json.dumps(body).encode(), headers=headers)
    assert_error(r, 400, "malformed_json", "object")
    assert state(harness, t.conv) == before
    t.still_works()


@pytest.mark.parametrize("endpoint", ["result", "delivered", "decision"])
def test_missing_token_field_is_refused(harness: Harness, endpoint: str) -> None:
    t = target(harness, "decision" if endpoint == "decision" else "result")
    url = t.url.rsplit("/", 1)[0] + f"/{endpoint}"
    before = state(harness, t.conv)
    body = {"output": BOARD} if endpoint == "result" else {"decision": "approve"}
    for sent in (body, {**body, "token": ""}):
        assert_error(harness.http.post(url, json=sent), 401, "missing_token")
    assert state(harness, t.conv) == before
    t.still_works()


@pytest.mark.parametrize(
    "body",
    [
        {"output": BOARD, "error": {"code": "client_error", "message": "both"}},
        {},
        {"outcome": BOARD},
    ],
)
def test_result_with_both_output_and_error_or_neither_is_refused(
    harness: Harness, body: dict[str, Any]
) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    r = post_result(harness, call, token=call["resultToken"], **body)
    assert_error(r, 400, "bad_request", "'output'", "'error'")
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


@pytest.mark.parametrize("code", ["timeout", "approval_rejected", "oops", None, 7])
def test_result_error_code_outside_the_surface_set_is_refused(harness: Harness, code: Any) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    r = post_result(
        harness, call, token=call["resultToken"], error={"code": code, "message": "board offline"}
    )
    error = assert_error(r, 400, "bad_request", repr(code), "'client_error', 'no_handler'")
    assert "ToolErrorCode" not in error["message"] and "<" not in error["message"]
    assert error["details"] == {"field": "error.code"}
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


@pytest.mark.parametrize("decision", ["maybe", "APPROVE", "", None, True])
def test_decision_other_than_approve_or_reject_is_refused(harness: Harness, decision: Any) -> None:
    conv, call = create_call(harness)
    before = state(harness, conv)
    body: dict[str, Any] = {"token": call["decisionToken"]}
    if decision is not None:
        body["decision"] = decision
    r = harness.http.post(f"/api/calls/{call['toolCallId']}/decision", json=body)
    assert_error(r, 400, "bad_request", "'decision'", "approve", "reject")
    assert state(harness, conv) == before
    approves_correctly(harness, conv)


# ---- size -------------------------------------------------------------------------------


def oversized_result(call: dict[str, Any]) -> bytes:
    body = json.dumps(
        {"token": call["resultToken"], "output": {"tasks": [], "notes": "x" * (LIMIT + 1)}}
    ).encode()
    assert len(body) > LIMIT
    return body


def test_oversized_body_with_content_length_is_refused(harness: Harness) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    body = oversized_result(call)
    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/result",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert r.request.headers["content-length"] == str(len(body))
    assert_error(r, 413, "body_too_large", str(LIMIT))
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


def test_oversized_streamed_body_without_content_length_is_refused(harness: Harness) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    body = oversized_result(call)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 16 * 1024):
            yield body[start : start + 16 * 1024]

    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/result",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert "content-length" not in r.request.headers
    assert_error(r, 413, "body_too_large", str(LIMIT))
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


def test_oversized_message_body_is_refused_and_no_run_starts(harness: Harness) -> None:
    conv = harness.conversation()
    body = json.dumps({"text": "x" * (LIMIT + 1)}).encode()
    r = harness.http.post(f"/api/conversations/{conv.id}/messages", content=body, headers=conv.auth)
    assert_error(r, 413, "body_too_large")
    assert harness.events(conv) == [] and harness.snapshot(conv)["run"] is None


# ---- messages ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [{"text": ""}, {"text": "   \n\t"}, {}, {"text": 5}, {"text": ["hi"]}]
)
def test_empty_message_is_refused_and_no_run_starts(harness: Harness, body: dict[str, Any]) -> None:
    conv = harness.conversation()
    r = harness.http.post(f"/api/conversations/{conv.id}/messages", json=body, headers=conv.auth)
    assert_error(r, 422, "invalid_message", "'text'")
    assert (
        harness.events(conv) == []
        and harness.call(harness.runtime.store.list_messages, conv.id) == []
    )
    assert harness.snapshot(conv)["run"] is None


def test_too_long_message_is_refused_and_no_run_starts(harness: Harness) -> None:
    conv = harness.conversation()
    r = harness.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": "x" * 8001}, headers=conv.auth
    )
    assert_error(r, 422, "invalid_message", "8001", "8000")
    assert harness.events(conv) == [] and harness.snapshot(conv)["run"] is None
    harness.say(conv, "x" * 8000)  # the limit itself is allowed
    assert harness.settle(conv)["run"]["status"] == "finished"


def test_message_while_a_run_waits_is_refused(harness: Harness) -> None:
    conv, _ = read_call(harness)
    before = state(harness, conv)
    r = harness.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": "hello"}, headers=conv.auth
    )
    error = assert_error(r, 409, "run_in_progress", "waiting")
    assert error["details"]["runId"] == before[2]["run"]["runId"]
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


def test_an_answer_from_an_origin_the_agent_does_not_allow_is_refused_every_time(
    harness: Harness,
) -> None:
    """The Origin check of a call's answer refuses again once the conversation's
    agent is remembered (the check reads no conversation the second time)."""
    conv, call = read_call(harness)
    before = state(harness, conv)
    body = {"token": call["resultToken"], "output": BOARD}
    for _ in range(2):
        r = harness.http.post(
            f"/api/calls/{call['toolCallId']}/result", json=body,
            headers={"Origin": "https://shop.test"},
        )  # fmt: skip
        assert_error(r, 403, "origin_not_allowed", "https://shop.test")
    assert state(harness, conv) == before
    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/result", json=body, headers=ORIGIN
    )  # the widget's own origin
    assert r.status_code == 200, r.text
    assert harness.settle(conv)["run"]["status"] == "finished"
