"""POST /agui/{agentId}, driven by the real ``@ag-ui/client`` HttpAgent in node.

The client runs the client-side tools it declares and sends their results in its next run;
server-side tools, guardrails and every other policy run on the server.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hostcall.agui import thread_conversation_id
from hostcall.settings import Settings
from tests.agui import check_events, run_node
from tests.support.harness import BOARD, SECRET, write_agent
from tests.support.live import Live, live_server
from tests.support.loopback import Live as Target
from tests.support.loopback import live_server as target_server

OBJECT = {"type": "object"}
BOARD_SCHEMA = {
    "type": "object",
    "properties": {"tasks": {"type": "array"}},
    "required": ["tasks"],
}
READ_BOARD = {
    "name": "read_board",
    "description": "Reads the page's task board.",
    "input_schema": OBJECT,
    "output_schema": BOARD_SCHEMA,
    "effect": "read",
}
CREATE = {
    "name": "create",
    "description": "Creates a task.",
    "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}},
    "output_schema": OBJECT,
    "approval": "never",
    "guardrails": [{"name": "no secrets", "on": "input", "action": "block",
                    "when": {"path": "/title", "op": "contains", "value": "secret"}}],
}  # fmt: skip
DECLARED = [{"name": "read_board", "description": "", "parameters": OBJECT},
            {"name": "create", "description": "", "parameters": OBJECT}]  # fmt: skip


def _agent(target: Target) -> dict[str, Any]:
    fetch = {
        "name": "fetch", "kind": "http", "description": "Fetches a path.", "effect": "read",
        "ai_params": [{"key": "what", "type": "string", "required": True}],
        "request": {"method": "GET", "url": f"{target.base}/echo/{{{{ $fromAI.what }}}}"},
        "deadline_seconds": 3,
    }  # fmt: skip
    rule = {"reply": "result {{ result | tojson }}", "error_reply": "error {{ error.code }}"}
    return {
        "id": "helper",
        "environment": "dev",
        "model": {"kind": "scripted", "fallback": "nothing", "rules": [
            {"match": "next", "tool": "read_board", "arguments": {}, **rule,
             "reply": "{{ result.tasks | length }} tasks, first {{ result.tasks[0].title }}"},
            {"match": "fetch (?P<what>\\w+)", "tool": "fetch", "arguments": {"what": "{{ what }}"},
             **rule, "reply": "fetched {{ result.body.path }}"},
            {"match": "create (?P<t>.+)", "tool": "create", "arguments": {"title": "{{ t }}"},
             **rule},
            {"match": "think", "reasoning": "The board first, then the days.",
             "reply": "thought it through"},
        ]},
        "tools": [READ_BOARD, CREATE, fetch],
    }  # fmt: skip


def _chat(agent_id: str, limits: dict[str, int]) -> dict[str, Any]:
    return {
        "id": agent_id,
        "environment": "dev",
        "model": {"kind": "scripted", "fallback": "nothing",
                  "rules": [{"match": "hi", "reply": "hello there"}]},
        "tools": [],
        "limits": limits,
    }  # fmt: skip


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with target_server() as live:
        yield live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, target: Target) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("agui")
    agents = tmp / "agents"
    write_agent(agents, {"environments": {"dev": {"allowed_hosts": [target.host]}}},
                name="_platform.json")  # fmt: skip
    write_agent(agents, _agent(target))
    # The widget's limits, small: three conversations a minute from one address; a token
    # budget a single step spends (the per-conversation one off: the agent's is tested).
    write_agent(agents, _chat("few", {"conversations_per_minute_per_client": 3}))
    write_agent(agents, _chat("thrifty", {"model_tokens_per_day": 1,
                                          "model_tokens_per_conversation": 0}))  # fmt: skip
    # A server-side call that takes its time keeps the AG-UI stream open.
    wait = {
        "name": "wait", "kind": "http", "description": "Waits.", "effect": "read",
        "request": {"method": "GET", "url": f"{target.base}/slow"}, "deadline_seconds": 30,
    }  # fmt: skip
    write_agent(agents, {
        "id": "careful", "environment": "dev",
        "model": {"kind": "scripted", "fallback": "nothing", "rules": [
            {"match": "wait", "tool": "wait", "arguments": {}, "reply": "waited"}]},
        "tools": [wait],
    })  # fmt: skip
    settings = Settings(agents_dir=agents, db_path=tmp / "hostcall.db", secret_keys=SECRET,
                        sweep_seconds=0.05, environ={})  # fmt: skip
    with live_server(settings) as live:
        yield live


def drive(server: Live, text: str, **plan: Any) -> tuple[str, dict[str, Any]]:
    thread = f"thread-{uuid.uuid4()}"
    result = run_node("http_agent.mjs", {
        "url": f"{server.url}/agui/helper", "threadId": thread, "text": text,
        "tools": plan.pop("tools", DECLARED), "answers": plan.pop("answers", {}), **plan,
    })  # fmt: skip
    events = [(f"run {i}", e) for i, run in enumerate(result["runs"]) for e in run["events"]]
    assert check_events(events) == []
    # The client strips what AG-UI does not define, with a warning: ours is under metadata.
    assert result["warnings"] == [], result["warnings"]
    return thread, result


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


def reply(result: dict[str, Any]) -> str:
    return str(result["messages"][-1]["content"])


def calls(server: Live, thread: str) -> list[sqlite3.Row]:
    cid = thread_conversation_id("helper", thread)
    with sqlite3.connect(
        f"file:{server.app.state.hostcall.settings.db_path}?mode=ro", uri=True
    ) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM calls WHERE conversation_id = ?", (cid,)).fetchall()


def test_http_agent_runs_a_tool_it_declares_and_the_agent_continues(server: Live) -> None:
    thread, result = drive(server, "what next?", answers={"read_board": {"output": BOARD}})
    first, second = result["runs"]
    assert types(first)[0] == "RUN_STARTED" and types(first)[-1] == "RUN_FINISHED"
    assert first["events"][0]["threadId"] == thread and first["events"][0]["runId"] == "run-1"
    assert "TOOL_CALL_END" in types(first) and "TOOL_CALL_RESULT" not in types(first)
    [call] = [c for m in first["newMessages"] for c in m.get("toolCalls", [])]
    assert call["function"]["name"] == "read_board" and call["id"].startswith("k_")
    assert types(second)[-1] == "RUN_FINISHED" and second["events"][-1]["runId"] == "run-2"
    assert "TEXT_MESSAGE_START" not in types(second)[:1]
    assert reply(result) == "3 tasks, first Write release notes"
    [stored] = calls(server, thread)
    assert (stored["state"], stored["delivered"], stored["route"]) == ("answered", 1, "handler")


def test_http_agent_takes_the_reasoning_before_the_answer(server: Live) -> None:
    _, result = drive(server, "think about my week")
    [run] = result["runs"]
    thought = [t for t in types(run) if t.startswith("REASONING")]
    assert thought[0] == "REASONING_START" and thought[-1] == "REASONING_END"
    assert types(run).index("REASONING_END") < types(run).index("TEXT_MESSAGE_START")
    assert reply(result) == "thought it through"


def test_a_client_side_tool_the_client_does_not_declare_waits_for_a_person(
    server: Live,
) -> None:
    """As the widget shows a form for a tool no page runs: the run ends with an interrupt
    whose schema is the tool's output schema (tests/system/test_agui_interrupts.py)."""
    thread, result = drive(server, "what next?", tools=[])
    [run] = result["runs"]
    outcome = run["events"][-1]["outcome"]
    [interrupt] = outcome["interrupts"]
    assert interrupt["reason"] == "input_required"
    assert interrupt["responseSchema"] == BOARD_SCHEMA
    assert "TOOL_CALL_RESULT" not in types(run)
    [stored] = calls(server, thread)
    assert (stored["state"], stored["delivered"]) == ("dispatched", 0)


