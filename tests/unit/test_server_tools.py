"""Server-side HTTP tools through the run engine: policies, targets, credentials, simulation."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.calls.transitions import OPEN_STATES
from tests.support.harness import Conv, Harness, write_agent
from tests.support.loopback import Live, Trap, live_server

TOKEN = "Bearer sekrit-connection-token-123"


@pytest.fixture(scope="module")
def target() -> Iterator[Live]:
    with live_server() as live:
        yield live


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()


def fetch_tool(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "fetch",
        "kind": "http",
        "description": "Fetches something.",
        "effect": "read",
        "ai_params": [{"key": "what", "type": "string", "required": True}],
        "request": {"method": "GET", "url": url},
        "connection": "svc",
        "deadline_seconds": 2,
        **extra,
    }


def build(tmp_path: Path, target: Live, tool: dict[str, Any], env: str = "dev") -> Harness:
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {
            "dev": {"allowed_hosts": [target.host]},
            "prod": {"protected": True, "allowed_hosts": [target.host]},
        },
        "connections": {"svc": {"headers": {"Authorization": {"env": "SVC_TOKEN"}}}},
    }, name="_platform.json")  # fmt: skip
    write_agent(directory, {
        "id": "ops",
        "environment": env,
        "model": {"kind": "scripted", "rules": [{
            "match": "fetch (?P<what>.+)", "tool": tool.get("name", tool.get("toolName")),
            "arguments": {"what": "{{ what }}"},
            "reply": "got {{ result.status }} {{ result.body.path }}",
            "error_reply": "error {{ error.code }}{% if error.status %} {{ error.status }}{% endif %}",  # noqa: E501
        }]},
        "tools": [tool],
    })  # fmt: skip
    return Harness(tmp_path, directory, environ={"SVC_TOKEN": TOKEN})


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[Harness]]:
    harnesses: list[Harness] = []
    yield harnesses
    for h in harnesses:
        h.stop()


OPEN = {state.value for state in OPEN_STATES}


def finished(h: Harness, conv: Conv) -> dict[str, Any]:
    """The snapshot once the run no longer waits on anything but a person."""
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        snap = h.snapshot(conv)
        status, states = snap["run"]["status"], [c["state"] for c in snap["calls"]]
        # A server-side call runs in the background; a waiting run whose calls are all
        # settled is about to resume (the task that resumes it starts after the answer's
        # streams have their result).
        busy = (
            status == "running"
            or "dispatched" in states
            or (status == "waiting" and not any(s in OPEN for s in states))
        )
        if not busy:
            return snap
        time.sleep(0.02)
    raise AssertionError(f"run still busy: {snap['run']}")


def ask(h: Harness, text: str, **body: Any) -> tuple[Conv, dict[str, Any]]:
    conv = h.conversation("ops")
    r = h.http.post(f"/api/conversations/{conv.id}/messages", json={"text": text, **body},
                    headers=conv.auth)  # fmt: skip
    assert r.status_code == 202, r.text
    return conv, finished(h, conv)


def test_allowed_target_is_called_with_the_connection_and_the_model_gets_the_result(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    target.rec.clear()
    h = build(tmp_path, target, fetch_tool(f"{target.base}/echo/{{{{ $fromAI.what }}}}"))
    made.append(h)
    conv, snap = ask(h, "fetch reports")
    assert snap["run"]["status"] == "finished"
    assert snap["calls"][0]["state"] == "answered"
    assert target.rec.hits["echo"] == 1
    assert target.rec.last.headers["authorization"] == TOKEN
    assert h.assistant_texts(conv)[-1] == "got 200 /echo/reports"
    # The credential never reaches the model, the event log or the widget's snapshot.
    everything = json.dumps(h.events(conv)) + json.dumps(snap)
    assert "sekrit" not in everything


def test_injected_path_value_stays_a_value(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    target.rec.clear()
    h = build(tmp_path, target, fetch_tool(f"{target.base}/echo/{{{{ $fromAI.what }}}}"))
    made.append(h)
    _, snap = ask(h, "fetch ../../admin?x=1#y {{ $fromAI.what }}")
    assert snap["calls"][0]["state"] == "answered"
    seen = target.rec.last
    assert seen.raw_path.startswith("/echo/") and seen.raw_path.count("/") == 2
    assert seen.query == ""


def test_target_not_on_the_list_is_not_authorized_before_any_connection(
    tmp_path: Path, target: Live, trap: Trap, made: list[Harness]
) -> None:
    h = build(
        tmp_path, target, fetch_tool(f"http://127.0.0.1:{trap.port}/x/{{{{ $fromAI.what }}}}")
    )
    made.append(h)
    conv, snap = ask(h, "fetch it")
    assert snap["calls"][0]["outcome"]["error"]["code"] == "not_authorized"
    assert h.assistant_texts(conv)[-1] == "error not_authorized"
    assert trap.connections == 0


def test_redirect_to_a_host_not_on_the_list_is_not_authorized(
    tmp_path: Path, target: Live, trap: Trap, made: list[Harness]
) -> None:
    url = f"{target.base}/redirect?to=http://127.0.0.1:{trap.port}/&q={{{{ $fromAI.what }}}}"
    h = build(tmp_path, target, fetch_tool(url))
    made.append(h)
    _, snap = ask(h, "fetch it")
    assert snap["calls"][0]["outcome"]["error"]["code"] == "not_authorized"
    assert trap.connections == 0


def test_failing_target_gives_block_failed_with_the_status(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    h = build(tmp_path, target, fetch_tool(f"{target.base}/status/503?w={{{{ $fromAI.what }}}}"))
    made.append(h)
    conv, snap = ask(h, "fetch it")
    error = snap["calls"][0]["outcome"]["error"]
    assert error["code"] == "block_failed" and error["status"] == 503
    assert h.assistant_texts(conv)[-1] == "error block_failed 503"


def test_slow_target_fails_at_the_execution_timeout(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    tool = fetch_tool(f"{target.base}/slow?w={{{{ $fromAI.what }}}}", deadline_seconds=0.3)
    h = build(tmp_path, target, tool)
    made.append(h)
    _, snap = ask(h, "fetch it")
    error = snap["calls"][0]["outcome"]["error"]
    assert error["code"] == "block_failed" and "timeout" in error["message"].lower()


def test_huge_response_fails_without_reading_it_all(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    tool = fetch_tool(f"{target.base}/huge?w={{{{ $fromAI.what }}}}", max_response_kb=64)
    h = build(tmp_path, target, tool)
    made.append(h)
    _, snap = ask(h, "fetch it")
    assert snap["calls"][0]["outcome"]["error"]["code"] == "block_failed"
    assert not target.rec.huge_finished


def test_simulated_run_sends_no_request(tmp_path: Path, target: Live, made: list[Harness]) -> None:
    target.rec.clear()
    tool = fetch_tool(
        f"{target.base}/echo/{{{{ $fromAI.what }}}}",
        simulation_result={"status": 200, "body": {"path": "/simulated"}},
    )
    h = build(tmp_path, target, tool)
    made.append(h)
    conv, snap = ask(h, "fetch it", simulate=True)
    assert sum(target.rec.hits.values()) == 0
    assert snap["calls"][0]["simulated"] is True
    assert h.assistant_texts(conv)[-1] == "(Simulated) got 200 /simulated"


def test_write_in_a_protected_environment_waits_for_a_person(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    target.rec.clear()
    tool = fetch_tool(f"{target.base}/echo/{{{{ $fromAI.what }}}}", effect="write")
    h = build(tmp_path, target, tool, env="prod")
    made.append(h)
    conv, snap = ask(h, "fetch one")
    call = snap["calls"][0]
    assert call["state"] == "awaiting_confirmation" and "resultToken" not in call
    assert sum(target.rec.hits.values()) == 0
    assert h.decide(call, "reject", reason="no").status_code == 200
    finished(h, conv)
    assert sum(target.rec.hits.values()) == 0  # rejected: never executed

    h.say(conv, "fetch two")
    call = h.open_call(conv, "awaiting_confirmation")
    assert h.decide(call, "approve").status_code == 200
    assert finished(h, conv)["run"]["status"] == "finished"
    assert target.rec.hits["echo"] == 1
    assert h.assistant_texts(conv)[-1] == "got 200 /echo/two"


def test_tool_in_the_import_format_loads_and_runs(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    target.rec.clear()
    seed_tool = {
        "toolName": "meteo",
        "toolDescription": "Température d'une ville",
        "aiParams": [{"id": "p1", "key": "what", "type": "string", "description": "Ville",
                      "required": True}],
        "block": {"type": "http", "method": "GET",
                  "url": f"{target.base}/echo/{{{{ $fromAI.what }}}}"},
        "effect": "read",
        "approvalTimeoutMinutes": 2,
    }  # fmt: skip
    h = build(tmp_path, target, seed_tool)
    made.append(h)
    tool = h.runtime.agents["ops"].tool("meteo")
    assert tool is not None and tool.kind == "http"
    assert tool.approval_timeout_seconds == 120
    assert tool.input_schema["required"] == ["what"]
    conv, _ = ask(h, "fetch Paris")
    assert h.assistant_texts(conv)[-1] == "got 200 /echo/Paris"
