"""MCP servers as tool blocks, against the SDK's own server: over streamable HTTP on
loopback (in a thread) and over stdio (the command the platform declares, a subprocess)."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hostcall.errors import AgentConfigError
from tests.support.harness import Conv, Harness, write_agent
from tests.support.loopback import Trap
from tests.support.mcp_server import ROOT, Seen, http_server, stdio_command
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_openapi import Described

TOKEN = "Bearer mcp-sekrit-token-4711"
STDIO_TOKEN = "stdio-sekrit-token-0815"


@pytest.fixture(scope="module")
def crm() -> Iterator[tuple[str, Seen]]:
    seen = Seen()
    with http_server(seen) as url:
        yield url, seen


def platform(
    url: str, *, allowed: tuple[str, ...] = ("crm", "files"), **crm: Any
) -> dict[str, Any]:
    return {
        "environments": {
            "dev": {"mcp_servers": list(allowed)},
            "prod": {"protected": True, "mcp_servers": ["crm"]},
        },
        "allowed_env": ["CRM_TOKEN", "FILES_TOKEN"],
        "mcp_servers": {
            "crm": {"url": url, "headers": {"Authorization": {"env": "CRM_TOKEN"}}, **crm},
            "files": {"command": stdio_command(), "cwd": str(ROOT),
                      "env": {"CRM_TOKEN": {"env": "FILES_TOKEN"}}},
        },
    }  # fmt: skip


ERROR_REPLY = "error {{ error.code }}: {{ error.message }}"
RULES = [
    {"match": "^find (?P<who>.+)", "tool": "lookup", "arguments": {"name": "{{ who }}"},
     "reply": "email {{ result.structuredContent.email }}", "error_reply": ERROR_REPLY},
    {"match": "^note (?P<what>.+)", "tool": "note_text", "arguments": {"text": "{{ what }}"},
     "reply": "ok", "error_reply": ERROR_REPLY},
]  # fmt: skip


def call_rule(tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"match": f"^call {tool}$", "tool": tool, "arguments": arguments or {},
            "reply": "ok", "error_reply": ERROR_REPLY}  # fmt: skip


def build(
    tmp_path: Path,
    url: str,
    *tools: dict[str, Any],
    rules: list[dict[str, Any]] | None = None,
    env: str = "dev",
    allowed: tuple[str, ...] = ("crm", "files"),
    **crm: Any,
) -> Harness:
    directory = tmp_path / "agents"
    write_agent(directory, platform(url, allowed=allowed, **crm), name="_platform.json")
    write_agent(directory, {
        "id": "ops",
        "environment": env,
        "model": {"kind": "scripted", "rules": rules or RULES},
        "tools": list(tools),
    })  # fmt: skip
    return Harness(tmp_path, directory, environ={"CRM_TOKEN": TOKEN, "FILES_TOKEN": STDIO_TOKEN})


def ask(
    h: Harness, text: str, conv: Conv | None = None, **body: Any
) -> tuple[Conv, dict[str, Any]]:
    conv = conv or h.conversation("ops")
    r = h.http.post(f"/api/conversations/{conv.id}/messages", json={"text": text, **body},
                    headers=conv.auth)  # fmt: skip
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        snap = h.snapshot(conv)
        states = [c["state"] for c in snap["calls"]]
        if snap["run"]["status"] in ("finished", "failed") or "awaiting_confirmation" in states:
            return conv, snap
        time.sleep(0.02)
    raise AssertionError(f"run still busy: {snap['run']}")


def run_tools(h: Harness, conv: Conv) -> list[dict[str, Any]]:
    """The tools the conversation's latest run froze when it started."""
    run_id = h.snapshot(conv)["run"]["runId"]
    run = h.call(h.runtime.store.get_run, run_id)
    assert run is not None
    return [t for t in run.agent["tools"] if "tool" in t]


def pid_of(call: dict[str, Any]) -> int:
    """The process id the ``pid`` tool answered with."""
    assert "output" in call["outcome"], call["outcome"]
    return int(call["outcome"]["output"]["content"][0]["text"])


