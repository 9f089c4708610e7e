"""The sandbox proxy in Chromium: the widget's origin frames the proxy from the apps origin
(``hostcall serve --apps-port``), the proxy frames a real view read from an MCP server, and
relays JSON-RPC both ways with exact origins; the view has storage of its own origin, cannot
reach the widget's page, and its policy refuses what its resource did not declare."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Page

from hostcall.qa.servers import HostcallServer, free_port, start_hostcall
from tests.e2e.conftest import shot
from tests.support.harness import write_agent
from tests.support.mcp_apps_server import http_server

pytestmark = pytest.mark.e2e
SLOW = 30_000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[HostcallServer, str]]:
    # Another loopback server's address: a real port, never declared by the view.
    undeclared = f"http://127.0.0.1:{free_port()}/"
    with http_server(undeclared=undeclared) as board:
        agents = tmp_path / "agents"
        write_agent(agents, {
            "environments": {"default": {"mcp_servers": ["board"]}},
            "mcp_servers": {"board": {"url": board}},
        }, name="_platform.json")  # fmt: skip
        write_agent(agents, {
            "id": "ops",
            "model": {"kind": "scripted", "rules": [
                {"match": "^echo$", "tool": "echo_view", "arguments": {}, "reply": "done"}]},
            "tools": [{"kind": "mcp", "server": "board", "tools": ["echo_view"]}],
        })  # fmt: skip
        # A plain apps origin (one server here), same-site with the page that frames the
        # proxy below: the view's storage is then first-party, and works in any browser.
        # Origins per server: test_app_origins.py.
        apps = free_port()
        plain = {"HOSTCALL_APPS_ORIGIN": f"http://127.0.0.1:{apps}"}
        server = start_hostcall(tmp_path, agents=agents, extra=["--apps-port", str(apps)],
                                env=plain)  # fmt: skip
        try:
            yield server, f"http://127.0.0.1:{apps}"
        finally:
            server.stop()


def app_of_a_call(server: HostcallServer) -> dict[str, Any]:
    client = httpx.Client(base_url=server.url, headers={"Origin": server.url}, timeout=10)
    opened = client.post("/api/agents/ops/conversations").json()
    auth = {"Authorization": f"Bearer {opened['sessionToken']}"}
    conv = opened["conversationId"]
    assert client.post(f"/api/conversations/{conv}/messages", json={"text": "echo"},
                       headers=auth).status_code == 202  # fmt: skip
    deadline = time.monotonic() + SLOW / 1000
    while time.monotonic() < deadline:
        snap = client.get(f"/api/conversations/{conv}", headers=auth).json()
        if snap["run"]["status"] == "finished":
            app: dict[str, Any] = snap["calls"][0]["app"]
            return app
        time.sleep(0.05)
    raise AssertionError(f"the run did not finish: {snap['run']}")


FRAME = """([proxyUrl, host, apps]) => {
  window.got = [];
  const frame = document.createElement("iframe");
  frame.src = proxyUrl + "?host=" + encodeURIComponent(host);
  frame.style = "width: 400px; height: 200px";
  window.addEventListener("message", (e) => {
    if (e.origin === apps && e.source === frame.contentWindow) window.got.push(e.data);
  });
  document.body.appendChild(frame);
  window.proxy = frame;
}"""


def messages(page: Page, method: str) -> list[dict[str, Any]]:
    page.wait_for_function(f"window.got.some(m => m.method === {json.dumps(method)})",
                           timeout=SLOW)  # fmt: skip
    got: list[dict[str, Any]] = page.evaluate("window.got")
    return [m for m in got if m.get("method") == method]


def test_the_proxy_relays_between_the_widget_and_a_real_view(
    page: Page, served: tuple[HostcallServer, str]
) -> None:
    server, apps = served
    app = app_of_a_call(server)
    assert app["proxyUrl"] == f"{apps}/apps/proxy/ops"
    page.goto(f"{server.url}/healthz")  # a page of the widget's origin, with no policy
    page.set_content("<!doctype html><body></body>")
    page.evaluate(FRAME, [app["proxyUrl"], server.url, apps])
    assert messages(page, "ui/notifications/sandbox-proxy-ready") == [
        {"jsonrpc": "2.0", "method": "ui/notifications/sandbox-proxy-ready", "params": {}}
    ]
    # A view of another origin is never framed: nothing comes of it.
    page.evaluate(
        """([apps]) => window.proxy.contentWindow.postMessage({jsonrpc: "2.0",
        method: "ui/notifications/sandbox-resource-ready",
        params: {viewUrl: "https://evil.example/apps/view/x"}}, apps)""",
        [apps],
    )
    page.evaluate(
        """([apps, viewUrl]) => window.proxy.contentWindow.postMessage({
        jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready",
        params: {viewUrl}}, apps)""",
        [apps, app["viewUrl"]],
    )
    (hello,) = messages(page, "ui/initialize")
    # The view runs on the apps origin with storage of its own, and cannot read the page.
    assert hello["params"] == {"top": "refused", "storage": "v"}
    frames = page.frame_locator("iframe").locator("iframe")
    assert frames.get_attribute("sandbox") == "allow-scripts allow-same-origin allow-forms"
    assert frames.get_attribute("src") == f"{app['viewUrl']}?host={quote(server.url, safe='')}"
    # What the widget sends reaches the view verbatim, and its answer comes back.
    page.evaluate(
        """([apps]) => window.proxy.contentWindow.postMessage(
        {jsonrpc: "2.0", id: 1, result: {hostInfo: {name: "hostcall"}}}, apps)""",
        [apps],
    )
    (echo,) = messages(page, "echo")
    assert echo["params"]["got"] == {"jsonrpc": "2.0", "id": 1,
                                     "result": {"hostInfo": {"name": "hostcall"}}}  # fmt: skip
    # Its undeclared fetch was refused by its policy, never sent.
    (violation,) = messages(page, "violation")
    assert violation["params"]["directive"] == "connect-src"
    assert messages(page, "fetch_failed") and not [
        m for m in page.evaluate("window.got") if m.get("method") == "fetched"
    ]
    shot(page, "apps-proxy-relay")
