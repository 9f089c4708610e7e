"""An apps origin per MCP server (``HOSTCALL_APPS_ORIGIN=http://{server}.apps.testserver``):
each server's views and proxy are served on its own origin and nowhere else (a token of one
server's view opens nothing on another's), the widget page frames its agent's servers'
origins by name, a server whose name is no DNS label shows no view, and ``hostcall check``
says what a plain origin shared by two servers with views, or such a name, would mean."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Harness, write_agent
from tests.support.mcp_apps_server import VIEW_HTML
from tests.support.mcp_apps_server import http_server as apps_server
from tests.system.test_check_command import check_cli
from tests.system.test_mcp_apps_server import WIDGET, ask, build, path_of

TEMPLATE = "http://{server}.apps.testserver"
BOARD = "http://board.apps.testserver"
CRM = "http://crm.apps.testserver"


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    from tests.support.mcp_server import http_server as crm_server

    with apps_server() as board, crm_server() as crm:
        yield board, crm


@pytest.fixture
def h(tmp_path: Path, urls: tuple[str, str]) -> Iterator[Harness]:
    harness = build(tmp_path, urls, apps=TEMPLATE)
    yield harness
    harness.stop()


def test_a_servers_view_and_proxy_are_on_its_own_origin_only(h: Harness) -> None:
    conv, snap = ask(h, "tasks")
    app = snap["calls"][0]["app"]
    assert app["viewUrl"].startswith(f"{BOARD}/apps/view/")
    assert app["proxyUrl"] == f"{BOARD}/apps/proxy/ops"
    r = h.http.get(app["viewUrl"], params={"host": WIDGET})
    assert r.status_code == 200 and r.text == VIEW_HTML
    policy = r.headers["content-security-policy"]
    assert policy.endswith(f"frame-ancestors {BOARD} {WIDGET} http://localhost:8001")
    assert r.headers["origin-agent-cluster"] == "?1"
    # The board's token on the crm's origin (a server of the same agent), on an origin of
    # no server, on the template's bare suffix, on the widget's: nothing.
    path = path_of(app["viewUrl"])
    for elsewhere in (CRM, "http://nobody.apps.testserver", "http://apps.testserver", ""):
        r = h.http.get(f"{elsewhere}{path}")
        assert r.status_code == 404 and VIEW_HTML not in r.text, elsewhere
    # An agent's proxy is served on the origins of its own servers only.
    assert h.http.get(app["proxyUrl"], params={"host": WIDGET}).status_code == 200
    assert h.http.get(f"{CRM}/apps/proxy/ops", params={"host": WIDGET}).status_code == 200
    r = h.http.get("http://nobody.apps.testserver/apps/proxy/ops", params={"host": WIDGET})
    assert r.status_code == 404
    # Another server's apps origin is no widget origin: never the proxy's parent.
    r = h.http.get(app["proxyUrl"], params={"host": CRM})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "host"
    # The widget's pages and API are on no server's origin.
    for path in ("/widget/ops", "/healthz", f"/api/conversations/{conv.id}"):
        assert h.http.get(f"{BOARD}{path}", headers=conv.auth).status_code == 404, path


def test_the_widget_frames_its_agents_servers_origins_by_name(h: Harness) -> None:
    page = h.http.get("/widget/ops", params={"origin": "http://localhost:8001"})
    csp = page.headers["content-security-policy"]
    assert f"; frame-src {BOARD} {CRM}; " in csp, csp
    assert "*" not in csp.split("frame-src", 1)[1].split(";", 1)[0]


def test_a_plain_origin_is_every_servers(tmp_path: Path, urls: tuple[str, str]) -> None:
    h = build(tmp_path, urls, apps="http://apps.testserver")
    try:
        _, snap = ask(h, "tasks")
        assert snap["calls"][0]["app"]["proxyUrl"] == "http://apps.testserver/apps/proxy/ops"
        assert h.http.get(snap["calls"][0]["app"]["viewUrl"]).status_code == 200
        csp = h.http.get("/widget/ops").headers["content-security-policy"]
        assert "; frame-src http://apps.testserver; " in csp, csp
    finally:
        h.stop()


def platform(**servers: str) -> dict[str, Any]:
    return {
        "environments": {"default": {"mcp_servers": sorted(servers)}},
        "mcp_servers": {name: {"url": url} for name, url in servers.items()},
    }


def viewer(*servers: str, tools: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": "ops",
        "model": {"kind": "scripted", "rules": [
            {"match": "^tasks$", "tool": "show_tasks", "arguments": {}, "reply": "done"}]},
        "tools": [{"kind": "mcp", "server": s, "tools": tools or ["show_tasks"]}
                  for s in servers],
    }  # fmt: skip


def test_a_server_whose_name_is_no_label_shows_no_view(tmp_path: Path) -> None:
    with apps_server() as url:
        agents = tmp_path / "agents"
        write_agent(agents, platform(Board_1=url), name="_platform.json")
        write_agent(agents, viewer("Board_1"))
        h = Harness(tmp_path, agents, apps_origin=TEMPLATE)
        try:
            _, snap = ask(h, "tasks")
            (call,) = snap["calls"]
            assert call["state"] == "answered"
            assert call["app"] == {"unavailable": "server_name_not_a_label"}
            page = h.http.get("/widget/ops")
            assert "frame-src" not in page.headers["content-security-policy"]
        finally:
            h.stop()
        done = check_cli(agents, {"HOSTCALL_APPS_ORIGIN": TEMPLATE})
        assert done.returncode == 1
        assert "MCP server 'Board_1' declares views, but its name is not a DNS label" in (
            done.stderr
        )
        assert "rename it in _platform.json" in done.stderr


def test_check_warns_when_servers_with_views_share_a_plain_origin(tmp_path: Path) -> None:
    with ExitStack() as stack:
        board, notes = (stack.enter_context(apps_server()) for _ in range(2))
        write_agent(tmp_path, platform(board=board, notes=notes), name="_platform.json")
        write_agent(tmp_path, viewer("board", "notes"))
        shared = check_cli(tmp_path, {"HOSTCALL_APPS_ORIGIN": "https://apps.example.com"})
        assert shared.returncode == 0, shared.stderr
        (line,) = shared.stderr.splitlines()
        assert line.startswith("warning: MCP servers 'board', 'notes' declare views and share "
                               "the one apps origin https://apps.example.com")  # fmt: skip
        assert "https://{server}.apps.example.com" in line
        own = check_cli(tmp_path, {"HOSTCALL_APPS_ORIGIN": "https://{server}.apps.example.com"})
        assert own.returncode == 0 and own.stderr == "", own.stderr
        bad = check_cli(tmp_path, {"HOSTCALL_APPS_ORIGIN": "https://apps.{server}.example.com"})
        assert bad.returncode == 1 and "HOSTCALL_APPS_ORIGIN" in bad.stderr
        # One server with views on a plain origin: nothing to reach.
        write_agent(tmp_path, viewer("board"))
        alone = check_cli(tmp_path, {"HOSTCALL_APPS_ORIGIN": "https://apps.example.com"})
        assert alone.returncode == 0 and alone.stderr == "", alone.stderr
