"""``hostcall conformance URL`` against Hostcall's own AG-UI endpoint, on both stores: every
case passes, and the site behind the agent's write saw each approved call exactly once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
        ]},
        # An approval that expires soon, for the case that resumes after expiresAt.
        "tools": [_tool(target, "write"), _tool(target, "rush", approval_timeout_seconds=2)],
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
                 "--max-wait", "30", "--strict"],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "9/9 passed", done.stdout
    # Three cases approve a call (after an approval, two runs later, before replays): the
    # site saw three writes, however many times the threads were reloaded or answered.
    writes = [r for r in target.rec.requests if r.raw_path.startswith("/echo/")]
    assert len(writes) == 3, [r.raw_path for r in writes]


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
