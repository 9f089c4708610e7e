"""What the MCP Apps end-to-end tests share: the agent, its platform file, the servers (the
MCP Apps fixture as ``tasks``, the same fixture again as ``rogue`` whose hostile view the agent
shows, a plain MCP server whose tools a view must not reach, Hostcall with its apps origins on
a second port, the host page on localhost), and how to reach a view in its frames.

Frames: the host page (localhost) holds the widget (127.0.0.1:PORT), whose call card holds the
sandbox proxy (its server's apps origin, http://{server}.localhost:APPS_PORT), which holds the
view (the same origin). Playwright reaches each by its frame locator, whatever its origin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import FrameLocator, Locator, Page, expect

from hostcall.qa.servers import (
    HostcallServer,
    HostPage,
    free_port,
    serve_host_page,
    start_hostcall,
    write_agent,
)
from hostcall.qa.widget import Widget
from tests.e2e.flows_helpers import SLOW
from tests.support.apps_fixture import AppsServer, apps_server
from tests.support.mcp_server import Seen, http_server

AGENT_ID = "apps"

RULES: list[dict[str, Any]] = [
    {"match": "(?i)^show the tasks$", "tool": "show_tasks", "arguments": {},
     "reply": "Here are the tasks.", "error_reply": "No tasks: {{ error.code }}"},
    {"match": "(?i)^show the hostile view$", "tool": "show_hostile", "arguments": {},
     "reply": "Shown.", "error_reply": "Not shown: {{ error.code }}"},
    # The app-only tool, named by the model: it was never offered, so it is unknown.
    {"match": "(?i)^refresh them yourself$", "tool": "refresh_tasks", "arguments": {},
     "reply": "Refreshed.", "error_reply": "I cannot: {{ error.code }}"},
    {"match": "(?i)^what do I look at", "reply": "Context: {{ context }}"},
    {"match": "(?i)^tell me more about (?P<id>T-\\d)", "reply": "{{ id }} is on the board."},
]  # fmt: skip

#: The host page's own script: it answers a tool no agent declares (a forged call would run
#: it) and keeps every window message that did not come from the widget's frame.
PAGE_SCRIPT = """
window.forgedRuns = 0
Hostcall('register', 'forged_tool', () => { window.forgedRuns += 1; return {} })
window.foreign = []
addEventListener('message', e => {
  const frame = document.querySelector('[data-part=hostcall-frame]')
  const type = (e.data && e.data.type) || typeof e.data
  if (!frame || e.source !== frame.contentWindow) foreign.push(type)
})
"""


def agent() -> dict[str, Any]:
    return {
        "id": AGENT_ID,
        "name": "Tasks",
        "environment": "dev",
        "greeting": "Hello! Ask me to show the tasks.",
        "page_context": {},
        "tools": [
            {"kind": "mcp", "server": "tasks", "tools": ["show_tasks", "refresh_tasks"]},
            # The hostile view is another server's: the tasks view is out of its reach.
            {"kind": "mcp", "server": "rogue", "tools": ["show_hostile"]},
            {"kind": "mcp", "server": "crm", "tools": ["lookup"]},
        ],
        "model": {"kind": "scripted", "rules": RULES, "fallback": "Ask me to show the tasks."},
    }


def platform(tasks: AppsServer, rogue: AppsServer, crm_url: str) -> dict[str, Any]:
    return {
        "environments": {"dev": {"mcp_servers": ["tasks", "rogue", "crm"]}},
        "mcp_servers": {
            "tasks": {"url": tasks.url},
            "rogue": {"url": rogue.url},
            "crm": {"url": crm_url},
        },
    }


@dataclass
class Stack:
    """The servers one test module runs against."""

    tasks: AppsServer
    rogue: AppsServer
    crm: Seen
    hostcall: HostcallServer
    host: HostPage
    apps_origin: str | None


@contextmanager
def stack(tmp: Path, *, apps: bool = True) -> Iterator[Stack]:
    """The fixture (twice), the plain MCP server, Hostcall (with ``--apps-port`` and its
    ``{server}`` template when ``apps``) and the host page, stopped when the block ends;
    ``apps_origin``: the tasks server's apps origin."""
    with ExitStack() as stack:
        tasks = stack.enter_context(apps_server())
        rogue = stack.enter_context(apps_server())
        seen = Seen()
        crm_url = stack.enter_context(http_server(seen))
        agents = tmp / "agents"
        write_agent(agents, agent())
        (agents / "_platform.json").write_text(json.dumps(platform(tasks, rogue, crm_url)))
        host_port = free_port()
        extra: list[str] = []
        env: dict[str, str] = {}
        apps_origin = None
        if apps:
            apps_port = free_port()
            apps_origin = f"http://tasks.localhost:{apps_port}"
            extra = ["--apps-port", str(apps_port)]
            env = {"HOSTCALL_APPS_ORIGIN": f"http://{{server}}.localhost:{apps_port}"}
        hostcall = start_hostcall(
            tmp, agents=agents, allow_origins=(f"http://localhost:{host_port}",),
            extra=extra, env=env,
        )  # fmt: skip
        stack.callback(hostcall.stop)
        page = HostPage(hostcall.url, AGENT_ID, script=PAGE_SCRIPT, port=host_port)
        host = stack.enter_context(serve_host_page(page))
        yield Stack(tasks, rogue, seen, hostcall, host, apps_origin)


def open_widget(page: Page, where: Stack) -> Widget:
    page.goto(where.host.url)
    return Widget(page, timeout=SLOW).open()


def card_view(card: Locator) -> Locator:
    """The call card's view part (``data-part=app-view``, ``data-state`` loading, ready or
    failed)."""
    return card.locator("[data-part=app-view]")


def view_of(card: Locator) -> FrameLocator:
    """The view's own frame, inside the card's proxy frame."""
    return card.frame_locator("[data-part=app-frame]").frame_locator("iframe")


def ready_view(widget: Widget, tool: str) -> tuple[Locator, FrameLocator]:
    """Wait until the last ``tool`` card's view is ready (the widget's side) and has rendered
    (the view's side); the card and the view."""
    card = widget.wait_for_call(tool, "done")
    expect(card_view(card)).to_have_attribute("data-state", "ready", timeout=SLOW)
    view = view_of(card)
    if tool == "show_tasks":
        expect(view.locator("body")).to_have_attribute("data-state", "ready", timeout=SLOW)
    return card, view


def body_data(view: FrameLocator, name: str) -> str:
    return str(view.locator("body").get_attribute(f"data-{name}", timeout=SLOW) or "")
