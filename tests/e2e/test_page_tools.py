"""Page tools in real Chromium (docs/embedding.md, "Page tools"): a host page on localhost
registers its tools through WebMCP alone, with no ``Hostcall(...)`` call, and the widget on
127.0.0.1 offers them to the agent, whose file admits them (``page_tools``).

Every test runs twice: with Chromium's WebMCP on (``document.modelContext`` is the
browser's) and off (the loader's shape stands in). The page counts its tools' runs in
sessionStorage, which a reload keeps and another tab does not share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, expect, sync_playwright

from hostcall.qa.plugin import launch_chromium
from hostcall.qa.servers import HostPage
from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import SLOW, open_chat

pytestmark = pytest.mark.e2e

NOTES: dict[str, Any] = {
    "id": "notes",
    "name": "Notes",
    "greeting": "Hello! I keep the page's notes.",
    "page_tools": {
        "allow": ["add_note", "read_*"],
        "tools": {
            "add_note": {"effect": "write", "approval": "always"},
            # An output schema: with no tab holding it (its page reloading), the form stands
            # in until a page with it comes back, as for the agent file's own client tools.
            "read_notes": {
                "effect": "read",
                "output": {
                    "type": "object",
                    "properties": {"count": {"type": "integer"}},
                    "required": ["count"],
                },
            },
        },
    },
    "model": {
        "kind": "scripted",
        "rules": [
            {
                "match": r"(?i)^note (?P<text>.+)$",
                "tool": "add_note",
                "arguments": {"text": "{{ text }}"},
                "reply": "Noted: {{ result.saved }} ({{ result.count }} in all).",
                "error_reply": "Not noted ({{ error.code }}).",
            },
            {
                "match": r"(?i)what are my notes",
                "tool": "read_notes",
                "arguments": {},
                "reply": "You have {{ result.count }} notes.",
                "error_reply": "I could not read them ({{ error.code }}).",
            },
        ],
        "fallback": "Ask me to note something.",
    },
}

#: The page's own script: WebMCP alone. Its tools are registered at once where the browser
#: has WebMCP, else once the page has loaded (the snippet's loader is async: its shape is
#: there by then), as docs/embedding.md says. ``?tools=none``: this tab registers nothing;
#: ``?hold=1``: a read is held on the tab's first load, until it reloads; ``?extra=1``: a tool
#: the agent file does not allow too. ``noteCtl`` unregisters add_note.
PAGE = """
const runs = () => JSON.parse(sessionStorage.getItem('runs') || '[]')
window.pageRuns = runs
const ran = entry => sessionStorage.setItem('runs', JSON.stringify([...runs(), entry]))
const query = new URLSearchParams(location.search)
const firstLoad = !sessionStorage.getItem('loaded')
sessionStorage.setItem('loaded', '1')
const held = query.get('hold') && firstLoad ? new Promise(() => {}) : null
window.noteCtl = new AbortController()
window.pageErrors = []
Hostcall('on', 'error', d => pageErrors.push(d))
function register() {
  if (query.get('tools') === 'none') return
  const mc = document.modelContext
  mc.registerTool({
    name: 'add_note',
    title: 'Add a note',
    description: 'Adds a note to the page.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: async ({ text }) => {
      ran(['add_note', text])
      const notes = [...JSON.parse(sessionStorage.getItem('notes') || '[]'), text]
      sessionStorage.setItem('notes', JSON.stringify(notes))
      return { saved: text, count: notes.length }
    },
  }, { signal: noteCtl.signal })
  mc.registerTool({
    name: 'read_notes',
    title: 'Read the notes',
    description: "The page's notes.",
    inputSchema: { type: 'object', properties: {} },
    annotations: { readOnlyHint: true },
    execute: async () => {
      ran(['read_notes'])
      await held
      return { count: JSON.parse(sessionStorage.getItem('notes') || '[]').length }
    },
  })
  if (query.get('extra'))
    mc.registerTool({ name: 'delete_everything', description: 'No.', execute: () => 1 })
}
document.modelContext ? register() : addEventListener('load', register)
"""

#: A same-origin frame registering a tool of its own: the host page's getTools() may list it.
CHILD_FRAME = """<iframe data-part="child" srcdoc="<script>
  document.modelContext?.registerTool({name: 'read_frame', description: 'A frame of the page.',
    execute: () => 1})</script>"></iframe>"""


@pytest.fixture(scope="module", params=["webmcp", "loader-shape"])
def hostcall_browser(request: pytest.FixtureRequest) -> Iterator[Browser]:
    """Chromium with WebMCP on, then off (the loader's shape): each test runs in both."""
    with sync_playwright() as p:
        browser = launch_chromium(p, webmcp=request.param == "webmcp")
        yield browser
        browser.close()


