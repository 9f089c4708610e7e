"""Robustness: strict JSON at every door, no plain-text 500s, honest health.

Each attack is sent for real and checked twice: the documented error, and nothing stored
changed (the conversation's events, messages and snapshot).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import EventSource
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from hostcall.agui import thread_conversation_id
from hostcall.app import create_app
from hostcall.console.accounts import add_user
from hostcall.errors import StoreUnwritable
from hostcall.store.console_records import ConversationQuery
from tests.support.databases import fresh_schema
from tests.support.harness import BOARD, ORIGIN, Conv, Harness, write_agent
from tests.support.loopback import serve_in_thread
from tests.unit.console_client import PASSWORD, ConsoleClient, csrf_of, fast_passwords
from tests.unit.test_bad_input import (
    READ,
    answers_correctly,
    approves_correctly,
    assert_error,
    create_call,
    read_call,
    results_of,
    state,
    tool_messages,
)

JSON = {"Content-Type": "application/json"}
POISON = {
    "NaN": '{"tasks": [], "score": NaN}',
    "Infinity": '{"tasks": [], "score": Infinity}',
    "-Infinity": '{"tasks": [], "score": -Infinity}',
    "1e999": '{"tasks": [], "score": 1e999}',
    "deep": '{"tasks": [], "x": ' + "[" * 965 + "]" * 965 + "}",
    "5000 digits": '{"tasks": [], "n": ' + "9" * 5000 + "}",
}


def with_token(token: str, field: str, value_text: str) -> bytes:
    return f'{{"token": "{token}", "{field}": {value_text}}}'.encode()


@pytest.mark.parametrize("poison", POISON)
def test_poisoned_result_is_refused_and_the_conversation_stays_readable(
    harness: Harness, poison: str
) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    body = with_token(call["resultToken"], "output", POISON[poison])
    r = harness.http.post(f"/api/calls/{call['toolCallId']}/result", content=body, headers=JSON)
    error = assert_error(r, 400, "malformed_json", "JSON")
    assert error["details"]["reason"] in {"non_finite_number", "too_deep", "number_too_large"}
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


@pytest.mark.parametrize("poison", ["NaN", "Infinity", "deep"])
def test_poisoned_edited_input_is_refused(harness: Harness, poison: str) -> None:
    conv, call = create_call(harness)
    before = state(harness, conv)
    text = POISON[poison].replace('"tasks": []', '"title": "x"')
    body = json.dumps({"token": call["decisionToken"], "decision": "approve"})[:-1]
    body += f', "input": {text}}}'
    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/decision", content=body.encode(), headers=JSON
    )
    assert_error(r, 400, "malformed_json")
    assert state(harness, conv) == before
    approves_correctly(harness, conv)


@pytest.mark.parametrize(
    "body",
    [b"[" * 1000 + b"]" * 1000, b"9" * 5000, b'{"a": ' + b"9" * 5000 + b"}", b"[" * 200_000],
)
def test_hostile_body_without_any_token_is_a_400_not_a_500(harness: Harness, body: bytes) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    for url in (
        f"/api/calls/{call['toolCallId']}/result",
        f"/api/calls/{call['toolCallId']}/decision",
        f"/api/calls/{call['toolCallId']}/delivered",
        "/api/agents/planner/conversations",
    ):
        r = harness.http.post(url, content=body, headers={**JSON, "Origin": "http://testserver"})
        assert r.status_code in (400, 413), (url, r.status_code, r.text)
        assert r.json()["error"]["code"] in ("malformed_json", "body_too_large")
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


@pytest.mark.parametrize("code", [["no_handler"], {"a": 1}, 1.5, True])
def test_error_code_that_is_a_list_or_object_is_a_400(harness: Harness, code: Any) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/result",
        json={"token": call["resultToken"], "error": {"code": code, "message": "x"}},
    )
    assert_error(r, 400, "bad_request", "no_handler")
    assert state(harness, conv) == before
    answers_correctly(harness, conv)


@pytest.mark.parametrize("name", ["a" * 300 + ".js", "x" * 5000, "../" * 50 + "etc/passwd"])
def test_static_file_with_a_long_or_odd_name_is_a_json_404(harness: Harness, name: str) -> None:
    r = harness.http.get(f"/static/{name}")
    assert_error(r, 404, "not_found")


def test_json_body_sent_as_text_plain_is_refused(harness: Harness) -> None:
    conv = harness.conversation()
    r = harness.http.post(
        f"/api/conversations/{conv.id}/messages",
        content=b'{"text": "What should I work on next?"}',
        headers={**conv.auth, "Content-Type": "text/plain"},
    )
    assert_error(r, 415, "unsupported_media_type", "application/json")
    assert harness.events(conv) == [] and harness.snapshot(conv)["run"] is None


def test_every_api_response_is_no_store_and_nosniff(harness: Harness) -> None:
    conv = harness.conversation()
    responses = [
        harness.http.post("/api/agents/planner/conversations", headers=ORIGIN),
        harness.http.get(f"/api/conversations/{conv.id}", headers=conv.auth),
        harness.http.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth),
        harness.http.get(f"/api/conversations/{conv.id}"),  # an error too
        harness.http.get("/healthz"),
    ]
    for r in responses:
        assert r.headers["cache-control"] == "no-store", (r.url, r.headers)
        assert r.headers["x-content-type-options"] == "nosniff", (r.url, r.headers)


# ---- data poisoned before this fix: the snapshot and the stream still work ----------------


def test_snapshot_and_stream_survive_non_finite_and_deep_stored_data(harness: Harness) -> None:
    conv, call = read_call(harness)
    harness.answer(call, BOARD)
    harness.settle(conv)
    # Written by an older server (or another writer) that was not strict.
    db = sqlite3.connect(harness.settings.db_path)
    deep = "[" * 965 + "]" * 965
    with db:
        db.execute(
            "UPDATE calls SET outcome = ?, input = ? WHERE id = ?",
            ('{"output": {"tasks": [], "score": NaN}}', deep, call["toolCallId"]),
        )
        db.execute(
            "UPDATE events SET data = ? WHERE conversation_id = ? AND seq = 1",
            ('{"type":"RUN_STARTED","threadId":"x","runId":"r","score":Infinity}', conv.id),
        )
    db.close()
    snap = harness.snapshot(conv)  # 200, strict JSON
    shown = next(c for c in snap["calls"] if c["toolCallId"] == call["toolCallId"])
    assert shown["outcome"]["output"] == {"tasks": [], "score": None}
    assert shown["input"] is None  # too deep to read back: shown as null, not a 500
    with harness.http.stream(
        "GET", f"/api/conversations/{conv.id}/events", params={"token": conv.stream}
    ) as r:
        first = next(EventSource(r).iter_sse()).json()
    assert first == {
        "type": "RUN_STARTED",
        "threadId": "x",
        "runId": "r",
        "score": None,
    }


# ---- upstreams and models writing non-strict JSON ------------------------------------------


@pytest.fixture(scope="module")
def nan_upstream() -> Iterator[int]:
    async def nan(request: Request) -> Response:
        return Response('{"value": NaN}', media_type="application/json")

    with serve_in_thread(Starlette(routes=[Route("/nan", nan)])) as port:
        yield port


def test_http_tool_whose_upstream_returns_nan_gets_a_typed_tool_error(
    tmp_path: Path, nan_upstream: int
) -> None:
    directory = tmp_path / "agents"
    write_agent(
        directory,
        {"environments": {"dev": {"allowed_hosts": [f"127.0.0.1:{nan_upstream}"]}}},
        name="_platform.json",
    )
    write_agent(
        directory,
        {
            "id": "ops",
            "environment": "dev",
            "model": {
                "kind": "scripted",
                "rules": [
                    {
                        "match": "go",
                        "tool": "fetch",
                        "arguments": {},
                        "reply": "ok",
                        "error_reply": "error {{ error.code }}",
                    }
                ],
            },
            "tools": [
                {
                    "name": "fetch",
                    "kind": "http",
                    "description": "Fetches.",
                    "effect": "read",
                    "request": {"method": "GET", "url": f"http://127.0.0.1:{nan_upstream}/nan"},
                    "deadline_seconds": 2,
                }
            ],
        },
    )
    h = Harness(tmp_path, directory)
    try:
        conv = h.conversation("ops")
        h.say(conv, "go")
        for _ in range(200):
            snap = h.snapshot(conv)
            if snap["run"]["status"] == "finished":
                break
            __import__("time").sleep(0.02)
        outcome = snap["calls"][0]["outcome"]
        assert outcome["error"]["code"] == "block_failed"
        # Why is the model's (and the console's); the visitor reads a sentence.
        assert "strict JSON" in h.model_error(snap["calls"][0])["message"]
        assert h.assistant_texts(conv)[-1] == "error block_failed"
        for _, data in h.events(conv):
            json.loads(json.dumps(data, allow_nan=False))  # nothing non-finite was stored
    finally:
        h.stop()


# ---- health ---------------------------------------------------------------------------------


def test_healthz_reports_a_database_that_cannot_be_written(harness: Harness) -> None:
    assert harness.http.get("/healthz").status_code == 200
    store = harness.runtime.store
    store._db.execute("PRAGMA busy_timeout=50")  # fail fast instead of waiting 5 s
    other = sqlite3.connect(harness.settings.db_path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another writer holds the database
    try:
        assert_error(harness.http.get("/healthz"), 503, "store_unavailable", "cannot be written")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert harness.http.get("/healthz").status_code == 200


def test_server_refuses_to_start_on_a_read_only_database(harness: Harness) -> None:
    harness.stop()
    path = harness.settings.db_path
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with path.open("r+b") as f:  # the header's write version: above 2 means read-only
        f.seek(18)
        f.write(b"\x03")
    with pytest.raises(StoreUnwritable) as caught:
        create_app(harness.settings)
    assert str(path) in str(caught.value) and "readonly" in str(caught.value)


def test_cli_says_why_it_will_not_start_on_a_read_only_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hostcall.cli import main

    path = tmp_path / "ro.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    with path.open("r+b") as f:
        f.seek(18)
        f.write(b"\x03")
    assert main(["serve", "--db", str(path), "--port", "1"]) == 1
    err = capsys.readouterr().err
    assert "cannot be written" in err and str(path) in err


# ---- NUL and lone surrogates: refused at every door, on both stores ------------------------
#
# PostgreSQL cannot hold a NUL in text, and a lone surrogate is no UTF-8 at all: both used to
# reach the store and answer 500 (and leave an AG-UI thread answering 409). Every door that
# takes text refuses them with 400 invalid_text, before anything is stored.

# As JSON escapes (valid JSON, but not storable text) and as percent-encoded URL bytes.
JSON_BAD = {"nul": "\\u0000", "surrogate": "\\ud800"}
URL_BAD = {"nul": "%00", "surrogate": "%ED%A0%80"}
JSON_REASON = {"nul": "nul", "surrogate": "lone_surrogate"}
URL_REASON = {"nul": "nul", "surrogate": "not_utf8"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
AGUI_TOOLS = [{"name": "read_board_tasks", "description": "", "parameters": {}}]


@pytest.fixture(params=["sqlite", "postgres"])
def h(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    """The app on a SQLite file, or on a fresh PostgreSQL schema."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        harness = Harness(tmp_path, agents_dir, **({"database_url": url} if url else {}))
        stack.callback(harness.stop)
        yield harness


