"""Robustness: strict JSON at every door, no plain-text 500s, honest health.

Each attack is sent for real and checked twice: the documented error, and nothing stored
changed (the conversation's events, messages and snapshot).
"""

from __future__ import annotations

import json
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

from hostcall.app import create_app
from hostcall.errors import StoreUnwritable
from tests.support.harness import BOARD, ORIGIN, Harness, write_agent
from tests.support.loopback import serve_in_thread
from tests.unit.test_bad_input import (
    answers_correctly,
    approves_correctly,
    assert_error,
    create_call,
    read_call,
    state,
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
        assert "strict JSON" in outcome["error"]["message"]
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
