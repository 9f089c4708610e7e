"""The pytest plugin (entry point ``pytest11: hostcall``): fixtures for testing a site that
embeds Hostcall, in real Chromium. See docs/testing.md for a complete example.

    hostcall_agent        override (or mark ``@pytest.mark.hostcall_agent(...)``): the agent
                          under test, a dict or a path (file or directory); default: the demo
    hostcall_server       ``hostcall serve`` on a free port of 127.0.0.1, allowing the host page
    host_page             a page on http://localhost:<port> with the snippet (another origin)
    hostcall_browser      Chromium (module-scoped; $HOSTCALL_CHROMIUM, else /usr/bin/chromium);
                          with WebMCP on for a module marked ``hostcall_webmcp``
    hostcall_page         a fresh browser context and page per test
    widget                ``Widget`` on ``host_page``, opened and idle
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hostcall.assets import DEMO_AGENTS
from hostcall.qa.servers import (
    HostcallServer,
    HostPage,
    free_port,
    serve_host_page,
    start_hostcall,
    write_agent,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

    from hostcall.qa.widget import Widget

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: WebMCP (``document.modelContext``, Playwright's ``page.webmcp``): behind a flag in
#: Chromium 156. Without it the loader offers the same shape to the page.
WEBMCP_ARGS = ["--enable-features=WebMCP"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "hostcall_agent(agent): the agent for the hostcall fixtures (dict or path)"
    )
    config.addinivalue_line(
        "markers", "hostcall_snippet(**attrs): data-* attributes of the host page's snippet"
    )
    config.addinivalue_line(
        "markers", "hostcall_webmcp: the module's Chromium runs with WebMCP on (page.webmcp)"
    )


def launch_chromium(playwright: Playwright, *, webmcp: bool = False) -> Browser:
    """Chromium as the fixtures launch it: $HOSTCALL_CHROMIUM, else Debian's, headless;
    ``webmcp``: with WebMCP on, so the page's ``document.modelContext`` is the browser's."""
    executable = os.environ.get("HOSTCALL_CHROMIUM") or "/usr/bin/chromium"
    return playwright.chromium.launch(
        executable_path=executable if Path(executable).exists() else None,
        args=CHROMIUM_ARGS + (WEBMCP_ARGS if webmcp else []),
        headless=True,
    )


def agent_id(agent: Mapping[str, Any] | Path) -> str:
    """The id of a dict agent, an agent file, or the first agent of a directory."""
    if isinstance(agent, Mapping):
        return str(agent["id"])
    files = [agent] if agent.is_file() else sorted(
        p for p in agent.glob("*.json") if not p.name.startswith("_")
    )  # fmt: skip
    assert files, f"{agent}: no agent file"
    return str(json.loads(files[0].read_text(encoding="utf-8"))["id"])


@pytest.fixture
def hostcall_agent(request: pytest.FixtureRequest) -> Mapping[str, Any] | Path:
    """The agent under test: the ``hostcall_agent`` mark's argument, else the demo planner."""
    mark = request.node.get_closest_marker("hostcall_agent")
    if mark is not None:
        agent = mark.args[0]
        return Path(agent) if isinstance(agent, str) else agent
    return DEMO_AGENTS


@pytest.fixture
def hostcall_snippet(request: pytest.FixtureRequest) -> dict[str, str]:
    """``data-*`` attributes for the snippet (besides ``data-agent``), from the mark."""
    mark = request.node.get_closest_marker("hostcall_snippet")
    return {k: str(v) for k, v in (mark.kwargs if mark else {}).items()}


@pytest.fixture
def hostcall_server(
    tmp_path: Path, hostcall_agent: Mapping[str, Any] | Path
) -> Iterator[HostcallServer]:
    """``hostcall serve`` with the agent, allowing the host page's origin (reserved here)."""
    agents = write_agent(tmp_path / "agents", hostcall_agent)
    host_port = free_port()
    server = start_hostcall(
        tmp_path, agents=agents, allow_origins=(f"http://localhost:{host_port}",)
    )
    server.host_port = host_port  # where host_page will listen
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def host_page(
    hostcall_server: HostcallServer,
    hostcall_agent: Mapping[str, Any] | Path,
    hostcall_snippet: dict[str, str],
) -> Iterator[HostPage]:
    """The host page: the README's snippet on ``http://localhost:<port>/``. Register
    handlers with ``page.evaluate("Hostcall('register', 'name', async (input) => ...)")``
    or set ``host_page.script`` before loading the page."""
    page = HostPage(
        hostcall_server.url,
        agent_id(hostcall_agent),
        snippet=hostcall_snippet,
        port=hostcall_server.host_port or 0,
    )
    with serve_host_page(page) as served:
        yield served


@pytest.fixture(scope="module")
def hostcall_browser(request: pytest.FixtureRequest) -> Iterator[Browser]:
    # Module-scoped, not session-scoped: Playwright's sync API runs an event loop on the main
    # thread while it is open, and async tests collected after it could not run.
    from playwright.sync_api import sync_playwright

    webmcp = request.node.get_closest_marker("hostcall_webmcp") is not None
    with sync_playwright() as p:
        browser = launch_chromium(p, webmcp=webmcp)
        yield browser
        browser.close()


@pytest.fixture
def hostcall_page(hostcall_browser: Browser) -> Iterator[Page]:
    context = hostcall_browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def widget(hostcall_page: Page, host_page: HostPage) -> Widget:
    """The widget on the host page, opened and ready for a message."""
    from hostcall.qa.widget import Widget

    hostcall_page.goto(host_page.url)
    return Widget(hostcall_page).open()