def with_bad(body: dict[str, Any], bad: str) -> bytes:
    """``body`` as JSON, with each ``@BAD@`` in its strings replaced by the escape ``bad``."""
    return json.dumps(body).replace("@BAD@", JSON_BAD[bad]).encode()


def assert_unstorable(r: Any, reason: str, field: str | None = None) -> None:
    error = assert_error(r, 400, "invalid_text", "cannot be stored")
    assert error["details"]["reason"] == reason, error
    if field is not None:
        assert error["details"]["field"] == field, error


def conversations(h: Harness) -> list[str]:
    found = h.call(h.runtime.store.list_conversations, ConversationQuery(limit=10_000))
    return [s.conversation.id for s in found]


@pytest.mark.parametrize("bad", JSON_BAD)
def test_a_message_with_unstorable_text_is_refused(h: Harness, bad: str) -> None:
    conv = h.conversation()
    before = state(h, conv)
    r = h.http.post(
        f"/api/conversations/{conv.id}/messages",
        content=with_bad({"text": "What should I work on next? @BAD@"}, bad),
        headers={**JSON, **conv.auth},
    )
    assert_unstorable(r, JSON_REASON[bad], "text")
    assert state(h, conv) == before
    h.say(conv, READ)  # the conversation goes on
    assert h.open_call(conv, "dispatched")["toolCallName"] == "read_board_tasks"