def everything(h: Harness, conv: Conv) -> str:
    return json.dumps(h.events(conv)) + json.dumps(h.snapshot(conv))


# ---- listing and calling -------------------------------------------------------------------


def test_a_chosen_tool_is_listed_called_and_its_structured_output_reaches_the_model(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness], caplog: pytest.LogCaptureFixture
) -> None:
    url, seen = crm
    caplog.set_level(logging.DEBUG)
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["lookup"]},
              rules=RULES[:1])  # fmt: skip
    made.append(h)
    before = len(seen.calls)
    conv, snap = ask(h, "find Ann")
    assert snap["run"]["status"] == "finished", snap["run"]
    [call] = snap["calls"]
    assert call["state"] == "answered"
    output = call["outcome"]["output"]
    assert output["structuredContent"] == {"name": "Ann", "email": "ann@example.com"}
    assert json.loads(output["content"][0]["text"]) == output["structuredContent"]
    assert h.assistant_texts(conv)[-1] == "email ann@example.com"
    assert seen.calls[before:] == ["lookup"]
    # The credential went to the server, and nowhere else.
    assert seen.authorizations[-1] == TOKEN
    [frozen] = run_tools(h, conv)
    assert frozen["server"] == "crm" and frozen["tool"] == "lookup"
    assert frozen["effect"] == "read"  # the server's readOnlyHint, outside protected places
    assert frozen["title"] == "Look up a contact"
    assert frozen["output_schema"]["properties"]["email"] == {"title": "Email", "type": "string"}
    assert "sekrit" not in everything(h, conv) + json.dumps(frozen)
    assert "sekrit" not in caplog.text


def test_all_tools_are_exposed_and_the_agent_file_overrides_the_servers_hints(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    binding = {"kind": "mcp", "server": "crm", "tools": "all", "deadline_seconds": 20,
               "overrides": {"lookup": {"effect": "write", "name": "find_contact",
                                        "title": "Find someone"}}}  # fmt: skip
    rules = [call_rule("find_contact", {"name": "Bo"})]
    h = build(tmp_path, url, binding, rules=rules)
    made.append(h)
    conv, snap = ask(h, "call find_contact")
    assert snap["calls"][0]["state"] == "answered", snap["calls"]
    frozen = {t["name"]: t for t in run_tools(h, conv)}
    assert set(frozen) == {"find_contact", "note_text", "fail", "slow", "huge", "picture",
                           "whoami", "crash", "helper", "complain", "pid", "odd", "grow",
                           "wipe", "erase", "greet", "sprout"}  # fmt: skip
    assert frozen["find_contact"]["effect"] == "write"  # the file decides
    assert frozen["find_contact"]["title"] == "Find someone"
    assert frozen["note_text"]["effect"] == "write"  # destructiveHint
    assert all(t["deadline_seconds"] == 20 for t in frozen.values())


def test_is_error_is_block_failed_with_the_servers_message(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["fail"]},
              rules=[call_rule("fail", {"reason": "no stock"})])  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "call fail")
    [call] = snap["calls"]
    assert call["state"] == "failed"
    error = h.model_error(call)  # the visitor's snapshot has the code and a sentence
    assert error["code"] == "block_failed"
    assert "cannot do it: no stock" in error["message"], error
    assert h.assistant_texts(conv)[-1].startswith("error block_failed: ")


def test_structured_content_that_does_not_match_the_output_schema_is_block_failed(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["odd"]},
              rules=[call_rule("odd")])  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "call odd")
    [call] = snap["calls"]
    assert call["state"] == "failed"
    error = h.model_error(call)  # the visitor's snapshot has the code and a sentence
    assert error["code"] == "block_failed"
    assert "does not match the tool's output schema" in error["message"], error
    assert "'many' is not of type 'integer'" in error["message"], error
    assert '"many"' not in json.dumps(h.events(conv))  # the bad result never reached the model


