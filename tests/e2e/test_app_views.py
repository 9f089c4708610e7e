"""The widget's host side of an MCP Apps view in real Chromium, with a hand-made view that
a test drives step by step (tests/support/app_view.html): nothing reaches the view before it
says it is initialized, and its input and result do after (again after a reload); a message
from any window but the view's proxy, or any origin but the apps origin, is dropped; the
view's message is sent only when the visitor says so, a link opened only when they do; a view
that never starts says so while the text result stays. The official SDK's views, and what a
hostile one tries, are tests/e2e/test_mcp_apps*.py's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from playwright.sync_api import Browser, Frame, Locator, Page, expect

from hostcall.qa.servers import (
    HostcallServer,
    HostPage,
    free_port,
    serve_host_page,
    start_hostcall,
)
from hostcall.qa.widget import Widget
from tests.e2e.conftest import shot
from tests.e2e.flows_helpers import SLOW
from tests.e2e.test_end_user import phone_page
from tests.e2e.test_ui import audit, widget_frame
from tests.support.harness import write_agent
from tests.support.mcp_app_server import http_server

pytestmark = pytest.mark.e2e

SHOW = "Show the board"
FROM_VIEW = "From the view: what is next?"


@dataclass(frozen=True)
class Site:
    """Hostcall with an apps origin on a second port, and a page on localhost that embeds
    its ``viewer`` agent, whose one tool (the board server's ``show_board``) has a view."""

    hostcall: HostcallServer
    page: HostPage


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("app-views")
    with http_server() as url:
        agents = tmp / "agents"
        host = HostPage("", "viewer", port=free_port())
        platform = {"environments": {"dev": {"mcp_servers": ["board"]}},
                    "mcp_servers": {"board": {"url": url}}}  # fmt: skip
        write_agent(agents, platform, name="_platform.json")
        write_agent(agents, {
            "id": "viewer", "name": "Viewer", "environment": "dev",
            "allowed_origins": [host.origin],
            "model": {"kind": "scripted", "rules": [
                {"match": f"(?i)^{SHOW}", "tool": "show_board", "arguments": {"column": "todo"},
                 "reply": "Here is the board."},
                {"match": "(?i)^from the view", "reply": "Heard the view."},
            ]},
            "tools": [{"kind": "mcp", "server": "board", "tools": ["show_board", "add_task"],
                       "apps": {"allow_writes": True}}],
        })  # fmt: skip
        hostcall = start_hostcall(tmp, agents=agents, extra=["--apps-port", str(free_port())])
        try:
            with serve_host_page(replace(host, hostcall_url=hostcall.url)) as page:
                yield Site(hostcall, page)
        finally:
            hostcall.stop()


def open_chat(page: Page, site: Site) -> Widget:
    page.goto(site.page.url)
    return Widget(page, timeout=SLOW).open()


def shown(page: Page, site: Site, *, send: bool = True) -> tuple[Widget, Locator]:
    """The chat with the board shown (asked for now, or restored), and its view's element."""
    widget = open_chat(page, site)
    if send:
        widget.send(SHOW)
    view = widget.call("show_board").locator("[data-part=app-view]")
    expect(view).to_have_count(1, timeout=SLOW)
    return widget, view


def view_frame(view: Locator) -> Frame:
    """The view's own frame, inside the proxy's, once its script has run."""
    proxy = view.locator("[data-part=app-frame]").element_handle(timeout=SLOW).content_frame()
    assert proxy is not None
    inner = proxy.locator("iframe").element_handle(timeout=SLOW).content_frame()
    assert inner is not None
    inner.wait_for_function("() => window.initialize", timeout=SLOW)
    return inner


def methods(frame: Frame) -> list[str]:
    """What the view was sent, in order: each notification's method, each answer as `answer`."""
    return list(frame.evaluate("() => received.map(m => m.method || 'answer')"))


def ping(frame: Frame) -> None:
    """A round trip through the proxy: what the widget posted before answering it has
    arrived, and every message posted to the widget before it has been handled."""
    assert frame.evaluate("() => request('ping')")["result"] == {}


def start(frame: Frame) -> dict[str, Any]:
    """The handshake, as the view makes it: the answer to its ui/initialize, then
    `initialized`; returns the answer."""
    answer: dict[str, Any] = frame.evaluate("() => window.initialize")
    frame.evaluate("() => notify('ui/notifications/initialized')")
    return answer


def press(page: Page, button: Locator) -> None:
    """Press a prompt's button by the keyboard, as a visitor without a pointer does."""
    button.focus()
    page.keyboard.press("Enter")


def told(frame: Frame) -> list[dict[str, Any]]:
    """The tool's input and result, once the view has both (in the order they came)."""
    frame.wait_for_function(
        "() => received.some(m => m.method === 'ui/notifications/tool-result')", timeout=SLOW
    )
    sent = frame.evaluate("() => received")
    return [m for m in sent if m.get("method", "").startswith("ui/notifications/tool-")]


def test_the_view_is_told_nothing_before_it_is_initialized_then_its_input_and_result(
    page: Page, site: Site
) -> None:
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url.rsplit("/", 1)[-1].split("?")[0]))
    widget, view = shown(page, site)
    frame = view_frame(view)
    expect(view).to_have_attribute("data-state", "loading")
    expect(view.locator("[data-part=app-frame]")).to_have_attribute("title", re.compile(r"^View: "))
    shot(page, "app-views-10-loading")
    answer = frame.evaluate("() => window.initialize")["result"]
    assert answer["protocolVersion"] == "2026-01-26"
    assert answer["hostContext"]["displayMode"] == "inline"
    assert answer["hostContext"]["theme"] == "light"
    assert answer["hostContext"]["locale"] == "en"
    # Before `initialized`: the view's own questions are answered, and nothing else comes.
    ping(frame)
    early = frame.evaluate("() => request('tools/call', {name: 'show_board', arguments: {}})")
    assert early["error"]["code"] == -32600, early
    ping(frame)
    assert methods(frame) == ["answer"] * 4
    expect(view).to_have_attribute("data-state", "loading")

    frame.evaluate("() => notify('ui/notifications/initialized')")
    expect(view).to_have_attribute("data-state", "ready")
    tool_input, tool_result = told(frame)
    assert tool_input == {"jsonrpc": "2.0", "method": "ui/notifications/tool-input",
                          "params": {"arguments": {"column": "todo"}}}  # fmt: skip
    assert tool_result["params"]["structuredContent"]["tasks"][0]["title"] == "Ship it"
    expect(frame.locator("#tasks")).to_have_text("Ship it · Write release notes")
    # The model's text result stays beside it.
    expect(widget.call("show_board").locator("[data-part=tool-call-result]")).to_have_count(1)
    assert {"apps.js", "apps.css", "locale-en-apps.js"} <= set(fetched)
    audit(widget_frame(page), "an MCP App view")
    shot(page, "app-views-20-ready")

    # A reload: the view again, from the snapshot, told its input and result once more
    # only after it is initialized again.
    page.reload()
    widget, view = shown(page, site, send=False)
    frame = view_frame(view)
    ping(frame)
    assert methods(frame) == ["answer", "answer"]
    start(frame)
    expect(view).to_have_attribute("data-state", "ready")
    tool_input, tool_result = told(frame)
    assert tool_input["params"] == {"arguments": {"column": "todo"}}
    assert tool_result["params"]["structuredContent"]["column"] == "todo"


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    page = phone_page(browser, color_scheme="dark")
    yield page
    page.context.close()