def test_a_failing_client_tool_reaches_the_model_as_client_error(server: Live) -> None:
    _, result = drive(server, "what next?", answers={"read_board": {"error": "board locked"}})
    assert len(result["runs"]) == 2 and reply(result) == "error client_error"


def test_a_client_result_that_breaks_the_output_schema_is_a_client_error(server: Live) -> None:
    _, result = drive(server, "what next?", answers={"read_board": {"output": {"rows": []}}})
    assert reply(result) == "error client_error"


def test_server_side_tools_run_on_the_server(server: Live, target: Target) -> None:
    before = len(target.rec.requests)
    thread, result = drive(server, "fetch abc")
    assert len(result["runs"]) == 1  # nothing for the client to run
    assert reply(result) == "fetched /echo/abc"
    assert len(target.rec.requests) == before + 1
    [stored] = calls(server, thread)
    assert stored["state"] == "answered"


def test_a_guardrail_blocks_a_declared_client_tool_before_the_client_sees_it(
    server: Live,
) -> None:
    thread, result = drive(server, "create my secret plan",
                           answers={"create": {"output": {"ran": True}}})  # fmt: skip
    [run] = result["runs"]
    assert reply(result) == "error blocked_by_guardrail"
    assert "hostcall.tool_call_dispatch" not in [e.get("name") for e in run["events"]]
    [stored] = calls(server, thread)
    assert stored["state"] == "failed"