def test_a_slow_tool_past_its_timeout_fails_and_the_next_call_is_answered(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    binding = {"kind": "mcp", "server": "crm", "tools": ["slow", "lookup"],
               "overrides": {"slow": {"deadline_seconds": 0.5}}}  # fmt: skip
    h = build(tmp_path, url, binding, rules=[call_rule("slow", {"seconds": 5}), RULES[0]])
    made.append(h)
    started = time.monotonic()
    conv, snap = ask(h, "call slow")
    assert time.monotonic() - started < 4
    error = h.model_error(snap["calls"][0])
    assert error == {"code": "block_failed", "message": "The request failed: timeout after 0.5 s"}
    _, snap = ask(h, "find Cy", conv)
    assert snap["calls"][-1]["outcome"]["output"]["structuredContent"]["email"] == "cy@example.com"


def test_a_huge_result_is_cut_to_the_limit_and_the_model_is_told(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    binding = {"kind": "mcp", "server": "crm", "tools": ["huge"],
               "overrides": {"huge": {"max_response_kb": 4}}}  # fmt: skip
    h = build(tmp_path, url, binding, rules=[call_rule("huge", {"kilobytes": 3000})])
    made.append(h)
    conv, snap = ask(h, "call huge")
    result = snap["calls"][0]["outcome"]["output"]
    assert result["content"] == [{"type": "text", "text": "x" * 4096}]
    assert result["truncated"]["bytes"] == 3000 * 1024 - 4096
    assert "left out" in result["truncated"]["note"]
    assert len(json.dumps(h.events(conv))) < 3 * 4096 + 20000


def test_an_answer_past_the_servers_bound_is_not_read_and_the_session_goes_on(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["huge", "lookup"]},
              rules=[call_rule("huge", {"kilobytes": 3000}), RULES[0]],
              max_message_mb=1)  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "call huge")
    assert h.model_error(snap["calls"][0]) == {
        "code": "block_failed",
        "message": "The request failed: the MCP server 'crm' sent a message over 1 MB "
        "(its 'max_message_mb'); it was not read",
    }
    _, snap = ask(h, "find Cy", conv)
    assert snap["calls"][-1]["outcome"]["output"]["structuredContent"]["email"] == "cy@example.com"


def test_an_image_is_described_to_the_model_not_passed_on(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["picture"]},
              rules=[call_rule("picture")])  # fmt: skip
    made.append(h)
    _, snap = ask(h, "call picture")
    assert snap["calls"][0]["outcome"]["output"] == {"content": [
        {"type": "image", "text": "", "mimeType": "image/png", "bytes": 308},
        {"type": "text", "text": "a square"},
    ]}  # fmt: skip


def test_a_secret_the_server_echoes_is_redacted_before_the_model_reads_it(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["whoami"]},
              rules=[call_rule("whoami")])  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "call whoami")
    assert snap["calls"][0]["outcome"]["output"]["content"] == [
        {"type": "text", "text": "token=[redacted]"}
    ]
    assert "sekrit" not in everything(h, conv)


# ---- policies ------------------------------------------------------------------------------


def test_an_approval_tool_waits_for_a_person_before_the_server_is_called(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["note_text"],
                              "approval": "always"}, rules=RULES[1:])  # fmt: skip
    made.append(h)
    before = len(seen.calls)
    conv, snap = ask(h, "note hello")
    [call] = snap["calls"]
    assert call["state"] == "awaiting_confirmation"
    assert seen.calls[before:] == []
    assert h.decide(call, "approve").status_code == 200
    snap = h.finish(conv)
    assert snap["calls"][0]["outcome"]["output"]["content"] == [
        {"type": "text", "text": "noted: hello"}
    ]
    assert seen.calls[before:] == ["note_text"]


