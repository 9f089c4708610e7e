"""The tool-call code loads when a run starts on a page that answers the agent's tools, or
when the first call appears (the weight budget): the
first screen never fetches it, a call's events wait for it rather than being dropped or
overtaken, a failed fetch is retried, and a call waiting at start-up (a reload with an
approval pending) still shows and works.

The module is slowed or failed with Playwright's request routing on the widget's origin.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, Route, expect

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo
from tests.e2e.flows_helpers import ASK_ADD, ASK_NEXT, SLOW, board_titles, handler_runs, open_chat

pytestmark = pytest.mark.e2e

LAZY = (
    "toolcalls.js",
    "cards.js",
    "calls.js",
    "form.js",
    "protocol-codes.js",
    "calls.css",
    "-calls.js",
)


@pytest.fixture(scope="module")
def demo(shared_demo: Demo) -> Demo:
    """Every test here has its own browser context, so its own conversation, board and
    request routes."""
    return shared_demo


def lazy_requests(page: Page) -> list[str]:
    """Every request the widget makes for the tool-call files, recorded from now on."""
    seen: list[str] = []
    page.context.on(
        "request",
        lambda r: (
            seen.append(r.url)
            if "/static/" in r.url and r.url.split("?")[0].endswith(LAZY)
            else None
        ),
    )
    return seen


def slow_module(page: Page, seconds: float) -> None:
    """toolcalls.js answers `seconds` late: the call's events (and the text after them) arrive
    while it loads."""

    def late(route: Route) -> None:
        time.sleep(seconds)
        route.continue_()

    page.context.route("**/static/toolcalls.js*", late)


def test_the_first_screen_does_not_fetch_the_tool_call_code(page: Page, demo: Demo) -> None:
    seen = lazy_requests(page)
    widget = open_chat(page, demo)
    widget.frame.locator("[data-part=composer-input]").fill("hello")
    page.wait_for_timeout(500)
    assert seen == []
    widget.send(ASK_NEXT)
    expect(widget.calls("read_board_tasks")).to_have_attribute("data-state", "done", timeout=SLOW)
    fetched = {url.split("?")[0].rsplit("/", 1)[-1] for url in seen}
    assert {
        "toolcalls.js",
        "cards.js",
        "calls.js",
        "protocol-codes.js",
        "calls.css",
        "locale-en-calls.js",
    } <= fetched


def test_a_run_on_a_page_with_handlers_fetches_the_call_code_before_any_call(
    page: Page, demo: Demo
) -> None:
    seen = lazy_requests(page)
    widget = open_chat(page, demo)  # the demo page answers read_board_tasks and create_task
    page.wait_for_timeout(300)
    assert seen == []
    widget.send("hello")  # a run with no tool call
    expect(widget.last_reply()).to_contain_text("Hello!", timeout=SLOW)
    wanted = {
        "toolcalls.js",
        "cards.js",
        "calls.js",
        "form.js",
        "protocol-codes.js",
        "calls.css",
        "locale-en-calls.js",
    }
    for _ in range(50):
        if wanted <= {url.split("?")[0].rsplit("/", 1)[-1] for url in seen}:
            break
        page.wait_for_timeout(100)
    assert wanted <= {url.split("?")[0].rsplit("/", 1)[-1] for url in seen}
    expect(widget.frame.locator("[data-part=tool-call]")).to_have_count(0)


def test_events_wait_for_the_module_in_order_and_the_call_runs_once(page: Page, demo: Demo) -> None:
    slow_module(page, 1.5)
    widget = open_chat(page, demo)
    doing, todo = board_titles(page, "in-progress"), board_titles(page, "todo")
    widget.send(ASK_NEXT)

    call = widget.calls("read_board_tasks")
    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    reply = widget.last_reply()
    expect(reply).to_contain_text("Here is the order I suggest", timeout=SLOW)
    widget.wait_until_idle()
    # The reply streamed while the module loaded came after the call, and still does.
    follows = call.evaluate(
        "(el, r) => !!(el.compareDocumentPosition(r) & Node.DOCUMENT_POSITION_FOLLOWING)",
        reply.element_handle(),
    )
    assert follows
    assert reply.locator("li strong").all_inner_texts() == doing + todo
    assert handler_runs(page, "read_board_tasks") == 1
    # Strings and styles came before the card showed: no raw keys, a styled status.
    expect(call.locator("[data-part=tool-call-status]")).to_have_text("Done")
    assert call.evaluate("el => getComputedStyle(el).borderTopStyle") == "solid"


def test_a_failed_fetch_of_the_module_is_retried(page: Page, demo: Demo) -> None:
    failures: list[str] = []

    def fail_twice(route: Route) -> None:
        if len(failures) < 2:
            failures.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.context.route("**/static/cards.js*", fail_twice)
    widget = open_chat(page, demo)
    widget.send(ASK_NEXT)
    call = widget.calls("read_board_tasks")
    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text("Here is the order I suggest", timeout=SLOW)
    assert len(failures) == 2
    assert handler_runs(page, "read_board_tasks") == 1


def test_an_approval_pending_at_start_up_shows_and_can_be_approved(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_ADD)
    expect(widget.calls("create_task").locator("[data-part=approve]")).to_be_visible(timeout=SLOW)
    before = board_titles(page)

    slow_module(page, 1.0)
    page.reload()  # the panel was open: the loader opens it again
    widget = Widget(page, timeout=SLOW)
    approve = widget.calls("create_task").locator("[data-part=approve]")
    expect(approve).to_be_visible(timeout=SLOW)
    approve.click()
    expect(widget.calls("create_task")).to_have_attribute("data-state", "done", timeout=SLOW)
    widget.wait_until_idle()
    assert len(board_titles(page)) == len(before) + 1
    assert handler_runs(page, "create_task") == 1