# ---- bad input ------------------------------------------------------------------------------


def _conversations(server: Live) -> int:
    with sqlite3.connect(
        f"file:{server.app.state.hostcall.settings.db_path}?mode=ro", uri=True
    ) as db:
        return int(db.execute("SELECT count(*) FROM conversations").fetchone()[0])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"runId": "r", "messages": []}, "threadId"),
        ({"threadId": "t", "runId": "r", "messages": "hi"}, "messages"),
        ({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "robot"}]},
         "messages[0].role"),
        ({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": 5}]},
         "messages[0].content"),
        ({"threadId": "t", "runId": "r", "messages": [], "tools": [{"description": "x"}]},
         "tools[0].name"),
        ({"threadId": "t", "runId": "r", "messages": [], "resume": {}}, "resume"),
        ({"threadId": "t", "runId": "r", "messages": [],
          "resume": [{"interruptId": "x", "status": "maybe"}]}, "resume[0].status"),
        ({"threadId": "t", "runId": "r", "messages": [], "resume": [{"status": "cancelled"}]},
         "resume[0].interruptId"),
        ({"threadId": "t", "runId": "r", "messages": [],
          "resume": [{"interruptId": "x", "status": "cancelled", "metadata": []}]},
         "resume[0].metadata"),
        ({"threadId": "t", "runId": "r", "messages": [],
          "resume": [{"interruptId": "x", "status": "cancelled"}] * 2}, "resume"),
    ],
)  # fmt: skip
def test_a_malformed_run_input_is_a_400_naming_the_field(
    server: Live, body: dict[str, Any], field: str
) -> None:
    before = _conversations(server)
    r = httpx.post(f"{server.url}/agui/helper", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["details"]["field"] == field and field in error["message"]
    assert _conversations(server) == before


def test_a_run_with_no_user_message_to_answer_is_refused_and_starts_nothing(server: Live) -> None:
    body = {"threadId": f"t-{uuid.uuid4()}", "runId": "r",
            "messages": [{"id": "1", "role": "assistant", "content": "hello"}]}  # fmt: skip
    r = httpx.post(f"{server.url}/agui/helper", json=body)
    assert r.status_code == 400 and "nothing to run" in r.json()["error"]["message"]
    cid = thread_conversation_id("helper", body["threadId"])
    assert asyncio.run(server.app.state.hostcall.store.latest_run(cid)) is None


def test_an_unknown_agent_is_a_404(server: Live) -> None:
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "1", "role": "user", "content": "x"}],
    }
    r = httpx.post(f"{server.url}/agui/nobody", json=body)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_agent"