@pytest.mark.parametrize("bad", JSON_BAD)
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"output": {"tasks": [{"id": "t@BAD@", "title": "x", "status": "todo"}]}},
         "output.tasks[0].id"),
        ({"output": {"tasks": [], "@BAD@": 1}}, "output"),
        ({"error": {"code": "client_error", "message": "broke @BAD@"}}, "error.message"),
    ],
)  # fmt: skip
def test_a_call_result_with_unstorable_text_is_refused(
    h: Harness, bad: str, body: dict[str, Any], field: str
) -> None:
    conv, call = read_call(h)
    before = state(h, conv)
    r = h.http.post(
        f"/api/calls/{call['toolCallId']}/result",
        content=with_bad({"token": call["resultToken"], **body}, bad),
        headers=JSON,
    )
    assert_unstorable(r, JSON_REASON[bad], field)
    assert state(h, conv) == before
    answers_once(h, conv)


@pytest.mark.parametrize("bad", JSON_BAD)
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "reject", "reason": "no @BAD@"}, "reason"),
        ({"decision": "approve", "input": {"title": "Review @BAD@"}}, "input.title"),
    ],
)
def test_a_decision_with_unstorable_text_is_refused(
    h: Harness, bad: str, body: dict[str, Any], field: str
) -> None:
    conv, call = create_call(h)
    before = state(h, conv)
    r = h.http.post(
        f"/api/calls/{call['toolCallId']}/decision",
        content=with_bad({"token": call["decisionToken"], **body}, bad),
        headers=JSON,
    )
    assert_unstorable(r, JSON_REASON[bad], field)
    assert state(h, conv) == before
    approves_correctly(h, conv)


