"""The widget's weight is a gate: what an idle, open chat loads, as Chromium loaded it and
gzipped, stays within its budget (the loader 3 KB, the loader and the frame 30 KB). The figure
is the browser bench's, from the same measure (hostcall/qa/weight.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect

from hostcall.qa.weight import WIDGET_BUDGET, OpenWidget, gzipped, weigh
from tests.e2e.conftest import Demo, start_demo
from tests.e2e.flows_helpers import open_chat

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One server for both tests: they only load the widget, and change nothing."""
    running = start_demo(Path(tmp_path_factory.mktemp("weight")))
    yield running
    running.stop()


def open_widget(browser: Browser, demo: Demo, route: str | None = None) -> OpenWidget:
    """What a fresh browser (empty cache) loads to show the open, idle chat, weighed;
    ``route``, if given, is a static file served with incompressible bytes added."""
    page: Page = browser.new_context(locale="en-US").new_page()
    try:
        done: list[Request] = []
        page.on("requestfinished", lambda r: done.append(r))
        if route is not None:

            def heavier(r: Route) -> None:
                body = r.fetch().body() + f"/* {secrets.token_hex(4096)} */".encode()
                r.fulfill(body=body, content_type="text/javascript; charset=utf-8")

            page.route(f"**/static/{route}*", heavier)
        open_chat(page, demo)
        return OpenWidget.of(weigh(done, demo.url))
    finally:
        page.context.close()


def test_the_open_widget_and_its_loader_are_within_their_budgets(
    browser: Browser, demo: Demo
) -> None:
    widget = open_widget(browser, demo)
    assert widget.over_budget() == [], "\n".join(widget.over_budget())
    # The lazy modules stay lazy: the first screen is what an idle chat needs (no
    # conversation yet: no stream, no snapshot; a plain greeting: no markdown).
    loaded = {f.path.rsplit("/", 1)[-1].split("?")[0] for f in widget.frame}
    lazy = {"toolcalls.js", "control.js", "restart.js", "history.js", "people.js", "known.js"}
    lazy |= {"events.js", "protocol-events.js", "snapshot.js", "markdown.js"}
    lazy.add("suggest.js")  # the demo's planner has no starters, follow-ups or rating
    lazy.add("context.js")  # the demo's board sets no context until a column is selected
    # Page tools go with a conversation's first capabilities; a view, a branch and reasoning
    # with a result, an ended run and a thinking model.
    lazy |= {"pagetools.js", "views.js", "branch.js", "reasoning.js"}
    # Files: the attach button for an agent that admits them, the chips with the first file.
    lazy |= {"files.js", "attach.js", "attach.css"}
    lazy |= {"apps.js", "apps-wire.js", "apps.css"}  # with a call whose result has an MCP App
    assert not loaded & lazy, loaded & lazy
    assert not {name for name in loaded if name.startswith("locale-en-")}, loaded


def test_an_open_widget_over_its_budget_is_reported_with_its_files(
    browser: Browser, demo: Demo
) -> None:
    widget = open_widget(browser, demo, route="app.js")
    assert gzipped(widget.whole) > WIDGET_BUDGET
    (over,) = widget.over_budget()
    assert over.startswith("the open widget is") and "/static/app.js" in over, over


def test_a_page_gets_the_launcher_alone_until_it_is_hovered(browser: Browser, demo: Demo) -> None:
    """What every view of the host page pays for: the loader, its check and one button; the
    panel, the frame and bridge.js come when the visitor comes near the launcher."""
    page: Page = browser.new_context(locale="en-US").new_page()
    try:
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if r.url.startswith(demo.url) else None)
        page.goto(demo.board)
        launcher = page.locator("[data-part=hostcall-launcher]")
        expect(launcher).to_be_visible()
        expect(launcher).to_have_attribute("aria-expanded", "false")
        assert page.locator("[data-part=hostcall-panel]").count() == 0
        assert [url.removeprefix(demo.url).split("?")[0] for url in asked] == [
            "/embed.js",
            "/embed/check",
        ]
        launcher.hover()
        framed = page.locator("[data-part=hostcall-panel] [data-part=hostcall-frame]")
        expect(framed).to_have_count(1)
        expect(page.locator("[data-part=hostcall-panel]")).to_be_hidden()
        assert launcher.get_attribute("aria-controls") == "hostcall-panel"
    finally:
        page.context.close()
