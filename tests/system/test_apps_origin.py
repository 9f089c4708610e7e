"""The apps origin as a user sets it up: ``hostcall serve --apps-port`` listening on a
second port of the same process (the widget's routes on one, the views' on the other), a
bad ``HOSTCALL_APPS_ORIGIN`` refused at start, and ``hostcall check`` warning of views an
agent's MCP servers declare that no apps origin would show."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hostcall.settings import ROOT
from tests.support.harness import write_agent
from tests.support.mcp_apps_server import http_server as apps_server
from tests.system.test_check_command import check_cli
from tests.system.test_serving import free_port


@contextlib.contextmanager
def serving(tmp_path: Path, *args: str) -> Iterator[tuple[str, str]]:
    port, apps, log = free_port(), free_port(), tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "hostcall", "serve", "--port", str(port),
             "--apps-port", str(apps), "--db", str(tmp_path / "h.db"), *args],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    widget, views = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{apps}"
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{widget}/healthz", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"server did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield widget, views
    finally:
        process.kill()
        process.wait(5)


def test_serve_listens_on_the_apps_port_for_views_only(tmp_path: Path) -> None:
    with serving(tmp_path) as (widget, views):
        # On loopback the apps origin is a template, http://{server}.localhost:PORT:
        # browsers take *.localhost for loopback; this client says the name itself.
        board = {"Host": f"board.localhost:{views.rsplit(':', 1)[1]}"}
        proxy = httpx.get(f"{views}/apps/proxy", params={"host": widget}, headers=board)
        assert proxy.status_code == 200
        assert f"frame-ancestors {widget}" in proxy.headers["content-security-policy"]
        # The widget's routes are not on the apps port, and the views' not on the widget's.
        assert httpx.get(f"{views}/widget/planner", headers=board).status_code == 404
        assert httpx.get(f"{views}/healthz", headers=board).status_code == 404
        r = httpx.post(f"{views}/api/agents/planner/conversations",
                       headers={"Origin": widget, **board}, timeout=5)  # fmt: skip
        assert r.status_code == 404
        assert httpx.get(f"{widget}/apps/proxy", params={"host": widget}).status_code == 404
        assert httpx.get(f"{widget}/widget/planner", timeout=5).status_code == 200
        # The port's bare address names no server: no view there.
        assert httpx.get(f"{views}/apps/proxy", params={"host": widget}).status_code == 404


@pytest.mark.parametrize(
    ("origin", "said"),
    [
        ("https://apps.example.com/views", "no path"),
        ("https://apps.{server}.example.com", "the first label of the host"),
    ],
)
def test_a_bad_apps_origin_is_refused_at_start(tmp_path: Path, origin: str, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hostcall", "serve", "--port", str(free_port()),
         "--db", str(tmp_path / "h.db")],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
        env={**os.environ, "HOSTCALL_APPS_ORIGIN": origin},
    )  # fmt: skip
    assert done.returncode == 1
    assert "HOSTCALL_APPS_ORIGIN" in done.stderr and said in done.stderr


def test_check_warns_of_views_no_apps_origin_would_show(tmp_path: Path) -> None:
    with apps_server() as url:
        write_agent(tmp_path, {
            "environments": {"default": {"mcp_servers": ["board"]}},
            "mcp_servers": {"board": {"url": url}},
        }, name="_platform.json")  # fmt: skip
        write_agent(tmp_path, {
            "id": "ops",
            "model": {"kind": "scripted", "rules": []},
            "tools": [{"kind": "mcp", "server": "board", "tools": ["show_tasks", "plain_view"]}],
        })  # fmt: skip
        done = check_cli(tmp_path, {"HOSTCALL_APPS_ORIGIN": ""})
        assert done.returncode == 0, done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith("warning: ops: MCP server 'board' declares views for ")
        assert "show_tasks, plain_view" in line and "HOSTCALL_APPS_ORIGIN" in line
        quiet = check_cli(tmp_path, {"HOSTCALL_APPS_ORIGIN": "https://apps.example.com"})
        assert quiet.returncode == 0 and quiet.stderr == ""