@pytest.fixture
def hostcall_agent() -> dict[str, Any]:
    return NOTES


@pytest.fixture
def host(host_page: HostPage) -> HostPage:
    host_page.script = PAGE
    host_page.body = CHILD_FRAME
    return host_page


class Capabilities:
    """The capabilities bodies the widget posted, and when the first message went."""

    def __init__(self, page: Page) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.order: list[str] = []
        page.on("request", self._request)

    def _request(self, request: Request) -> None:
        if request.method != "POST":
            return
        if request.url.endswith("/capabilities"):
            self.bodies.append(json.loads(request.post_data or "{}"))
            self.order.append("capabilities")
        elif request.url.endswith("/messages"):
            self.order.append("message")

    def names(self, n: int = -1) -> list[str]:
        return sorted(t["name"] for t in self.bodies[n].get("pageTools", []))


def open_page(page: Page, host: HostPage, query: str = "") -> Widget:
    page.set_default_timeout(10_000)
    page.goto(host.url + query)
    page.wait_for_load_state("load")
    return Widget(page, timeout=SLOW).open()


def runs(page: Page) -> list[list[str]]:
    found: list[list[str]] = page.evaluate("pageRuns()")
    return found


def test_a_page_with_no_hostcall_call_gets_its_webmcp_read_called(
    page: Page, host: HostPage
) -> None:
    caps = Capabilities(page)
    widget = open_page(page, host)
    widget.send("What are my notes?")
    expect(widget.last_reply()).to_have_text("You have 0 notes.", timeout=SLOW)
    expect(widget.call("read_notes")).to_have_attribute("data-state", "done")
    assert runs(page) == [["read_notes"]]
    # Offered before the first message, so its run planned with them; this window's only.
    assert caps.order[:2] == ["capabilities", "message"], caps.order
    assert caps.names(0) == ["add_note", "read_notes"]
    first = {t["name"]: t for t in caps.bodies[0]["pageTools"]}["read_notes"]
    assert first["title"] == "Read the notes"
    assert first["inputSchema"] == {"type": "object", "properties": {}}
    assert first["annotations"]["readOnlyHint"] is True


def test_a_page_tool_write_asks_for_approval_then_runs_once(page: Page, host: HostPage) -> None:
    widget = open_page(page, host)
    widget.send("note buy milk")
    card = widget.wait_for_call("add_note", "waiting")
    expect(card.locator("[data-part=approve]")).to_be_visible()
    # The person reads the title the page gave its tool, not its name.
    expect(card.locator("[data-part=tool-call-title]")).to_contain_text("Add a note")
    assert runs(page) == []  # nothing ran before the person said yes
    shot(page, "page-tools-approval")
    widget.approve("add_note")
    expect(widget.last_reply()).to_have_text("Noted: buy milk (1 in all).", timeout=SLOW)
    expect(card).to_have_attribute("data-state", "done")
    assert runs(page) == [["add_note", "buy milk"]]


def test_a_page_tool_read_runs_again_after_a_reload(page: Page, host: HostPage) -> None:
    widget = open_page(page, host, "?hold=1")
    widget.send("What are my notes?")
    card = widget.wait_for_call("read_notes", "running")
    page.wait_for_function("pageRuns().length === 1", timeout=SLOW)
    page.reload()  # the read is held on this first load: the reloaded page runs it again
    widget = Widget(page, timeout=SLOW)
    if page.locator("[data-part=hostcall-panel]").is_hidden():
        page.locator("[data-part=hostcall-launcher]").click()
    expect(widget.last_reply()).to_have_text("You have 0 notes.", timeout=SLOW)
    card = widget.call("read_notes")
    expect(card).to_have_attribute("data-state", "done")
    expect(card.locator("[data-part=form]")).to_have_count(0)
    assert runs(page) == [["read_notes"], ["read_notes"]]


def test_a_call_goes_to_the_tab_that_registered_the_tool(page: Page, host: HostPage) -> None:
    widget_a = open_page(page, host)
    page_b = page.context.new_page()
    widget_b = open_page(page_b, host, "?tools=none")
    # Both tabs in one conversation (B joins A's once its first message is in)...
    widget_a.send("hello")
    expect(widget_b.last_reply()).to_have_text("Ask me to note something.", timeout=SLOW)
    widget_b.wait_until_idle()
    widget_b.send("What are my notes?")  # ...then ask from the tab without the tool
    expect(widget_b.last_reply()).to_have_text("You have 0 notes.", timeout=SLOW)
    expect(widget_a.call("read_notes")).to_have_attribute("data-state", "done", timeout=SLOW)
    assert runs(page) == [["read_notes"]]
    assert runs(page_b) == []


