"""A tool's result view in real Chromium (docs/agents.md "Views"): the demo draws the
board's tasks as a list with a button per task. The button sends the visitor's message (the
model's call it leads to asks for approval like any other); the view comes back from the
snapshot after a reload; a hostile value stays text; the view is axe-clean, light, dark and
on a phone's sheet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import ASK_NEXT, SLOW, open_chat
from tests.e2e.test_console import Site, person, site
from tests.e2e.test_end_user import phone_page
from tests.e2e.test_ui import audit, widget_frame

pytestmark = pytest.mark.e2e
__all__ = ["site"]  # the console's fixture: a demo with console users

HOSTILE = '<img src=x onerror="window.pwned=1">Ship it'
TASKS = [
    {"id": "T-1", "title": HOSTILE, "status": "todo"},
    {"id": "T-2", "title": "Write release notes", "status": "in-progress"},
]
# The page's handler returns tasks of the test's own, one of them hostile.
REGISTER = "tasks => Hostcall('register', 'read_board_tasks', () => ({tasks}))"


@pytest.fixture(scope="module")
def demo(shared_demo: Demo) -> Demo:
    return shared_demo


def board_view(page: Page, demo: Demo, query: str = "", *, hostile: bool = True) -> Widget:
    """The board's tasks as a list view: the test's own (one of them hostile), or the demo
    board's."""
    widget = open_chat(page, demo, query)
    if hostile:
        page.evaluate(REGISTER, TASKS)
    widget.send(ASK_NEXT)
    view = widget.call("read_board_tasks").locator("[data-part=result-view]")
    expect(view.locator("[data-part=view-item]").first).to_be_visible(timeout=SLOW)
    if hostile:
        expect(view.locator("[data-part=view-item]")).to_have_count(2)
    widget.wait_until_idle()
    return widget


def test_a_list_view_sends_the_visitors_message_and_comes_back_after_a_reload(
    page: Page, demo: Demo
) -> None:
    widget = board_view(page, demo)
    view = widget.call("read_board_tasks").locator("[data-part=result-view]")
    expect(view).to_have_attribute("data-view", "list")
    # Untitled, the view is named for its tool (its card's heading, not a second one).
    expect(view).to_have_accessible_name("Read the task board")
    expect(view.get_by_role("heading")).to_have_count(0)
    titles = view.locator("[data-part=view-item-title]")
    expect(titles.first).to_have_text(HOSTILE)  # as text: no element was made of it
    expect(view.locator("img")).to_have_count(0)
    frame = widget_frame(page)
    assert frame.evaluate("() => window.pwned") is None
    audit(frame, "a list view")
    shot(page, "views-10-list")

    # The button is named by its label and described by its task (a screen reader hears
    # which task it acts on); by the keyboard, it sends the visitor's message.
    button = view.get_by_role("button", name="Follow up").nth(1)
    expect(button).to_have_accessible_description("Write release notes")
    button.focus()
    page.keyboard.press("Enter")
    sent = "Add a task to follow up on Write release notes"
    expect(widget.frame.locator("[data-part=message][data-role=user]").last).to_contain_text(sent)
    # The model's call goes through the tool's policy: create_task asks for approval.
    card = widget.wait_for_call("create_task", "waiting")
    expect(card.locator("[data-part=approve]")).to_be_visible()
    widget.reject("not now", "create_task")
    widget.wait_until_idle()

    # A reload draws the view again from the snapshot, with its buttons.
    again = open_chat(page, demo)
    restored = again.call("read_board_tasks").locator("[data-part=result-view]")
    expect(restored.locator("[data-part=view-item-title]")).to_have_text(
        [HOSTILE, "Write release notes"], timeout=SLOW
    )
    expect(restored.get_by_role("button", name="Follow up")).to_have_count(2)
    assert widget_frame(page).evaluate("() => window.pwned") is None


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    page = phone_page(browser, color_scheme="dark")
    yield page
    page.context.close()


def test_the_view_reads_in_the_dark_theme_and_on_a_phones_sheet(
    page: Page, phone: Page, demo: Demo
) -> None:
    widget = board_view(page, demo, "?theme=dark")
    audit(widget_frame(page), "a list view, dark")
    shot(page, "views-20-dark")
    widget = board_view(phone, demo, hostile=False)
    view = widget.call("read_board_tasks").locator("[data-part=result-view]")
    view.scroll_into_view_if_needed()
    # Nothing wider than the sheet: the view wraps, its card does not scroll sideways.
    width = view.evaluate("el => [el.scrollWidth, el.clientWidth]")
    assert width[0] <= width[1], width
    shot(phone, "views-30-phone", readme="result-view-phone")


def test_the_console_draws_the_view_server_side_as_text(
    browser: Browser, page: Page, site: Site
) -> None:
    board_view(page, site.demo)
    admin = person(browser, site.demo, "olga")
    for theme in ("light", "dark"):
        admin.goto(f"{site.demo.hostcall}/console/conversations?theme={theme}")
        admin.locator("[data-part=conversation]").first.locator("[data-part=open]").click()
        view = admin.locator("[data-part=views-section] [data-part=result-view]")
        expect(view).to_have_attribute("data-view", "list")
        expect(view.locator("li").first).to_contain_text(HOSTILE)  # as text, no element
        expect(view.locator("img")).to_have_count(0)
        assert admin.evaluate("() => window.pwned") is None
        audit(admin, f"the console's view ({theme})")
        view.scroll_into_view_if_needed()
        shot(admin, f"views-40-console-{theme}")