@pytest.mark.parametrize("bad", JSON_BAD)
def test_other_visitor_bodies_with_unstorable_text_are_refused(h: Harness, bad: str) -> None:
    conv, call = read_call(h)
    before, known = state(h, conv), conversations(h)
    sent = [
        (f"/api/calls/{call['toolCallId']}/delivered", {"token": "@BAD@"}, "token"),
        (f"/api/conversations/{conv.id}/capabilities",
         {"tools": ["read_board_tasks", "x@BAD@"]}, "tools[1]"),
        ("/api/agents/planner/conversations", {"locale": "en", "parentOrigin": "@BAD@"},
         "parentOrigin"),
        ("/api/agents/planner/session", {"parentOrigin": "http://x@BAD@"}, "parentOrigin"),
    ]  # fmt: skip
    for url, body, field in sent:
        r = h.http.post(url, content=with_bad(body, bad), headers={**JSON, **ORIGIN, **conv.auth})
        assert_unstorable(r, JSON_REASON[bad], field)
    assert state(h, conv) == before
    assert conversations(h) == known
    answers_once(h, conv)


def answers_once(h: Harness, conv: Conv) -> None:
    """The open call still takes a good answer, once, and the run goes on."""
    call = h.open_call(conv, "dispatched")
    r = h.answer(call, BOARD)
    assert r.status_code == 200 and r.json() == {"state": "answered"}, r.text
    assert h.finish(conv)["run"]["status"] == "finished"
    assert len(results_of(h, conv, call["toolCallId"])) == 1


