"""The page's context in real Chromium (docs/embedding.md, "Page context"): the host page on
localhost calls ``Hostcall('context', key, value)``, the widget on 127.0.0.1 checks each value
against the demo agent's caps and sends the page's map with each message, which the model
reads and the console shows.

The message POSTs are read with Playwright's request events, as the browser sent them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import SLOW, session
from tests.e2e.test_console import _users_add, person

pytestmark = pytest.mark.e2e

#: Over the demo agent's 2048-byte cap per entry: 3002 bytes of JSON.
HUGE = "'x'.repeat(3000)"


class Traffic:
    """What the page's console said and which message bodies the widget posted."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        self.messages: list[dict[str, Any]] = []
        page.on("console", self._console)
        page.on("request", self._request)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _request(self, request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/messages"):
            self.messages.append(json.loads(request.post_data or "{}"))


def board(page: Page, demo: Demo) -> Traffic:
    """The demo board, with the page's error events collected in ``window.pageErrors``."""
    traffic = Traffic(page)
    page.goto(demo.board)
    page.evaluate(
        "() => { window.pageErrors = []; Hostcall('on', 'error', d => pageErrors.push(d)) }"
    )
    return traffic


def page_errors(page: Page, count: int) -> list[dict[str, Any]]:
    """The page's first `count` error events, once it has heard them."""
    page.wait_for_function(f"pageErrors.length >= {count}", timeout=SLOW)
    errors: list[dict[str, Any]] = page.evaluate("pageErrors")
    return errors


def test_refused_values_give_a_console_error_and_an_error_event_and_are_not_sent(
    shared_demo: Demo, page: Page
) -> None:
    traffic = board(page, shared_demo)
    page.evaluate(
        f"""() => {{
        Hostcall('context', 'page', {{ path: '/board' }})
        Hostcall('context', 'notes', {HUGE})
        Hostcall('context', 'price', {{ total: NaN }})
        Hostcall('context', 'bad key', 1)
    }}"""
    )
    widget = Widget(page, timeout=SLOW).open()
    errors = page_errors(page, 3)
    assert [(e["code"], e["key"], e["reason"]) for e in errors] == [
        ("page_context_refused", "notes", "entry_too_large"),
        ("page_context_refused", "price", "not_json"),
        ("page_context_refused", "bad key", "bad_key"),
    ]
    assert "3002 bytes of JSON; the limit is 2048 per entry" in errors[0]["message"]
    assert "price.total is NaN" in errors[1]["message"]
    for error in errors:
        assert any(error["message"] in text for text in traffic.errors), traffic.errors

    widget.send("Hello")
    widget.wait_until_idle()
    (sent,) = traffic.messages
    assert sent == {"text": "Hello", "context": {"page": {"path": "/board"}}}

    # Once the widget is up: a value the page cannot copy (a function) is refused too, and
    # takes the key's earlier value with it; the next message carries no context at all.
    page.evaluate("Hostcall('context', 'page', { path: '/board', go: () => 1 })")
    (copied,) = page_errors(page, 4)[3:]
    assert (copied["key"], copied["reason"]) == ("page", "not_json")
    assert "could not be copied" in copied["message"]
    widget.send("Hello again")
    widget.wait_until_idle()
    assert traffic.messages[1] == {"text": "Hello again"}
    assert len(traffic.errors) >= 4, traffic.errors


def test_a_removed_key_is_not_sent_and_a_value_set_later_is(shared_demo: Demo, page: Page) -> None:
    traffic = board(page, shared_demo)
    page.evaluate("Hostcall('context', 'cart', { items: 2 })")
    widget = Widget(page, timeout=SLOW).open()
    page.evaluate("() => { Hostcall('context', 'cart', null); Hostcall('context', 'page', '/b') }")
    widget.send("Hello")
    widget.wait_until_idle()
    assert traffic.messages == [{"text": "Hello", "context": {"page": "/b"}}]
    assert page.evaluate("pageErrors") == []


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Demo]:
    """The demo, with an operator for its console."""
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    db = tmp_path / "e2e.db"
    _users_add(db, "olga", "operator")
    demo = start_demo(tmp_path, db=db, extra=["--agents", str(agents)])
    yield demo
    demo.stop()


def test_the_selected_column_reaches_the_model_and_the_console(
    site: Demo, page: Page, browser: Browser
) -> None:
    traffic = board(page, site)
    page.get_by_role("button", name="In progress").click()
    expect(page.locator("[data-part=column][data-status=in-progress]")).to_have_attribute(
        "data-selected", ""
    )
    widget = Widget(page, timeout=SLOW).open()
    widget.send("What's in this column?")
    widget.wait_until_idle()
    reply = widget.last_reply()
    expect(reply).to_contain_text("In progress (2)")
    expect(reply).to_contain_text("Fix the login redirect bug")
    expect(reply).to_contain_text("Update the API docs")
    shot(page, "page-context-selected-column")
    (sent,) = traffic.messages
    column = sent["context"]["selected_column"]
    assert (column["status"], column["name"]) == ("in-progress", "In progress")
    assert [t["id"] for t in column["tasks"]] == ["T-1", "T-4"]

    # The operator sees what the model saw, as text.
    cid = session(page, site)["conversationId"]
    console = person(browser, site, "olga")
    console.goto(f"{site.hostcall}/console/conversations/{cid}")
    entries = console.locator("[data-part=page-context-entries]")
    expect(entries.locator("dt")).to_have_text(["selected_column"])
    expect(entries.locator("dd")).to_contain_text('"Fix the login redirect bug"')
    shot(console, "page-context-console")
    console.context.close()

    # Selecting the column again clears it: the next message carries no context.
    page.get_by_role("button", name="In progress").click()
    widget.send("What's in this column?")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_contain_text("No column is selected")
    assert traffic.messages[1] == {"text": "What's in this column?"}


def test_an_agent_that_admits_no_context_refuses_it_and_never_fetches_its_checks(
    tmp_path: Path, page: Page
) -> None:
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    del planner["page_context"]
    (agents / "planner.json").write_text(json.dumps(planner))
    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    try:
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url))
        traffic = board(page, demo)
        page.evaluate("() => Hostcall('context', 'page', '/board')")
        widget = Widget(page, timeout=SLOW).open()
        (refused,) = page_errors(page, 1)
        assert (refused["key"], refused["reason"]) == ("page", "not_admitted")
        assert any("this agent admits none" in text for text in traffic.errors), traffic.errors
        widget.send("Hello")
        widget.wait_until_idle()
        assert traffic.messages == [{"text": "Hello"}]
        assert not [url for url in fetched if "/context.js" in url], fetched
    finally:
        demo.stop()