def test_a_simulated_run_returns_the_simulation_result_and_never_calls_the_server(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    binding = {
        "kind": "mcp",
        "server": "crm",
        "tools": ["lookup"],
        "overrides": {"lookup": {"simulation_result": {
            "content": [{"type": "text", "text": "Sim"}],
            "structuredContent": {"name": "Sim", "email": "sim@example.com"},
        }}},
    }  # fmt: skip
    h = build(tmp_path, url, binding, rules=RULES[:1])
    made.append(h)
    before = len(seen.calls)
    conv, snap = ask(h, "find Ann", simulate=True)
    assert snap["calls"][0]["outcome"]["output"]["structuredContent"]["email"] == "sim@example.com"
    assert h.assistant_texts(conv)[-1] == "(Simulated) email sim@example.com"
    assert seen.calls[before:] == []


def test_a_protected_environment_asks_a_person_for_a_server_write(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["note_text", "lookup"]},
              env="prod")  # fmt: skip
    made.append(h)
    before = len(seen.calls)
    _, snap = ask(h, "note hi")
    assert snap["calls"][0]["state"] == "awaiting_confirmation"
    _, snap = ask(h, "find Di")  # readOnlyHint is the server's say: a person decides here
    assert snap["calls"][0]["state"] == "awaiting_confirmation"
    assert seen.calls[before:] == []


# ---- the environment -----------------------------------------------------------------------


def test_a_server_the_environment_does_not_allow_is_refused_at_load_with_no_connection(
    tmp_path: Path,
) -> None:
    trap = Trap()
    try:
        with pytest.raises(AgentConfigError) as caught:
            build(tmp_path, f"http://127.0.0.1:{trap.port}/mcp",
                  {"kind": "mcp", "server": "crm", "tools": "all"}, allowed=("files",))  # fmt: skip
        assert caught.value.problems == [
            "ops.json: MCP server 'crm' is not allowed in environment 'dev' (its "
            "'mcp_servers' in _platform.json: files)"
        ]
        assert trap.connections == 0
    finally:
        trap.close()


def test_a_server_the_environment_stops_allowing_is_refused_before_any_connection(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["lookup", "note_text"],
                              "approval": "always"})  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "note bye")
    call = snap["calls"][0]
    assert call["state"] == "awaiting_confirmation"
    # The platform is read live: the operator takes the server away meanwhile.
    agents = h.runtime.engine.agents
    dev = agents.platform.environments["dev"]
    narrowed = {**agents.platform.environments, "dev": replace(dev, mcp_servers=frozenset())}
    agents.platform = replace(agents.platform, environments=narrowed)
    requests = len(seen.authorizations)
    calls = len(seen.calls)
    assert h.decide(call, "approve").status_code == 200
    snap = h.finish(conv)
    error = h.model_error(snap["calls"][0])
    refusal = "This tool may not send requests to the MCP server 'crm'."
    assert error == {"code": "not_authorized", "message": refusal}
    # A new run is not given the server's tools, and asks it nothing.
    _, snap = ask(h, "find Ed", conv)
    assert snap["calls"][-1]["outcome"]["error"]["code"] == "unknown_tool"
    assert seen.calls[calls:] == [] and len(seen.authorizations) == requests


# ---- the tool list -------------------------------------------------------------------------


def test_a_changed_tool_list_reaches_new_runs_only(tmp_path: Path, made: list[Harness]) -> None:
    with http_server() as url:  # its own server: the test grows its list
        binding = {"kind": "mcp", "server": "crm", "tools": "all"}
        rules = [{**call_rule("note_text", {"text": "x"})}, call_rule("grow"), call_rule("fresh")]
        h = build(tmp_path, url, {**binding, "overrides": {"note_text": {"approval": "always"}}},
                  rules=rules)  # fmt: skip
        made.append(h)
        waiting, snap = ask(h, "call note_text")
        assert snap["calls"][0]["state"] == "awaiting_confirmation"
        conv, snap = ask(h, "call grow")
        assert snap["calls"][0]["state"] == "answered"
        # The waiting run keeps the list it started with; a new run reads the new one.
        assert h.decide(h.open_call(waiting), "approve").status_code == 200
        h.finish(waiting)
        assert "fresh" not in {t["name"] for t in run_tools(h, waiting)}
        _, snap = ask(h, "call fresh", conv)
        assert snap["calls"][-1]["outcome"]["output"]["content"] == [
            {"type": "text", "text": "fresh"}
        ]
        assert "fresh" in {t["name"] for t in run_tools(h, conv)}


