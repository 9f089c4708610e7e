"""MCP Apps views in real Chromium (docs/agents.md "MCP Apps"), against a real MCP Apps
server built with the official SDKs (tests/fixtures/mcp_apps/server.mjs) over streamable HTTP.

The host page is on localhost, the widget on 127.0.0.1, each server's views on its own apps
origin (``http://{server}.localhost`` on a second port). The scripted model calls
``show_tasks`` (a view with buttons, of the ``tasks`` server) or ``show_hostile`` (a view of
another server, ``rogue``, that attacks its host and reports each outcome to its own server,
which the test reads back).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.apps_helpers import (
    Stack,
    body_data,
    card_view,
    open_widget,
    ready_view,
    stack,
)
from tests.e2e.conftest import shot
from tests.e2e.flows_helpers import SLOW, calls_of, snapshot

# Without node or the SDKs, apps_server() fails saying which is missing: never a skip.
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with stack(tmp_path_factory.mktemp("mcp-apps")) as running:
        yield running


def test_the_view_gets_its_input_and_result_only_after_it_is_initialized(
    apps: Stack, page: Page
) -> None:
    widget = open_widget(page, apps)
    widget.send("show the tasks")
    _, view = ready_view(widget, "show_tasks")
    expect(view.locator("[data-part=tasks] li")).to_have_count(3)
    expect(view.locator("li[data-id=T-2]")).to_contain_text("Review the pricing page")
    # Nothing reached the view before it said `initialized`; then its input, then its result.
    assert body_data(view, "early") == "0"
    seen = body_data(view, "seen").split()
    assert seen[:2] == ["ui/notifications/tool-input", "ui/notifications/tool-result"]
    assert body_data(view, "input") == "{}"
    # The card's text result stays beside the view; the model was not told of a view.
    expect(widget.last_reply()).to_have_text("Here are the tasks.")
    assert body_data(view, "theme") == "light"
    shot(page, "mcp-apps-view-light")


def test_the_views_button_calls_the_app_only_tool_through_hostcall(apps: Stack, page: Page) -> None:
    widget = open_widget(page, apps)
    # Never offered to the model: the model naming it gets an unknown tool.
    widget.send("refresh them yourself")
    expect(widget.last_reply()).to_have_text("I cannot: unknown_tool", timeout=SLOW)
    assert not any(c["name"] == "refresh_tasks" for c in apps.tasks.calls())

    widget.send("show the tasks")
    _, view = ready_view(widget, "show_tasks")
    before = sum(c["name"] == "refresh_tasks" for c in apps.tasks.calls())
    view.locator("#refresh").click()
    expect(view.locator("#status")).to_have_attribute(
        "data-refresh", f"refreshed {before + 1}", timeout=SLOW
    )
    assert sum(c["name"] == "refresh_tasks" for c in apps.tasks.calls()) == before + 1
    # In the conversation's ledger: the model's try refused, the view's call answered, as a
    # call of the view's.
    snap = snapshot(page, apps.hostcall)
    [shown] = calls_of(snap, "show_tasks")
    model, app = calls_of(snap, "refresh_tasks")
    assert (model["state"], model["outcome"]["error"]["code"]) == ("failed", "unknown_tool")
    assert "origin" not in model
    assert (app["state"], app["origin"], app["viewCall"]) == (
        "answered", "app", shown["toolCallId"]
    )  # fmt: skip
    assert app["outcome"]["output"]["structuredContent"]["refreshes"] == before + 1


def test_the_views_context_reaches_the_next_model_turn(apps: Stack, page: Page) -> None:
    widget = open_widget(page, apps)
    widget.send("show the tasks")
    _, view = ready_view(widget, "show_tasks")
    view.locator("li[data-id=T-3]").click()
    view.locator("#share").click()
    expect(view.locator("#status")).to_have_attribute("data-share", "shared", timeout=SLOW)
    widget.send("what do I look at?")
    expect(widget.last_reply()).to_contain_text("T-3", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text("Call the printer")


def test_a_message_from_the_view_is_sent_only_on_the_visitors_click(
    apps: Stack, page: Page
) -> None:
    widget = open_widget(page, apps)
    widget.send("show the tasks")
    card, view = ready_view(widget, "show_tasks")
    view.locator("li[data-id=T-1]").click()
    sent_before = widget.messages("user")

    view.locator("#ask").click()
    prompt = card.locator("[data-part=app-prompt]")
    expect(prompt).to_contain_text("Tell me more about T-1", timeout=SLOW)
    card.locator("[data-part=app-dismiss]").click()
    expect(view.locator("#status")).to_have_attribute("data-ask", "declined", timeout=SLOW)
    assert widget.messages("user") == sent_before

    view.locator("#ask").click()
    card.locator("[data-part=app-send]").click(timeout=SLOW)
    expect(view.locator("#status")).to_have_attribute("data-ask", "sent", timeout=SLOW)
    expect(widget.last_reply()).to_have_text("T-1 is on the board.", timeout=SLOW)
    assert widget.messages("user") == [*sent_before, "Tell me more about T-1"]


def test_a_link_from_the_view_opens_only_once_the_visitor_says_so(apps: Stack, page: Page) -> None:
    widget = open_widget(page, apps)
    widget.send("show the tasks")
    card, view = ready_view(widget, "show_tasks")
    view.locator("#open").click()
    host = apps.tasks.origin.removeprefix("http://")
    expect(card.locator("[data-part=app-prompt]")).to_contain_text(host, timeout=SLOW)
    card.locator("[data-part=app-dismiss]").click()
    expect(view.locator("#status")).to_have_attribute("data-open", "declined", timeout=SLOW)
    assert len(page.context.pages) == 1

    view.locator("#open").click()
    with page.context.expect_page(timeout=SLOW) as opened:
        card.locator("[data-part=app-open]").click(timeout=SLOW)
    linked = opened.value
    linked.wait_for_load_state()
    assert linked.url == f"{apps.tasks.origin}/linked"
    # noopener: the opened page has no hold on the widget.
    assert linked.evaluate("window.opener") is None
    linked.close()


def test_reload_and_another_tab_bring_the_view_back_with_its_state(apps: Stack, page: Page) -> None:
    widget = open_widget(page, apps)
    widget.send("show the tasks")
    _, view = ready_view(widget, "show_tasks")
    # A real origin, not an opaque sandbox: storage is the browser's to allow, as it is to
    # the widget's own frame, cross-site too.
    assert body_data(view, "origin") == apps.apps_origin
    storage = body_data(view, "storage")
    assert storage == widget_storage(page, apps)
    opens = int(body_data(view, "opens") or 0)
    view.locator("li[data-id=T-2]").click()
    assert body_data(view, "selected") == "T-2"

    page.reload()
    widget = open_widget(page, apps)
    _, view = ready_view(widget, "show_tasks")
    assert body_data(view, "early") == "0"
    assert body_data(view, "input") == "{}"
    expect(view.locator("[data-part=tasks] li")).to_have_count(3)
    if storage == "ok":
        assert int(body_data(view, "opens")) == opens + 1
        assert body_data(view, "selected") == "T-2"

    other = page.context.new_page()
    widget = open_widget(other, apps)
    _, view = ready_view(widget, "show_tasks")
    assert body_data(view, "early") == "0"
    expect(view.locator("[data-part=tasks] li")).to_have_count(3)
    if storage == "ok":
        expect(view.locator("li[data-id=T-2]")).to_have_attribute("aria-selected", "true")
    other.close()


def widget_storage(page: Page, apps: Stack) -> str:
    """What the widget's own frame gets of localStorage, as the view words it."""
    frame = page.frame(url=lambda url: url.startswith(apps.hostcall.url))
    assert frame is not None
    said: str = frame.evaluate(
        "() => { try { localStorage.length; return 'ok' }"
        " catch (e) { return 'refused: ' + e.name } }"
    )
    return said