def test_a_tool_unregistered_while_its_call_waits_is_no_handler(page: Page, host: HostPage) -> None:
    caps = Capabilities(page)
    widget = open_page(page, host)
    widget.send("note buy milk")
    widget.wait_for_call("add_note", "waiting")
    # toolchange: the widget offers the page's tools again, without it.
    with page.expect_request(lambda r: r.url.endswith("/capabilities"), timeout=SLOW) as sent:
        page.evaluate("noteCtl.abort()")
    offered = json.loads(sent.value.post_data or "{}")["pageTools"]
    assert [t["name"] for t in offered] == ["read_notes"]
    assert caps.names(0) == ["add_note", "read_notes"]
    widget.approve("add_note")
    expect(widget.last_reply()).to_have_text("Not noted (no_handler).", timeout=SLOW)
    assert runs(page) == []


#: Counts the page's getTools() calls from now on (the bridge reads ``document.modelContext``'s
#: method at each use, the browser's or the loader's shape).
COUNT_LISTS = """() => { const mc = document.modelContext, list = mc.getTools
  window.listed = 0
  mc.getTools = (...args) => (listed++, list.apply(mc, args)) }"""
#: add_note again, with another schema and another execute: what a call must run now.
REREGISTER = """() => { noteCtl.abort()
  document.modelContext.registerTool({
    name: 'add_note', description: 'Adds a tagged note.',
    inputSchema: { type: 'object',
      properties: { text: { type: 'string' }, tag: { type: 'string' } } },
    execute: async ({ text }) => (ran(['add_note again', text]), { saved: text, count: 7 }),
  }) }"""


def test_a_page_tool_call_lists_no_tools_and_runs_the_latest_registration(
    page: Page, host: HostPage
) -> None:
    widget = open_page(page, host)
    widget.send("What are my notes?")
    expect(widget.call("read_notes")).to_have_attribute("data-state", "done", timeout=SLOW)
    page.evaluate(COUNT_LISTS)
    widget.wait_until_idle()
    widget.send("What are my notes?")
    expect(widget.calls("read_notes")).to_have_count(2, timeout=SLOW)
    expect(widget.call("read_notes")).to_have_attribute("data-state", "done", timeout=SLOW)
    # The call looked its tool up in what the bridge kept: it asked the browser for no list.
    assert page.evaluate("listed") == 0
    assert runs(page) == [["read_notes"], ["read_notes"]]
    widget.wait_until_idle()
    # A new registration of the same name is what the next call runs, with its new schema
    # offered first (toolchange).
    with page.expect_request(lambda r: r.url.endswith("/capabilities"), timeout=SLOW) as sent:
        page.evaluate(REREGISTER)
    offered = {t["name"]: t for t in json.loads(sent.value.post_data or "{}")["pageTools"]}
    assert "tag" in offered["add_note"]["inputSchema"]["properties"]
    widget.send("note buy milk")
    widget.wait_for_call("add_note", "waiting")
    widget.approve("add_note")
    expect(widget.last_reply()).to_have_text("Noted: buy milk (7 in all).", timeout=SLOW)
    assert runs(page)[-1] == ["add_note again", "buy milk"]


def test_a_refused_page_tool_is_a_console_error_and_an_error_event(
    page: Page, host: HostPage
) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    widget = open_page(page, host, "?extra=1")
    widget.send("What are my notes?")
    expect(widget.last_reply()).to_have_text("You have 0 notes.", timeout=SLOW)
    page.wait_for_function("pageErrors.length > 0", timeout=SLOW)
    [refused] = page.evaluate("pageErrors")
    assert (refused["code"], refused["name"], refused["reason"]) == (
        "page_tool_refused",
        "delete_everything",
        "not_allowed",
    )
    assert any('page tool "delete_everything" refused (not_allowed)' in e for e in errors)


def test_the_demo_boards_own_webmcp_tool_counts_its_tasks(page: Page, shared_demo: Demo) -> None:
    caps = Capabilities(page)
    widget = open_chat(page, shared_demo)
    widget.send("How many tasks are done?")
    expect(widget.last_reply()).to_have_text("2 of your tasks are done.", timeout=SLOW)
    expect(widget.call("count_tasks")).to_have_attribute("data-state", "done")
    assert caps.names(0) == ["count_tasks"]  # its Hostcall handlers are not page tools
    shot(page, "page-tools-demo-count")