# ---- the AG-UI endpoint (no token needed)


def agui_body(thread: str, messages: list[dict[str, Any]], run: str = "r1") -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "messages": messages, "tools": AGUI_TOOLS}


def sse_events(r: Any) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]


def thread_state(h: Harness, cid: str) -> tuple[Any, ...]:
    store = h.runtime.store
    return (
        [(e.seq, e.name, e.data) for e in h.call(store.events_after, cid, 0)],
        h.call(store.list_messages, cid),
        [(c.id, c.state, c.outcome) for c in h.call(store.list_calls, cid)],
        [(r.id, r.status) for r in h.call(store.list_runs, cid)],
    )


USER = {"id": "m1", "role": "user", "content": READ}


@pytest.mark.parametrize("bad", JSON_BAD)
@pytest.mark.parametrize(
    ("body", "field"),
    [
        (agui_body("t-1", [{**USER, "content": "What should I work on next? @BAD@"}]),
         "messages[0].content"),
        (agui_body("t-1", [{**USER, "content": [{"type": "text", "text": "@BAD@"}]}]),
         "messages[0].content[0].text"),
        (agui_body("t-1@BAD@", [USER]), "threadId"),
        (agui_body("t-1", [USER], run="r@BAD@"), "runId"),
        (agui_body("t-1", [{**USER, "id": "m@BAD@"}]), "messages[0].id"),
        ({**agui_body("t-1", [USER]), "state": {"k": "@BAD@"}}, "state.k"),
    ],
)  # fmt: skip
def test_an_agui_run_with_unstorable_text_is_refused_and_starts_nothing(
    h: Harness, bad: str, body: dict[str, Any], field: str
) -> None:
    known = conversations(h)
    r = h.http.post("/agui/planner", content=with_bad(body, bad), headers=JSON)
    assert_unstorable(r, JSON_REASON[bad], field)
    assert conversations(h) == known
    # The thread starts normally afterwards.
    events = sse_events(h.http.post("/agui/planner", json=agui_body("t-1", [USER])))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in [e["type"] for e in events]