# ---- the widget's limits ---------------------------------------------------------------------


def _say(server: Live, agent: str, thread: str) -> httpx.Response:
    body = {"threadId": thread, "runId": "r",
            "messages": [{"id": "1", "role": "user", "content": "hi"}]}  # fmt: skip
    return httpx.post(f"{server.url}/agui/{agent}", json=body, timeout=10)


def _refused(r: httpx.Response, code: str) -> dict[str, Any]:
    assert r.status_code == 429, r.text
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] == code, error
    assert int(r.headers["Retry-After"]) == error["details"]["retryAfter"] >= 1
    return error


def test_fresh_thread_ids_from_one_client_hit_the_conversation_limit(server: Live) -> None:
    threads = [f"t-{uuid.uuid4()}" for _ in range(4)]
    for thread in threads[:3]:
        r = _say(server, "few", thread)
        assert r.status_code == 200 and "RUN_FINISHED" in r.text, r.text
    before = _conversations(server)
    error = _refused(_say(server, "few", threads[3]), "rate_limited")
    assert "conversations from this address" in error["message"]
    assert _conversations(server) == before  # the refused thread was not created
    # A thread that exists goes on: a message there is no new conversation.
    again = _say(server, "few", threads[0])
    assert again.status_code == 200 and "hello there" in again.text
    # The widget's API counts the same conversations, and refuses the same way.
    widget = httpx.post(
        f"{server.url}/api/agents/few/conversations", headers={"Origin": server.url}
    )
    assert _refused(widget, "rate_limited")["message"] == error["message"]


def test_a_fresh_thread_id_does_not_reset_the_token_budget(server: Live) -> None:
    first = _say(server, "thrifty", f"t-{uuid.uuid4()}")
    assert first.status_code == 200 and "hello there" in first.text  # spends the budget
    before = _conversations(server)
    error = _refused(_say(server, "thrifty", f"t-{uuid.uuid4()}"), "token_budget_exhausted")
    assert "this agent today" in error["message"]
    assert _conversations(server) == before


def _row(server: Live, sql: str, *args: Any) -> sqlite3.Row:
    with sqlite3.connect(
        f"file:{server.app.state.hostcall.settings.db_path}?mode=ro", uri=True
    ) as db:
        db.row_factory = sqlite3.Row
        row = db.execute(sql, args).fetchone()
    assert row is not None, sql
    return row


def test_a_client_that_aborts_its_run_stops_it(server: Live) -> None:
    """AG-UI's abortRun closes the request: the run nobody can follow any more ends as
    ``cancelled``, as after the widget's Stop, and its open call with it."""
    thread = f"thread-{uuid.uuid4()}"
    cid = thread_conversation_id("careful", thread)
    body = {"threadId": thread, "runId": "run-1", "tools": [],
            "messages": [{"id": "u1", "role": "user", "content": "wait"}]}  # fmt: skip
    with httpx.stream("POST", f"{server.url}/agui/careful", json=body, timeout=10) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if "hostcall.tool_call_dispatch" in line:
                break  # the run waits for its server-side call; the client goes away
    # The stop commits the run's end, then settles its open calls: wait for both.
    deadline = time.monotonic() + 30
    while True:
        run = _row(server, "SELECT * FROM runs WHERE conversation_id = ?", cid)
        call = _row(server, "SELECT * FROM calls WHERE conversation_id = ?", cid)
        if run["status"] == "stopped" and call["state"] == "failed":
            break
        assert time.monotonic() < deadline, (dict(run), dict(call))
        time.sleep(0.05)
    assert json.loads(run["error"])["code"] == "cancelled"
    assert json.loads(call["outcome"])["error"]["code"] == "cancelled"
