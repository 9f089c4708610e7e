"""Server-side HTTP tools through the run engine: policies, targets, credentials, simulation."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hostcall.calls.transitions import OPEN_STATES
from hostcall.errors import AgentConfigError
from tests.support.harness import Conv, Harness, write_agent
from tests.support.loopback import Live, Trap, live_server
from tests.support.redos import HOSTILE_TEXT, RESPONSIVE_SECONDS, while_answering_healthz

TOKEN = "Bearer sekrit-connection-token-123"


@pytest.fixture(scope="module")
def target() -> Iterator[Live]:
    with live_server() as live:
        yield live


@pytest.fixture(scope="module")
def other() -> Iterator[Live]:
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


def build(
    tmp_path: Path,
    target: Live,
    tool: dict[str, Any],
    env: str = "dev",
    *,
    also_allowed: tuple[str, ...] = (),
) -> Harness:
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {
            "dev": {"allowed_hosts": [target.host, *also_allowed]},
            "prod": {"protected": True, "allowed_hosts": [target.host]},
        },
        "allowed_env": ["SVC_TOKEN"],
        "connections": {"svc": {"hosts": [target.host],
                                "headers": {"Authorization": {"env": "SVC_TOKEN"}}}},
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


def test_target_not_on_the_list_is_refused_at_load_before_any_connection(
    tmp_path: Path, target: Live, trap: Trap
) -> None:
    tool = fetch_tool(f"http://127.0.0.1:{trap.port}/x/{{{{ $fromAI.what }}}}")
    del tool["connection"]  # a connection is bound to its hosts: refused at load (below)
    with pytest.raises(AgentConfigError) as caught:
        build(tmp_path, target, tool)
    assert caught.value.problems == [
        f"ops.json: tool 'fetch': 'url' goes to 127.0.0.1:{trap.port}, which environment 'dev' "
        f"does not allow (its 'allowed_hosts' in _platform.json: {target.host})"
    ]
    assert trap.connections == 0


def test_a_target_the_platform_stops_allowing_is_not_authorized_before_any_connection(
    tmp_path: Path, target: Live, trap: Trap, made: list[Harness]
) -> None:
    tool = fetch_tool(f"http://127.0.0.1:{trap.port}/x/{{{{ $fromAI.what }}}}")
    del tool["connection"]
    h = build(tmp_path, target, tool, also_allowed=(f"127.0.0.1:{trap.port}",))
    made.append(h)
    agents = h.runtime.engine.agents
    # The platform is read live: the operator takes the host off the list meanwhile.
    dev = replace(agents.platform.environments["dev"], allowed_hosts=frozenset({target.host}))
    agents.platform = replace(agents.platform, environments={"dev": dev})
    conv, snap = ask(h, "fetch it")
    assert snap["calls"][0]["outcome"]["error"]["code"] == "not_authorized"
    assert h.assistant_texts(conv)[-1] == "error not_authorized"
    assert trap.connections == 0


def test_a_connection_is_refused_at_load_for_a_host_it_is_not_bound_to(
    tmp_path: Path, target: Live, other: Live, made: list[Harness]
) -> None:
    """Both hosts are the environment's; the connection is declared with the target's only,
    so a tool may not carry it to the other."""
    other.rec.clear()
    tool = fetch_tool(f"{other.base}/echo/{{{{ $fromAI.what }}}}")
    try:
        h = build(tmp_path, target, tool, also_allowed=(other.host,))
    except AgentConfigError as exc:
        problems = exc.problems
    else:
        made.append(h)
        ask(h, "fetch the token")
        problems = []
    assert [r.headers.get("authorization") for r in other.rec.requests] == []
    assert problems == [
        f"ops.json: tool 'fetch': connection 'svc' may not be sent to {other.host} "
        f"(its 'hosts' in _platform.json: {target.host})"
    ]


def test_a_connection_narrowed_while_running_is_not_sent_and_the_call_not_made(
    tmp_path: Path, target: Live, other: Live, made: list[Harness]
) -> None:
    target.rec.clear()
    h = build(tmp_path, target, fetch_tool(f"{target.base}/echo/{{{{ $fromAI.what }}}}"))
    made.append(h)
    agents = h.runtime.engine.agents
    svc = agents.platform.connections["svc"]
    # The platform is read live: the operator binds the connection elsewhere meanwhile.
    narrowed = {"svc": replace(svc, hosts=frozenset({other.host}))}
    agents.platform = replace(agents.platform, connections=narrowed)
    conv, snap = ask(h, "fetch it")
    assert snap["calls"][0]["outcome"]["error"]["code"] == "not_authorized"
    assert h.assistant_texts(conv)[-1] == "error not_authorized"
    assert target.rec.hits["echo"] == 0


def test_a_connection_reading_a_server_secret_is_refused(tmp_path: Path, target: Live) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {"dev": {"allowed_hosts": [target.host]}},
        "allowed_env": ["SVC_TOKEN"],
        "connections": {"svc": {"hosts": [target.host], "headers": {
            "Authorization": {"env": "HOSTCALL_SECRET_KEYS"}, "X-Other": {"env": "OTHER"}}}},
    }, name="_platform.json")  # fmt: skip
    write_agent(directory, {"id": "ops", "environment": "dev"})
    environ = {"HOSTCALL_SECRET_KEYS": "signing-keys", "OTHER": "other-secret"}
    with pytest.raises(AgentConfigError) as caught:
        Harness(tmp_path, directory, environ=environ)
    assert caught.value.problems == [
        "_platform.json: connection 'svc': header 'Authorization': environment variable "
        "'HOSTCALL_SECRET_KEYS' is one of the server's own settings (HOSTCALL_*), never "
        "given to an agent",
        "_platform.json: connection 'svc': header 'X-Other': environment variable 'OTHER' "
        "is not listed in 'allowed_env' of _platform.json",
    ]


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
    error = h.model_error(snap["calls"][0])
    assert error["code"] == "block_failed" and error["status"] == 503
    assert h.assistant_texts(conv)[-1] == "error block_failed 503"


def test_slow_target_fails_at_the_execution_timeout(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    tool = fetch_tool(f"{target.base}/slow?w={{{{ $fromAI.what }}}}", deadline_seconds=0.3)
    h = build(tmp_path, target, tool)
    made.append(h)
    _, snap = ask(h, "fetch it")
    error = h.model_error(snap["calls"][0])
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


def test_the_server_answers_while_a_blocks_response_is_matched(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    # A designer's catastrophic pattern on the response's path, which the visitor chose.
    schema = {"type": "object", "required": ["status"], "properties": {
        "status": {"type": "integer"},
        "body": {"type": "object", "properties": {
            "path": {"type": "string", "pattern": "^/echo/(a+)+$"},
        }},
    }}  # fmt: skip
    url = f"{target.base}/echo/{{{{ $fromAI.what }}}}"
    h = build(tmp_path, target, fetch_tool(url, output_schema=schema))
    made.append(h)
    (_, snap), longest = while_answering_healthz(h.http, lambda: ask(h, f"fetch {HOSTILE_TEXT}"))
    assert longest < RESPONSIVE_SECONDS, f"/healthz waited {longest:.2f}s"
    [call] = snap["calls"]
    assert call["state"] == "failed", call
    error = h.model_error(call)
    assert error["code"] == "block_failed" and "output schema" in error["message"], error
    # The same pattern says yes where it matches: the model gets the result.
    conv, snap = ask(h, "fetch aaaa")
    assert snap["calls"][0]["state"] == "answered"
    assert h.assistant_texts(conv)[-1] == "got 200 /echo/aaaa"


def test_an_upstream_body_reaches_the_model_and_never_the_visitor(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    """A target's 404 body quoted what it was sent: the model (and the operator's console)
    reads it, the visitor's events and snapshot carry a code and a sentence only."""
    h = build(tmp_path, target, fetch_tool(f"{target.base}/status/404?w={{{{ $fromAI.what }}}}"))
    made.append(h)
    conv, snap = ask(h, "fetch it")
    [call] = snap["calls"]
    assert call["outcome"] == {
        "error": {"code": "block_failed", "message": "This action could not be completed."}
    }
    for kind, data in h.events(conv):
        assert "target says no" not in json.dumps(data), (kind, data)
    assert "target says no" not in json.dumps(snap)
    stored = h.call(h.runtime.store.list_messages, conv.id)
    [told] = [m.text for m in stored if m.role == "tool"]
    assert json.loads(told)["error"]["code"] == "block_failed" and "target says no" in told
