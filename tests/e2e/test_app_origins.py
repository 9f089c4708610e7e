"""Two MCP servers' views open in one chat, in real Chromium: each runs on its server's own
origin (``hostcall serve --apps-port`` on loopback: ``http://{server}.localhost:PORT``), so a
hostile view that walks the widget's frames (``parent.parent.frames[i]``, and the view in
each, ``frames[i].frames[0]``) reaches the other server's proxy and view as windows only:
reading their documents or storage is a SecurityError — no script put into them, nothing
said through their proxy for the other server — while each view keeps its own storage."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Frame, Page, expect

from hostcall.qa.servers import HostPage, free_port, serve_host_page, start_hostcall
from hostcall.qa.widget import Widget
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, shot
from tests.e2e.flows_helpers import SLOW
from tests.e2e.test_app_views import Site, start, told, view_frame
from tests.support.harness import write_agent
from tests.support.mcp_app_server import http_server

pytestmark = pytest.mark.e2e

#: Run in a view: what it reaches of every frame of the widget (each a view's proxy) and
#: of the view inside each. ``mine``: its own proxy, of its own origin.
WALK = """() => {
  const FORGE = "parent.postMessage({jsonrpc: '2.0', id: 77, method: 'tools/call', "
    + "params: {name: 'add_task', arguments: {title: 'forged'}}}, '*')"
  const widget = window.parent.parent
  const seen = []
  for (let i = 0; i < widget.frames.length; i++) {
    const proxy = widget.frames[i]
    const got = { mine: proxy === window.parent }
    const tryIt = (name, read) => {
      try { got[name] = String(read()) } catch (e) { got[name] = e.name }
    }
    tryIt('proxy', () => proxy.document.body.childElementCount)
    tryIt('view', () => proxy.frames[0].document.getElementById('tasks').textContent)
    if (!got.mine) tryIt('inject', () => {
      const s = proxy.frames[0].document.createElement('script')
      s.textContent = FORGE
      proxy.frames[0].document.body.append(s)
      return 'injected'
    })
    tryIt('storage', () => proxy.frames[0].localStorage.getItem('mine'))
    seen.push(got)
  }
  return seen
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("app-origins")
    with ExitStack() as stack:
        board = stack.enter_context(http_server())
        notes = stack.enter_context(http_server("show_notes"))
        agents = tmp / "agents"
        host = HostPage("", "viewer", port=free_port())
        platform = {"environments": {"dev": {"mcp_servers": ["board", "notes"]}},
                    "mcp_servers": {"board": {"url": board}, "notes": {"url": notes}}}  # fmt: skip
        write_agent(agents, platform, name="_platform.json")
        write_agent(agents, {
            "id": "viewer", "name": "Viewer", "environment": "dev",
            "allowed_origins": [host.origin],
            "model": {"kind": "scripted", "rules": [
                {"match": "(?i)^show the board", "tool": "show_board",
                 "arguments": {"column": "todo"}, "reply": "Here is the board."},
                {"match": "(?i)^show the notes", "tool": "show_notes",
                 "arguments": {"column": "notes"}, "reply": "Here are the notes."},
            ]},
            "tools": [
                {"kind": "mcp", "server": "board", "tools": ["show_board", "add_task"],
                 "apps": {"allow_writes": True}},
                {"kind": "mcp", "server": "notes", "tools": ["show_notes"]},
            ],
        })  # fmt: skip
        hostcall = start_hostcall(tmp, agents=agents, extra=["--apps-port", str(free_port())])
        stack.callback(hostcall.stop)
        page = stack.enter_context(serve_host_page(replace(host, hostcall_url=hostcall.url)))
        yield Site(hostcall, page)


def ready(widget: Widget, tool: str, text: str) -> Frame:
    """Ask for ``tool``'s view, and bring it to ready (its input and result told)."""
    widget.send(text)
    view = widget.call(tool).locator("[data-part=app-view]")
    expect(view).to_have_count(1, timeout=SLOW)
    frame = view_frame(view)
    start(frame)
    expect(view).to_have_attribute("data-state", "ready")
    told(frame)
    return frame


#: Chromium refuses storage to cross-site frames (the widget's too) unless told otherwise;
#: with this it partitions it instead, as other browsers do.
THIRD_PARTY_STORAGE = "--disable-features=TrackingProtection3pcd"


@pytest.fixture(params=["third-party-storage-refused", "third-party-storage-partitioned"])
def chat(request: pytest.FixtureRequest, browser: Browser) -> Iterator[tuple[Page, bool]]:
    """A page in Chromium as the tests launch it (cross-site storage refused), or in one
    that partitions it; and whether storage is the frames' to have."""
    partitioned = request.param.endswith("partitioned")
    own = None
    if partitioned:
        own = browser.browser_type.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, THIRD_PARTY_STORAGE], headless=True
        )
    context = (own or browser).new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page, partitioned
    context.close()
    if own is not None:
        own.close()


STORE = """name => {
  try { localStorage.setItem('mine', name); return localStorage.getItem('mine') }
  catch (e) { return e.name }
}"""


def test_a_view_cannot_reach_another_servers_view(chat: tuple[Page, bool], site: Site) -> None:
    page, partitioned = chat
    page.goto(site.page.url)
    widget = Widget(page, timeout=SLOW).open()
    board = ready(widget, "show_board", "Show the board")
    notes = ready(widget, "show_notes", "Show the notes")
    origins = {f: "{0.scheme}://{0.netloc}".format(urlsplit(f.url)) for f in (board, notes)}
    assert origins[board].startswith("http://board.localhost:"), origins
    assert origins[notes].startswith("http://notes.localhost:"), origins
    # Each view's storage is its own origin's: it works where the browser lets a cross-site
    # frame have storage at all (the widget's own frame fares the same).
    widget_frame = page.frame(url=lambda url: url.startswith(site.hostcall.url))
    assert widget_frame is not None
    in_widget = widget_frame.evaluate(STORE, "widget")
    for frame, name in ((board, "board"), (notes, "notes")):
        assert frame.evaluate(STORE, name) == (name if partitioned else "SecurityError")
        assert in_widget == ("widget" if partitioned else "SecurityError")
    for frame in (board, notes):
        seen: list[dict[str, Any]] = frame.evaluate(WALK)
        assert len(seen) == 2, seen
        (own,) = [s for s in seen if s["mine"]]
        (other,) = [s for s in seen if not s["mine"]]
        # Its own server's proxy: the same origin, its own page.
        assert own["proxy"] == "1", own
        # The other server's proxy and view: windows only.
        assert other == {"mine": False, "proxy": "SecurityError", "view": "SecurityError",
                         "inject": "SecurityError", "storage": "SecurityError"}, other  # fmt: skip
    # Nothing was forged through the board's proxy, and each storage is still its own.
    if partitioned:
        assert board.evaluate("() => localStorage.getItem('mine')") == "board"
        assert notes.evaluate("() => localStorage.getItem('mine')") == "notes"
    assert not any(
        isinstance(m, dict) and m.get("id") == 77 for m in board.evaluate("() => received")
    )
    expect(widget.frame.locator("[data-part=app-prompt]:visible")).to_have_count(0)
    shot(page, "app-origins-two-servers")