@pytest.mark.parametrize("bad", JSON_BAD)
@pytest.mark.parametrize("where", ["content", "inner", "error"])
def test_an_agui_tool_result_with_unstorable_text_fails_its_call_and_the_thread_goes_on(
    h: Harness, bad: str, where: str
) -> None:
    # A client whose tool answered with text no store can hold: refusing its request left
    # the call delivered, and the thread answered 409 run_in_progress until the deadline,
    # since the client sends the same history again with its next message.
    first = sse_events(h.http.post("/agui/planner", json=agui_body("t-2", [USER])))
    call_id = next(e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START")
    cid = thread_conversation_id("planner", "t-2")
    assistant = {
        "id": "m2",
        "role": "assistant",
        "content": "",
        "toolCalls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "read_board_tasks", "arguments": "{}"},
            }
        ],
    }
    # The escape in the message itself, in the JSON text the message carries, or in the
    # error the client reports.
    inner = json.dumps({**BOARD, "note": "@BAD@"}).replace("@BAD@", JSON_BAD[bad])
    tool, field = {
        "content": ({"content": json.dumps(BOARD)[:-1] + ', "note": "@BAD@"}'},
                    "messages[2].content"),
        "inner": ({"content": inner}, "messages[2].content.note"),
        "error": ({"content": "", "error": "broke @BAD@"}, "messages[2].error"),
    }[where]  # fmt: skip
    history: list[dict[str, Any]] = [
        USER,
        assistant,
        {"id": "m3", "role": "tool", "toolCallId": call_id, **tool},
    ]
    r = h.http.post("/agui/planner", content=with_bad(agui_body("t-2", history, "r2"), bad),
                    headers=JSON)  # fmt: skip
    assert sse_events(r)[-1] == {
        "type": "RUN_FINISHED",
        "threadId": "t-2",
        "runId": "r2",
        "outcome": {"type": "success"},
    }
    # The call failed, and the model was told why: once, as a client error.
    calls = h.call(h.runtime.store.list_calls, cid)
    assert [(c.id, c.state.value) for c in calls] == [(call_id, "failed")]
    thread = Conv(cid, "", "")
    results = results_of(h, thread, call_id)
    assert [r["outcome"]["error"]["code"] for r in results] == ["client_error"], results
    [read] = tool_messages(h, thread, call_id)
    said = {"nul": "a NUL character", "surrogate": "a lone UTF-16 surrogate"}[bad]
    assert read["error"]["code"] == "client_error", read
    assert f"holds {said} (in {field}), which cannot be stored" in read["error"]["message"]
    # The next message, with the same history before it, starts a run at once: no 409.
    again = [*history, {"id": "m4", "role": "user", "content": READ}]
    r = h.http.post("/agui/planner", content=with_bad(agui_body("t-2", again, "r3"), bad),
                    headers=JSON)  # fmt: skip
    events = sse_events(r)
    # The model asks again: the run ends with that call the client's to answer.
    asked = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    assert len(asked) == 1, events
    assert events[-1] == {
        "type": "RUN_FINISHED",
        "threadId": "t-2",
        "runId": "r3",
        "outcome": {"type": "success", "pendingToolCallIds": asked},
    }
    # Nothing was lost: both visitor messages are in the thread, each run ended.
    said_by_user = [m for m in h.call(h.runtime.store.list_messages, cid) if m.role == "user"]
    assert [m.text for m in said_by_user] == [READ, READ]
    assert len(h.call(h.runtime.store.list_runs, cid)) == 2
    assert len(results_of(h, thread, call_id)) == 1


# ---- the console: its sign-in form, its filters, its JSON


def browser(h: Harness) -> TestClient:
    client = TestClient(h.app, follow_redirects=False)
    client.portal = h.app.state.test_portal
    return client


def audit_log(h: Harness) -> list[tuple[str, str]]:
    return [(e.actor, e.action) for e in h.call(h.runtime.store.list_audit, limit=10_000)]


@pytest.mark.usefixtures(fast_passwords.__name__)
@pytest.mark.parametrize("bad", URL_BAD)
def test_a_sign_in_name_with_unstorable_text_is_refused_and_not_audited(
    h: Harness, bad: str
) -> None:
    h.call(add_user, h.runtime.store, "ada", "admin", PASSWORD)
    before = audit_log(h)
    client = browser(h)
    csrf = csrf_of(client.get("/console/login").text)
    for name in (f"ada{URL_BAD[bad]}", f"ada&{URL_BAD[bad]}=x"):  # in a value, in a field name
        r = client.post(
            "/console/login",
            content=f"csrf={csrf}&name={name}&password=wrong".encode(),
            headers=FORM,
        )
        assert_unstorable(r, URL_REASON[bad])
    assert audit_log(h) == before
    good = f"csrf={csrf}&name=ada&password={PASSWORD.replace(' ', '+')}"
    r = client.post("/console/login", content=good.encode(), headers=FORM)
    assert r.status_code == 303, r.text  # signing in still works