# ---- stdio ---------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_stdio_server_that_dies_is_restarted_and_stops_with_us(
    tmp_path: Path, made: list[Harness]
) -> None:
    h = build(tmp_path, "http://127.0.0.1:9/mcp",
              {"kind": "mcp", "server": "files", "tools": ["pid", "crash", "whoami"]},
              rules=[call_rule("pid"), call_rule("crash"), call_rule("whoami")])  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "call pid")
    first = pid_of(snap["calls"][0])
    assert _alive(first)
    _, snap = ask(h, "call crash", conv)
    [*_, crashed] = snap["calls"]
    assert crashed["state"] == "failed"
    assert crashed["outcome"]["error"]["code"] == "block_failed"
    assert "unavailable" in h.model_error(crashed)["message"]
    _, snap = ask(h, "call pid", conv)
    second = pid_of(snap["calls"][-1])
    assert second != first and not _alive(first)
    # Killed between calls, it is started again for the next call, which succeeds.
    os.kill(second, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _alive(second) and time.monotonic() < deadline:
        time.sleep(0.05)
    _, snap = ask(h, "call pid", conv)
    third = pid_of(snap["calls"][-1])
    assert third != second
    # The command got its declared variable; the model reads it redacted.
    _, snap = ask(h, "call whoami", conv)
    assert snap["calls"][-1]["outcome"]["output"]["content"] == [
        {"type": "text", "text": "token=[redacted]"}
    ]
    h.stop()
    deadline = time.monotonic() + 5
    while _alive(third) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(third)


# ---- the designer --------------------------------------------------------------------------


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_the_designer_lists_an_allowed_servers_tools_and_refuses_others_unasked(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    trap = Trap()
    try:
        data = platform(url)
        data["mcp_servers"]["elsewhere"] = {"url": f"http://127.0.0.1:{trap.port}/mcp"}
        directory = tmp_path / "agents"
        write_agent(directory, data, name="_platform.json")
        write_agent(directory, {"id": "ops", "environment": "dev", "tools": []})
        h = Harness(tmp_path, directory, environ={"CRM_TOKEN": TOKEN, "FILES_TOKEN": "x"})
        made.append(h)
        designer = ConsoleClient(h.app, h.runtime, "dana", "designer")
        page = designer.http.get("/console/agents/ops")
        assert '"mcpServers"' in page.text and '"dev": ["crm", "files"]' in page.text
        described = Described(h.http.get("/openapi.json").json())
        r = designer.http.get("/console/api/mcp/crm/tools?environment=dev")
        body = described.held(r, "/console/api/mcp/{server}/tools", "get", 200)
        assert body["problem"] is None and body["server"] == "crm"
        lookup = next(t for t in body["tools"] if t["name"] == "lookup")
        assert lookup == {"name": "lookup", "title": "Look up a contact",
                          "description": "Finds a contact by name.", "readOnly": True}  # fmt: skip
        r = designer.http.get("/console/api/mcp/elsewhere/tools?environment=dev")
        assert r.json() == {"server": "elsewhere", "environment": "dev", "tools": [],
                            "problem": "MCP server 'elsewhere' is not allowed in environment "
                            "'dev' (its 'mcp_servers' in _platform.json)"}  # fmt: skip
        # Saving an agent that uses it is refused with the line the editor shows beside it.
        agent = {"id": "ops", "environment": "dev",
                 "tools": [{"kind": "mcp", "server": "elsewhere", "tools": "all"}]}  # fmt: skip
        r = designer.post("/console/api/agents/ops", {"agent": agent})
        assert r.status_code == 422
        assert r.json()["error"]["details"]["problems"] == [
            "ops.json: MCP server 'elsewhere' is not allowed in environment 'dev' "
            "(its 'mcp_servers' in _platform.json: crm, files)"
        ]
        assert trap.connections == 0
        # A reader of the console who is not a designer is not shown the tools.
        reader = ConsoleClient(h.app, h.runtime, "olga", "operator")
        assert reader.http.get("/console/api/mcp/crm/tools").status_code == 403
    finally:
        trap.close()


def test_a_stdio_server_declared_anew_by_a_reload_is_stopped_and_started_anew(
    tmp_path: Path, made: list[Harness]
) -> None:
    binding = {"kind": "mcp", "server": "files", "tools": ["pid"]}
    h = build(tmp_path, "http://127.0.0.1:9/mcp", binding, rules=[call_rule("pid")])
    made.append(h)
    conv, snap = ask(h, "call pid")
    before = pid_of(snap["calls"][0])
    data = platform("http://127.0.0.1:9/mcp")
    data["mcp_servers"]["files"]["env"]["EXTRA"] = {"env": "FILES_TOKEN"}
    write_agent(h.agents_dir, data, name="_platform.json")

    async def reload() -> None:
        h.runtime.reload_agents()

    h.call(reload)
    deadline = time.monotonic() + 10
    while _alive(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(before)
    _, snap = ask(h, "call pid", conv)
    after = pid_of(snap["calls"][-1])
    assert after != before and _alive(after)


def test_a_run_resumed_after_a_restart_keeps_the_tool_list_it_started_with(
    tmp_path: Path, made: list[Harness]
) -> None:
    with http_server() as url:  # its own server: the test grows its list
        binding = {"kind": "mcp", "server": "crm", "tools": "all",
                   "overrides": {"note_text": {"approval": "always"}}}  # fmt: skip
        rules = [call_rule("note_text", {"text": "kept"}), call_rule("grow")]
        h = build(tmp_path, url, binding, rules=rules)
        made.append(h)
        waiting, snap = ask(h, "call note_text")
        assert snap["calls"][0]["state"] == "awaiting_confirmation"
        started_with = {t["name"] for t in run_tools(h, waiting)}
        _, snap = ask(h, "call grow")
        assert snap["calls"][0]["state"] == "answered"
        # A new process reads the run's definition from the store, not from the server.
        h.restart()
        assert h.decide(h.open_call(waiting), "approve").status_code == 200
        snap = h.finish(waiting)
        assert snap["calls"][0]["outcome"]["output"]["content"] == [
            {"type": "text", "text": "noted: kept"}
        ]
        assert {t["name"] for t in run_tools(h, waiting)} == started_with
        assert "fresh" not in started_with


def test_guardrails_and_call_limits_apply_to_a_servers_tools(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    hide = {"name": "hide emails", "on": "output", "action": "redact",
            "when": {"path": "/structuredContent/email", "op": "exists"},
            "fields": ["/structuredContent/email"]}  # fmt: skip
    binding = {"kind": "mcp", "server": "crm", "tools": ["lookup"], "max_calls_per_pass": 1,
               "overrides": {"lookup": {"guardrails": [hide]}}}  # fmt: skip
    twice = {"match": "^both$", "reply": "ok", "calls": [
        {"tool": "lookup", "arguments": {"name": "Al"}},
        {"tool": "lookup", "arguments": {"name": "Bea"}},
    ]}  # fmt: skip
    h = build(tmp_path, url, binding, rules=[RULES[0], twice])
    made.append(h)
    conv, snap = ask(h, "find Ann")
    assert snap["calls"][0]["outcome"]["output"]["structuredContent"] == {
        "name": "Ann",
        "email": "[redacted]",
    }
    assert h.assistant_texts(conv)[-1] == "email [redacted]"
    before = len(seen.calls)
    _, snap = ask(h, "both", conv)
    first, second = snap["calls"][-2:]
    assert first["state"] == "answered"
    assert second["outcome"]["error"]["code"] == "call_limit_reached"
    assert seen.calls[before:] == ["lookup"]