def test_a_hostile_view_is_refused_everything(apps: Stack, page: Page) -> None:
    widget = open_widget(page, apps)
    url = page.url
    widget.send("show the hostile view")
    card, view = ready_view(widget, "show_hostile")
    expect(view.locator("body")).to_have_attribute("data-state", "reported", timeout=SLOW)
    report = apps.rogue.reports("hostile")[-1]
    navigation = apps.rogue.reports("hostile-navigation")[-1]
    attempts = report["attempts"] + navigation["attempts"]
    outcomes = {a["name"]: (a["outcome"], a["detail"]) for a in attempts}
    assert outcomes.keys() >= {
        "widget_document", "widget_storage", "widget_session_storage", "top_document",
        "top_cookies", "top_storage", "own_cookies", "own_storage", "post_top", "post_widget",
        "fetch_widget", "fetch_page", "beacon_widget", "call_tool:lookup",
        "call_tool:no_such_tool", "window_open", "navigate_widget", "navigate_top",
        "top_channel",
    }  # fmt: skip
    succeeded = {n: d for n, (o, d) in outcomes.items() if o == "succeeded"}
    assert succeeded == {}, succeeded
    # Another server's tool and a name its server does not list: refused by Hostcall.
    assert "app_tool_refused" in outcomes["call_tool:lookup"][1]
    assert "app_tool_refused" in outcomes["call_tool:no_such_tool"][1]
    # The undeclared origins were refused by the view's CSP, not by a network error.
    blocked = {v["blocked"].rstrip("/") for v in navigation["violations"]}
    widget_probe = apps.hostcall.url + "/healthz"
    assert {widget_probe, widget_probe + "?beacon", apps.host.origin} <= blocked, blocked

    # The forged messages did reach the page and the widget, which acted on none of them.
    page.wait_for_function("foreign.includes('hostcall:hello')", timeout=SLOW)
    assert page.evaluate("forgedRuns") == 0
    assert page.evaluate("location.href") == url and len(page.context.pages) == 1
    # The widget's frame is still the widget's: not navigated away.
    assert page.frame(url=lambda u: u.startswith(apps.hostcall.url)) is not None
    assert not [f.url for f in page.frames if "/linked" in f.url]
    expect(card.locator("[data-part=app-prompt]")).to_be_hidden()
    assert "FORGED" not in " ".join(widget.messages())
    assert all(c["arguments"].get("filter") != "FORGED" for c in apps.tasks.calls())
    assert "lookup" not in apps.crm.calls
    expect(card_view(card)).to_have_attribute("data-state", "ready")
    card.locator("[data-part=app-frame]").scroll_into_view_if_needed()
    shot(page, "mcp-apps-hostile-view")