@pytest.mark.usefixtures(fast_passwords.__name__)
@pytest.mark.parametrize("bad", URL_BAD)
def test_console_filters_and_answers_with_unstorable_text_are_refused(h: Harness, bad: str) -> None:
    conv, call = read_call(h)
    admin = ConsoleClient(h.app, h.runtime, "ada", "admin")
    before, log = state(h, conv), audit_log(h)
    for url in (f"/console/api/conversations?agent={URL_BAD[bad]}",
                f"/console/api/conversations?q=x{URL_BAD[bad]}",
                f"/console/conversations?q={URL_BAD[bad]}",
                f"/console/audit?before=1{URL_BAD[bad]}"):  # fmt: skip
        assert_unstorable(admin.http.get(url), URL_REASON[bad])
    r = admin.http.post(
        f"/console/api/calls/{call['toolCallId']}/answer",
        content=with_bad({"output": {"tasks": [{"id": "@BAD@"}]}}, bad),
        headers={**JSON, "X-CSRF-Token": admin.csrf},
    )
    assert_unstorable(r, JSON_REASON[bad], "output.tasks[0].id")
    assert state(h, conv) == before and audit_log(h) == log
    answers_once(h, conv)


# ---- paths, query strings and headers: refused before any route reads them


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Harness, Conv]]:
    """One server for the refusals that reach no route, with one conversation to keep."""
    from hostcall.settings import DEMO_AGENTS

    tmp = tmp_path_factory.mktemp("bytes")
    shutil.copytree(DEMO_AGENTS, tmp / "agents")
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        harness = Harness(tmp, tmp / "agents", **({"database_url": url} if url else {}))
        stack.callback(harness.stop)
        yield harness, harness.conversation()


URLS = [
    ("POST", "/api/calls/k{bad}/result"),
    ("POST", "/api/calls/k{bad}/decision"),
    ("POST", "/api/calls/k{bad}/delivered"),
    ("GET", "/api/conversations/c{bad}"),
    ("GET", "/api/conversations/{conv}/events?token=x{bad}"),
    ("GET", "/api/conversations/{conv}?surface={bad}"),
    ("POST", "/api/conversations/{conv}/surfaces/s{bad}/activity"),
    ("POST", "/api/agents/planner{bad}/conversations"),
    ("POST", "/agui/planner{bad}"),
    ("GET", "/widget/planner{bad}"),
    ("GET", "/widget/planner?lang=fr{bad}"),
    ("GET", "/embed/check?agent=planner&origin={bad}"),
    ("GET", "/console/api/conversations/c{bad}"),
    ("GET", "/console/login?next=/console{bad}"),
]


@pytest.mark.parametrize("bad", URL_BAD)
@pytest.mark.parametrize(("method", "url"), URLS)
def test_a_path_or_query_with_unstorable_text_is_refused(
    shared: tuple[Harness, Conv], method: str, url: str, bad: str
) -> None:
    h, conv = shared
    before, known = state(h, conv), conversations(h)
    body = {"token": "x", "output": {}} if method == "POST" else None
    r = h.http.request(
        method,
        url.format(bad=URL_BAD[bad], conv=conv.id),
        json=body,
        headers={**ORIGIN, **conv.auth},
    )
    assert_unstorable(r, URL_REASON[bad])
    assert state(h, conv) == before and conversations(h) == known


@pytest.mark.parametrize(
    ("header", "value"),
    [("Last-Event-ID", "{conv}:1\0"), ("Authorization", "Bearer x\0"), ("X-Other", "\0")],
)
def test_a_header_with_a_nul_is_refused(
    shared: tuple[Harness, Conv], header: str, value: str
) -> None:
    h, conv = shared
    before = state(h, conv)
    r = h.http.get(
        f"/api/conversations/{conv.id}", headers={**conv.auth, header: value.format(conv=conv.id)}
    )
    assert_unstorable(r, "nul", header.lower())
    assert state(h, conv) == before