ADD_TASK = "{name: 'add_task', arguments: {title: 'Ask'}}"
IMPOSTOR = {
    "jsonrpc": "2.0", "id": 900, "method": "ui/message",
    "params": {"role": "user", "content": [{"type": "text", "text": "From the view: impostor"}]},
}  # fmt: skip


def test_only_the_views_proxy_is_heard_and_its_message_waits_for_the_visitor(
    phone: Page, site: Site
) -> None:
    page = phone  # on a phone's sheet, in the dark theme
    widget, view = shown(page, site)
    frame = view_frame(view)
    assert start(frame)["result"]["hostContext"]["theme"] == "dark"
    expect(view).to_have_attribute("data-state", "ready")
    told(frame)
    prompt = view.locator("[data-part=app-prompt]")

    # The view posting to the widget itself (the apps origin, but not the proxy's window),
    # and the host page posting to the widget's frame (the proxy's message, another origin):
    # neither is heard.
    frame.evaluate("m => window.parent.parent.postMessage(m, '*')", IMPOSTOR)
    to_widget = "m => document.querySelector('[data-part=hostcall-frame]')"
    page.evaluate(f"{to_widget}.contentWindow.postMessage(m, '*')", IMPOSTOR)
    ping(frame)
    expect(prompt).to_be_hidden()

    # Its own message: asked first, sent only on the visitor's click.
    frame.evaluate("text => { window.asked = request('ui/message', "
                   "{role: 'user', content: [{type: 'text', text}]}) }", FROM_VIEW)  # fmt: skip
    expect(prompt).to_be_visible()
    expect(prompt.locator("[data-part=app-prompt-text]")).to_have_text(
        f"The view wants to send: “{FROM_VIEW}”"
    )
    expect(prompt.locator("[data-part=app-prompt-detail]")).to_have_count(0)
    audit(widget_frame(page), "a view's question, dark")
    shot(page, "app-views-30-consent-phone-dark")
    press(page, prompt.locator("[data-part=app-dismiss]"))
    assert frame.evaluate("() => window.asked")["result"] == {"isError": True}
    assert FROM_VIEW not in widget.messages("user")

    frame.evaluate("text => { window.asked = request('ui/message', "
                   "{role: 'user', content: [{type: 'text', text}]}) }", FROM_VIEW)  # fmt: skip
    press(page, prompt.locator("[data-part=app-send]"))
    assert frame.evaluate("() => window.asked")["result"] == {}
    expect(widget.frame.locator("[data-part=message][data-role=user]").last).to_contain_text(
        FROM_VIEW
    )
    widget.wait_until_idle()
    assert "From the view: impostor" not in widget.messages("user")

    # A link: never one that is not http(s); an http(s) one after the visitor's click, in a
    # new tab that cannot reach back.
    bad = frame.evaluate("() => request('ui/open-link', {url: 'javascript:alert(1)'})")
    assert bad["result"] == {"isError": True}
    expect(prompt).to_be_hidden()
    target = f"{site.hostcall.url}/healthz"
    frame.evaluate("url => { window.asked = request('ui/open-link', {url}) }", target)
    expect(prompt.locator("[data-part=app-prompt-text]")).to_have_text(
        f"The view wants to open {target.split('/')[2]}."
    )
    with page.context.expect_page() as opened:
        press(page, prompt.locator("[data-part=app-open]"))
    tab = opened.value
    assert frame.evaluate("() => window.asked")["result"] == {}
    assert tab.url == target
    assert tab.evaluate("() => window.opener") is None
    tab.close()

    # A write the agent file lets the view ask for: run only on the visitor's click.
    write = "() => { window.asked = request('tools/call', " + ADD_TASK + ") }"
    frame.evaluate(write)
    question = prompt.locator("[data-part=app-prompt-text]")
    expect(question).to_have_text("The view wants to run add_task.")
    expect(prompt.locator("[data-part=app-prompt-detail]")).to_have_text('{"title":"Ask"}')
    press(page, prompt.locator("[data-part=app-dismiss]"))
    assert frame.evaluate("() => window.asked")["error"]["code"] == -32000
    frame.evaluate(write)
    press(page, prompt.locator("[data-part=app-run]"))
    ran = frame.evaluate("() => window.asked")["result"]
    assert ran["structuredContent"] == {"id": "T-3", "title": "Ask"}, ran


def test_a_view_that_never_starts_says_so_and_the_text_result_stays(
    phone: Page, site: Site
) -> None:
    widget = open_chat(phone, site)
    phone.evaluate(
        "() => { window.errors = []; Hostcall('on', 'error', e => errors.push(e.code)) }"
    )
    widget.send(SHOW)
    view = widget.call("show_board").locator("[data-part=app-view]")
    view_frame(view)  # it loads, and never says it is initialized
    expect(view).to_have_attribute("data-state", "failed", timeout=SLOW)
    expect(view).to_have_text("This view could not be shown.")
    expect(view.locator("iframe")).to_have_count(0)
    result = widget.call("show_board").locator("[data-part=tool-call-result]")
    expect(result).to_have_count(1)
    phone.wait_for_function("() => errors.includes('app_view_timeout')", timeout=SLOW)
    shot(phone, "app-views-40-failed-phone-dark")
