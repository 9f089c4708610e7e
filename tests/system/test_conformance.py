"""``hostcall conformance URL`` against Hostcall's own AG-UI endpoint, on both stores: every
case passes, and the site behind the agent's write saw each approved call exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hostcall.qa.servers import serve_in_thread
from hostcall.settings import Settings
from tests.support.databases import store_url
from tests.support.harness import SECRET, write_agent
from tests.support.live import live_server
from tests.support.loopback import Live as Target
from tests.support.loopback import live_server as target_server


def _tool(target: Target, name: str, **policy: Any) -> dict[str, Any]:
    return {
        "name": name, "kind": "http", "description": "Writes a task to the site.",
        "effect": "write", "approval": "always",
        "ai_params": [{"key": "title", "type": "string", "required": True}],
        "request": {"method": "POST", "url": f"{target.base}/echo/{name}",
                    "body": {"title": "{{ $fromAI.title }}"}},
        **policy,
    }  # fmt: skip


def _agent(target: Target) -> dict[str, Any]:
    rule = {"reply": "done", "error_reply": "error {{ error.code }}"}
    return {
        "id": "desk", "environment": "dev",
        "model": {"kind": "scripted", "fallback": "nothing", "rules": [
            {"match": "create (?P<t>.+)", "tool": "write", "arguments": {"title": "{{ t }}"},
             **rule},
            {"match": "hurry (?P<t>.+)", "tool": "rush", "arguments": {"title": "{{ t }}"},
             **rule},
            {"match": "slowly (?P<t>.+)", "tool": "slow", "arguments": {"title": "{{ t }}"},
             **rule},
        ]},
        # An approval that expires soon, for the case that resumes after expiresAt; a write
        # the site answers after 5 s (its /slow takes GET only), for the case that aborts it.
        "tools": [_tool(target, "write"), _tool(target, "rush", approval_timeout_seconds=2),
                  _tool(target, "slow", deadline_seconds=30,
                        request={"method": "GET", "url": f"{target.base}/slow"})],
    }  # fmt: skip


@pytest.fixture
def target() -> Iterator[Target]:
    with target_server() as live:
        yield live


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_hostcall_passes_its_own_conformance_suite(
    tmp_path: Path, target: Target, store: str
) -> None:
    agents = tmp_path / "agents"
    write_agent(agents, {"environments": {"dev": {"allowed_hosts": [target.host]}}},
                name="_platform.json")  # fmt: skip
    write_agent(agents, _agent(target))
    with store_url(store) as url:
        extra: dict[str, Any] = {} if url is None else {"database_url": url}
        settings = Settings(agents_dir=agents, db_path=tmp_path / "hostcall.db",
                            secret_keys=SECRET, sweep_seconds=0.05, environ={},
                            **extra)  # fmt: skip
        with live_server(settings) as live:
            done = subprocess.run(
                [sys.executable, "-m", "hostcall", "conformance", f"{live.url}/agui/desk",
                 "--prompt", "create a task", "--expiring-prompt", "hurry a task",
                 "--write-prompt", "slowly a task",
                 "--max-wait", "30", "--strict"],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "10/10 passed", done.stdout
    # Three cases approve a call (after an approval, two runs later, before replays): the
    # site saw three writes, however many times the threads were reloaded or answered.
    writes = [r for r in target.rec.requests if r.raw_path.startswith("/echo/")]
    assert len(writes) == 3, [r.raw_path for r in writes]
    # The aborted write reached the site once, and was never sent again.
    assert target.rec.hits["slow"] == 1


def test_the_suite_fails_an_endpoint_that_breaks_a_guarantee(tmp_path: Path) -> None:
    """A case must be able to fail: against an endpoint that never interrupts, each case
    says so, and the command exits 1."""
    with target_server() as plain:
        done = subprocess.run(
            [sys.executable, "-m", "hostcall", "conformance", f"{plain.base}/echo/agui",
             "--case", "a duplicate resume is refused"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL" in done.stdout and "did not end with a tool_call interrupt" in done.stdout


class _Forgetful:
    """An AG-UI endpoint with one approval-gated write that forgets how an aborted run's
    write ended: a reload says nothing (``silent``), runs it again (``retry``), or says only
    that it was stopped (``stopped``)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await Starlette(routes=[Route("/agui", self.run, methods=["POST"])])(scope, receive, send)

    async def run(self, request: Request) -> Response:
        body = await request.json()
        ids = {"threadId": body["threadId"], "runId": body["runId"]}
        events: list[dict[str, Any]] = [{"type": "RUN_STARTED", **ids}]
        said = body["messages"][-1]["role"] == "user" and "resume" not in body
        call = [{"type": "TOOL_CALL_START", "toolCallId": "k1", "toolCallName": "write"},
                {"type": "TOOL_CALL_END", "toolCallId": "k1"}]  # fmt: skip
        outcome: dict[str, Any] = {"type": "success"}
        if said:
            events += call
            outcome = {"type": "interrupt", "interrupts": [
                {"id": "i1", "reason": "tool_call", "toolCallId": "k1"}]}  # fmt: skip
        elif "resume" not in body and self.mode == "retry":
            events += [*call, {"type": "TOOL_CALL_RESULT", "messageId": "m1",
                               "toolCallId": "k1", "content": "{}"}]  # fmt: skip
        elif "resume" not in body and self.mode == "stopped":
            error = {"error": {"code": "cancelled", "message": "This action was stopped."}}
            events.append({"type": "TOOL_CALL_RESULT", "messageId": "m1", "toolCallId": "k1",
                           "content": json.dumps(error)})  # fmt: skip
        events.append({"type": "RUN_FINISHED", **ids, "outcome": outcome})
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
        return Response(text, media_type="text/event-stream")


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("silent", "said nothing about the interrupted write"),
        ("retry", "ran the interrupted write again"),
        ("stopped", "ended without saying it may have completed"),
    ],
)
def test_the_interrupted_write_case_fails_an_endpoint_that_forgets_it(mode: str, said: str) -> None:
    with serve_in_thread(_Forgetful(mode)) as port:
        done = subprocess.run(
            [sys.executable, "-m", "hostcall", "conformance", f"http://127.0.0.1:{port}/agui",
             "--case", "an interrupted write may have completed", "--max-wait", "1"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL" in done.stdout and said in done.stdout, done.stdout
