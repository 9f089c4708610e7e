"""A stdio MCP server under faults: a result past the bound, a call given up on, the command
killed mid-call (with a helper process holding its pipes), and what it writes to stderr.

Each test starts the SDK's own server as the platform's command (a subprocess) and asks two
agents of one process, so that what one agent's call did to the shared session is seen by
the other's next run.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hostcall.blocks.mcp.pool import CONNECT_SECONDS
from tests.support.harness import Conv, Harness, write_agent
from tests.support.mcp_server import ROOT, stdio_command

TOKEN = "stdio-sekrit-token-0815"
ERROR_REPLY = "error {{ error.code }}: {{ error.message }}"
# Far past what a test waits: a call that ends sooner was not waited out.
DEADLINE = 300


def rule(tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"match": f"^call {tool}$", "tool": tool, "arguments": arguments or {},
            "reply": "ok", "error_reply": ERROR_REPLY}  # fmt: skip


def build(
    tmp_path: Path, made: list[Harness], *, deadlines: dict[str, float], **server: Any
) -> Harness:
    """Agents ``ops`` (the tools named in ``deadlines``) and ``desk`` (``pid``), both on the
    stdio server ``files``."""
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {"dev": {"mcp_servers": ["files"]}},
        "allowed_env": ["FILES_TOKEN"],
        "mcp_servers": {"files": {"command": stdio_command(), "cwd": str(ROOT),
                                  "env": {"CRM_TOKEN": {"env": "FILES_TOKEN"}}, **server}},
    }, name="_platform.json")  # fmt: skip
    arguments = {"slow": {"seconds": DEADLINE}, "huge": {"kilobytes": 3000}}
    rules = [rule(name, arguments.get(name)) for name in ["pid", *deadlines]]
    overrides = {name: {"deadline_seconds": s} for name, s in deadlines.items()}
    write_agent(directory, {
        "id": "ops", "environment": "dev", "model": {"kind": "scripted", "rules": rules},
        "tools": [{"kind": "mcp", "server": "files", "tools": ["pid", *deadlines],
                   "overrides": overrides}],
    })  # fmt: skip
    write_agent(directory, {
        "id": "desk", "environment": "dev", "model": {"kind": "scripted", "rules": [rule("pid")]},
        "tools": [{"kind": "mcp", "server": "files", "tools": ["pid"]}],
    })  # fmt: skip
    h = Harness(tmp_path, directory, environ={"FILES_TOKEN": TOKEN})
    made.append(h)
    return h


def until(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """``check()``'s first truthy answer; the ceiling is for a loaded machine, not a wait."""
    ceiling = time.monotonic() + timeout
    while not (answer := check()):
        assert time.monotonic() < ceiling, f"not within {timeout} s: {what}"
        time.sleep(0.02)
    return answer


def ask(h: Harness, conv: Conv, text: str) -> dict[str, Any]:
    """The conversation's snapshot once the run the message started has ended."""
    h.say(conv, text)
    return dict(until(lambda: _ended(h.snapshot(conv)), f"the run for {text!r} ends"))


def _ended(snap: dict[str, Any]) -> dict[str, Any] | None:
    return snap if snap["run"]["status"] in ("finished", "failed") else None


def pid_of(snap: dict[str, Any]) -> int:
    call = snap["calls"][-1]
    assert "output" in call["outcome"], call["outcome"]
    return int(call["outcome"]["output"]["content"][0]["text"])


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def tools_of_run(h: Harness, conv: Conv) -> set[str]:
    run = h.call(h.runtime.store.get_run, h.snapshot(conv)["run"]["runId"])
    assert run is not None
    return {t["name"] for t in run.agent["tools"] if "tool" in t}


def test_a_result_past_the_bound_fails_the_call_and_the_next_run_has_a_new_session(
    tmp_path: Path, made: list[Harness]
) -> None:
    h = build(tmp_path, made, deadlines={"huge": DEADLINE}, max_message_mb=1)
    ops = h.conversation("ops")
    first = pid_of(ask(h, ops, "call pid"))
    started = time.monotonic()
    snap = ask(h, ops, "call huge")  # 3 MB of text in one message
    assert time.monotonic() - started < DEADLINE / 10  # not waited out
    error = h.model_error(snap["calls"][-1])
    assert error["code"] == "block_failed"
    assert error["message"] == (
        "The request failed: the MCP server 'files' sent a message over 1 MB (its "
        "'max_message_mb'); it was not read, and the server was started again"
    )
    until(lambda: not alive(first), "the command that sent it is stopped")
    # Another agent's next run is given the server's tools, by a command started anew.
    desk = h.conversation("desk")
    snap = ask(h, desk, "call pid")
    assert tools_of_run(h, desk) == {"pid"}
    assert pid_of(snap) != first