def test_a_hostile_view_cannot_read_another_servers_view(apps: Stack, page: Page) -> None:
    widget = open_widget(page, apps)
    widget.send("show the tasks")
    ready_view(widget, "show_tasks")
    widget.send("show the hostile view")
    _, view = ready_view(widget, "show_hostile")
    expect(view.locator("body")).to_have_attribute("data-state", "reported", timeout=SLOW)
    # The tasks view is another server's, on that server's apps origin: a window the hostile
    # view can reach through the widget's frames, never a document it can read.
    report = apps.rogue.reports("hostile")[-1]
    [(outcome, detail)] = [
        (a["outcome"], a["detail"])
        for a in report["attempts"]
        if a["name"] == "other_view_document"
    ]
    assert outcome == "refused", detail


def test_views_follow_the_theme_and_fit_a_phone(apps: Stack, browser: Browser) -> None:
    dark = browser.new_context(color_scheme="dark", viewport={"width": 1280, "height": 800})
    try:
        page = dark.new_page()
        widget = open_widget(page, apps)
        widget.send("show the tasks")
        _, view = ready_view(widget, "show_tasks")
        assert body_data(view, "theme") == "dark"
        shot(page, "mcp-apps-view-dark")
    finally:
        dark.close()
    phone = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    try:
        page = phone.new_page()
        widget = open_widget(page, apps)
        widget.send("show the tasks")
        card, view = ready_view(widget, "show_tasks")
        box = card.locator("[data-part=app-frame]").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        shot(page, "mcp-apps-view-phone")
    finally:
        phone.close()


def test_without_an_apps_origin_the_card_says_the_view_is_not_enabled(
    tmp_path: Path, page: Page
) -> None:
    with stack(tmp_path, apps=False) as plain:
        widget = open_widget(page, plain)
        widget.send("show the tasks")
        card = widget.wait_for_call("show_tasks", "done")
        note = card_view(card)
        expect(note).to_have_attribute("data-state", "failed", timeout=SLOW)
        expect(note).to_have_text("This result has a view that this site has not enabled.")
        expect(card.locator("[data-part=app-frame]")).to_have_count(0)
        expect(widget.last_reply()).to_have_text("Here are the tasks.")