def test_a_call_given_up_on_replaces_the_session_it_held(
    tmp_path: Path, made: list[Harness]
) -> None:
    h = build(tmp_path, made, deadlines={"slow": 0.5})
    ops = h.conversation("ops")
    first = pid_of(ask(h, ops, "call pid"))
    snap = ask(h, ops, "call slow")
    assert h.model_error(snap["calls"][-1])["message"] == "The request failed: timeout after 0.5 s"
    # Its answer may still be coming down the pipe every call shares: that command is
    # stopped, and the next run is answered by a new one.
    until(lambda: not alive(first), "the session given up on is stopped")
    desk = h.conversation("desk")
    snap = ask(h, desk, "call pid")
    assert tools_of_run(h, desk) == {"pid"}
    assert pid_of(snap) != first


def test_a_killed_server_fails_its_call_in_flight_at_once_and_stops_what_it_started(
    tmp_path: Path, made: list[Harness]
) -> None:
    h = build(tmp_path, made, deadlines={"helper": 30, "slow": DEADLINE})
    ops = h.conversation("ops")
    first = pid_of(ask(h, ops, "call pid"))
    # A helper that inherited the command's stdin and stdout: the pipes stay open after the
    # command dies, so the end of its output never comes.
    helper = pid_of(ask(h, ops, "call helper"))
    assert alive(helper)
    h.say(ops, "call slow")
    until(lambda: len(calls := h.snapshot(ops)["calls"]) == 3 and calls[-1]["state"] ==
          "dispatched", "the slow call is running")  # fmt: skip
    os.kill(first, signal.SIGKILL)
    started = time.monotonic()
    snap = until(lambda: _ended(h.snapshot(ops)), "the call in flight fails")
    assert time.monotonic() - started < DEADLINE / 10  # not waited out
    error = h.model_error(snap["calls"][-1])
    assert error == {
        "code": "block_failed",
        "message": "The request failed: the MCP server 'files' is unavailable "
        "(the command exited (killed by SIGKILL))",
    }
    until(lambda: not alive(helper), "what the command started is stopped with it")
    # A run that starts right after is given the server's tools, by a command started anew.
    desk = h.conversation("desk")
    snap = ask(h, desk, "call pid")
    assert tools_of_run(h, desk) == {"pid"}
    assert pid_of(snap) not in (first, helper)


def test_a_run_starting_as_the_server_dies_is_given_its_tools_by_a_new_session(
    tmp_path: Path, made: list[Harness]
) -> None:
    h = build(tmp_path, made, deadlines={})
    first = pid_of(ask(h, h.conversation("ops"), "call pid"))
    agents = h.runtime.engine.agents

    async def kill_then_start_a_run() -> set[str]:
        # Killed, and a run's tool list asked for before this loop has read the end of the
        # command's output: the list goes to a session that is already gone.
        os.kill(first, signal.SIGKILL)
        frozen = await agents.freeze(agents.loaded["desk"])
        return {t["name"] for t in frozen.source["tools"] if "tool" in t}

    assert h.call(kill_then_start_a_run) == {"pid"}
    desk = h.conversation("desk")
    assert pid_of(ask(h, desk, "call pid")) != first


def test_the_servers_stderr_is_logged_under_its_name_with_its_secrets_redacted(
    tmp_path: Path, made: list[Harness], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hostcall.mcp")
    h = build(tmp_path, made, deadlines={"complain": 30})
    snap = ask(h, h.conversation("ops"), "call complain")
    assert snap["calls"][-1]["outcome"]["output"]["content"][0]["text"] == "complained"

    def stderr_lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "hostcall.mcp"]

    until(lambda: any("RuntimeError" in line for line in stderr_lines()), "the traceback")
    lines = stderr_lines()
    assert "MCP server 'files': Traceback (most recent call last):" in lines
    assert "MCP server 'files': RuntimeError: could not log in with [redacted]" in lines
    assert TOKEN not in caplog.text


def test_a_command_that_cannot_start_fails_fast_and_the_log_says_why(
    tmp_path: Path, made: list[Harness], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hostcall.mcp")
    code = "import sys; print('cannot read files.conf', file=sys.stderr); sys.exit(2)"
    h = build(tmp_path, made, deadlines={}, command=[sys.executable, "-c", code])
    desk = h.conversation("desk")
    started = time.monotonic()
    snap = ask(h, desk, "call pid")
    assert time.monotonic() - started < CONNECT_SECONDS  # not waited out
    assert tools_of_run(h, desk) == set()
    assert snap["calls"][-1]["outcome"]["error"]["code"] == "unknown_tool"

    def said(text: str) -> bool:
        return any(text in r.getMessage() for r in caplog.records)

    until(lambda: said("MCP server 'files': cannot read files.conf"), "the command's stderr")
    assert said("agent desk: MCP server 'files' left out of a run: the MCP server 'files' is "
                "unavailable: the command exited (status 2)")  # fmt: skip
