"""The visitor's history in real Chromium (widget/history.js): this browser's conversations
listed, titled by their first message; open an older one and continue it (a reload comes
back to it), start a new one, delete one; another browser sees none of them. Loaded only
when asked for, keyboard usable, in four languages, and on a phone's sheet.

Screenshots go to test-results/screenshots/history-*.png.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from hostcall.qa.servers import HostcallServer
from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import SLOW, open_chat
from tests.e2e.test_end_user import phone_page
from tests.e2e.test_known_visitors import USER_TEXTS, Site, opened, people
from tests.e2e.test_known_visitors import hostcall as hostcall  # fixtures
from tests.e2e.test_known_visitors import served as served
from tests.e2e.test_known_visitors import site as site

pytestmark = pytest.mark.e2e

LAZY = ("history.js", "history.css", "-history.js")
FIRST = "hello"
SECOND = "hi there"


@pytest.fixture(scope="module")
def demo(shared_demo: Demo) -> Demo:
    """Every test here has its own browser context, and the history lists only this browser's
    conversations: the others' on the same server are never in it."""
    return shared_demo


def history_requests(page: Page) -> list[str]:
    seen: list[str] = []
    page.context.on(
        "request",
        lambda r: seen.append(r.url) if r.url.split("?")[0].endswith(LAZY) else None,
    )
    return seen


def start_new(widget: Widget) -> None:
    widget.frame.locator("[data-part=new-conversation]").click()
    widget.frame.locator("[data-part=restart-yes]").click()
    expect(widget.frame.locator("html[data-agent-state=idle]")).to_have_count(1, timeout=SLOW)
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(0)


def two_conversations(page: Page, demo: Demo, query: str = "") -> Widget:
    widget = open_chat(page, demo, query)
    widget.send(FIRST)
    widget.wait_until_idle()
    start_new(widget)
    widget.send(SECOND)
    widget.wait_until_idle()
    return widget


def open_history(widget: Widget) -> None:
    widget.frame.locator("[data-part=open-history]").click()
    expect(widget.frame.locator("[data-part=history-item]").first).to_be_visible(timeout=SLOW)


def titles(widget: Widget) -> list[str]:
    return widget.frame.locator("[data-part=history-item-title]").all_inner_texts()


def test_qa_kit_waits_for_a_conversation_opened_from_history_until_it_is_drawn(
    page: Page, demo: Demo
) -> None:
    widget = two_conversations(page, demo)
    assert widget.history() == [SECOND, FIRST]
    # The open request held: the widget says it is loading, so waiting for idle waits.
    held: list[Route] = []
    opening = re.compile(r"/history/[^/?]+$")
    page.route(opening, lambda route: held.append(route))
    with page.expect_request(opening):
        widget.frame.locator("[data-part=history-item]", has_text=FIRST).locator(
            "[data-part=history-open]"
        ).click()
    expect(widget.frame.locator("html[data-agent-state=starting]")).to_have_count(1)
    while not held:  # the route's handler runs in Playwright's loop, which this wait turns
        page.wait_for_timeout(20)
    held[0].continue_()
    page.unroute(opening)
    widget.wait_until_idle()
    assert widget.messages("user") == [FIRST]
    # The same with the documented API only, back and forth, then a deletion.
    widget.open_from_history(SECOND)
    assert widget.messages("user") == [SECOND]
    widget.delete_from_history(FIRST)
    assert widget.history() == [SECOND]
    widget.delete_from_history(SECOND)  # the one open: a new conversation takes its place
    assert widget.messages("user") == []
    assert widget.history() == []


def test_history_lists_opens_continues_and_deletes_this_browser_s_conversations(
    page: Page, demo: Demo
) -> None:
    seen = history_requests(page)
    widget = two_conversations(page, demo)
    assert seen == [], "the first screen fetched the history's code"
    open_history(widget)
    fetched = {u.split("?")[0].rsplit("/", 1)[-1] for u in seen}
    assert {"history.js", "history.css", "locale-en-history.js"} <= fetched
    assert titles(widget) == [SECOND, FIRST]
    current = widget.frame.locator("[data-part=history-item][aria-current=true]")
    expect(current).to_have_count(1)
    expect(current.locator("[data-part=history-item-title]")).to_have_text(SECOND)
    expect(widget.frame.locator("[data-part=composer]")).to_be_hidden()
    shot(page, "history-list")

    # Open the older one: its messages come back, and it goes on.
    widget.frame.locator("[data-part=history-item]", has_text=FIRST).locator(
        "[data-part=history-open]"
    ).click()
    expect(widget.frame.locator("[data-part=history]")).to_have_count(0)
    mine = widget.frame.locator("[data-part=message][data-role=user] [data-part=message-text]")
    expect(mine.first).to_have_text(FIRST, timeout=SLOW)
    widget.wait_until_idle()
    widget.send("and again")
    widget.wait_until_idle()
    assert widget.messages("user") == [FIRST, "and again"]
    shot(page, "history-opened")

    # A reload comes back to the conversation opened last.
    page.reload()
    widget = Widget(page, timeout=SLOW).open()
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(2)
    assert widget.messages("user") == [FIRST, "and again"]

    # Delete the other one, after saying yes.
    open_history(widget)
    assert titles(widget) == [FIRST, SECOND]  # the one just written in comes first
    other = widget.frame.locator("[data-part=history-item]", has_text=SECOND)
    other.locator("[data-part=history-delete]").click()
    expect(other.locator("[data-part=history-confirm]")).to_be_visible()
    shot(page, "history-delete-confirm")
    other.locator("[data-part=history-delete-yes]").click()
    expect(widget.frame.locator("[data-part=history-item]")).to_have_count(1)
    expect(widget.frame.locator("[data-part=history-status]")).to_have_text("Conversation deleted.")
    shot(page, "history-after-delete")

    # "New conversation" from the panel starts one, and the list then holds both.
    widget.frame.locator("[data-part=history-new]").click()
    expect(widget.frame.locator("[data-part=history]")).to_have_count(0)
    widget.wait_until_idle()
    widget.send("a third")
    widget.wait_until_idle()
    open_history(widget)
    assert titles(widget) == ["a third", FIRST]


def test_another_browser_sees_none_of_them(browser: Browser, page: Page, demo: Demo) -> None:
    two_conversations(page, demo)
    other = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    try:
        stranger = open_chat(other.new_page(), demo)
        stranger.frame.locator("[data-part=open-history]").click()
        status = stranger.frame.locator("[data-part=history-status]")
        # Nothing was written there, so nothing was made: an empty list, not another's.
        expect(status).to_have_text("No conversations yet.", timeout=SLOW)
        assert titles(stranger) == []
    finally:
        other.close()


def test_the_resume_key_copied_to_another_browser_opens_none_of_them(
    browser: Browser, page: Page, demo: Demo
) -> None:
    """The loader keeps the resume key in the host page's localStorage, where any script of
    the page, an extension or the next person at the computer reads it. Copied into another
    browser (without the HttpOnly cookie), it resumes nothing and lists nothing."""
    two_conversations(page, demo)
    key = page.evaluate("localStorage['hostcall:key:planner']")
    assert key
    other = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    try:
        other.add_init_script(f"localStorage.setItem('hostcall:key:planner', {json.dumps(key)})")
        thief_page = other.new_page()
        thief = open_chat(thief_page, demo)
        assert thief_page.evaluate("localStorage['hostcall:key:planner']") == key
        expect(thief.frame.locator("[data-part=message][data-role=user]")).to_have_count(0)
        thief.send("whose are these?")
        thief.wait_until_idle()
        open_history(thief)
        assert titles(thief) == ["whose are these?"]
        shot(thief_page, "history-copied-key")
    finally:
        other.close()


def test_the_history_is_keyboard_usable(page: Page, demo: Demo) -> None:
    widget = two_conversations(page, demo)
    button = widget.frame.locator("[data-part=open-history]")
    expect(button).to_have_attribute("aria-label", "Your conversations")
    button.focus()
    button.press("Enter")
    # Focus lands on the conversation one is in; Tab reaches its delete button.
    current_open = widget.frame.locator(
        "[data-part=history-item][aria-current=true] [data-part=history-open]"
    )
    expect(current_open).to_be_focused(timeout=SLOW)
    page.keyboard.press("Tab")
    expect(
        widget.frame.locator(
            "[data-part=history-item][aria-current=true] [data-part=history-delete]"
        )
    ).to_be_focused()
    page.keyboard.press("Enter")
    expect(widget.frame.locator("[data-part=history-delete-no]").first).to_be_focused()
    page.keyboard.press("Escape")  # the question closes, nothing deleted
    expect(widget.frame.locator("[data-part=history-item]")).to_have_count(2)
    page.keyboard.press("Escape")  # back to the chat, on the button that opened it
    expect(widget.frame.locator("[data-part=history]")).to_have_count(0)
    expect(button).to_be_focused()
    expect(widget.frame.locator("[data-part=composer]")).to_be_visible()


@pytest.mark.parametrize(
    ("lang", "title"),
    [("fr", "Vos conversations"), ("es", "Tus conversaciones"), ("ja", "あなたの会話")],
)
def test_the_history_speaks_the_widget_s_language(
    page: Page, demo: Demo, lang: str, title: str
) -> None:
    widget = open_chat(page, demo, f"?locale={lang}")
    widget.send(FIRST)
    widget.wait_until_idle()
    open_history(widget)
    expect(widget.frame.locator("[data-part=history-title]")).to_have_text(title)
    # No key shows untranslated.
    text = widget.frame.locator("[data-part=history]").inner_text()
    assert "history" not in text, text
    shot(page, f"history-{lang}")


def test_on_a_phone_the_history_fills_the_sheet(browser: Browser, demo: Demo) -> None:
    page = phone_page(browser)
    try:
        widget = two_conversations(page, demo)
        open_history(widget)
        frame_box = page.locator("[data-part=hostcall-frame]").bounding_box()
        assert frame_box and frame_box["width"] >= 380, frame_box
        for part in ("history-open", "history-delete"):
            box = widget.frame.locator(f"[data-part={part}]").first.bounding_box()
            assert box and box["height"] >= 44, (part, box)
        shot(page, "history-phone")
    finally:
        page.context.close()


# ---- a signed-in person's history (the host page identifies its visitor) ---------------------


def test_a_person_s_history_follows_them_to_another_browser_and_no_one_else_sees_it(
    browser: Browser, site: Site, hostcall: HostcallServer
) -> None:
    site.user = "ann"
    laptop = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    laptop.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    first = opened(laptop.new_page(), site)
    first.send(FIRST)
    first.wait_until_idle()
    start_new(first)
    first.send(SECOND)
    first.wait_until_idle()
    laptop.close()

    # Ann on another browser: both her conversations, and the older one goes on there.
    other = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    other.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    page = other.new_page()
    widget = opened(page, site)
    open_history(widget)
    assert sorted(titles(widget)) == sorted([FIRST, SECOND])
    shot(page, "history-person-other-browser")
    widget.frame.locator("[data-part=history-item]", has_text=FIRST).locator(
        "[data-part=history-open]"
    ).click()
    mine = widget.frame.locator(USER_TEXTS)
    expect(mine).to_have_text([FIRST], timeout=SLOW)
    widget.wait_until_idle()
    widget.send("from the other browser")
    widget.wait_until_idle()
    assert widget.messages("user") == [FIRST, "from the other browser"]

    # Bob signs in on that browser while Ann's history is open: it goes at once, and his
    # lists none of Ann's conversations.
    open_history(widget)
    site.user = "bob"
    page.evaluate("signIn()")
    expect(widget.frame.locator("[data-part=history]")).to_have_count(0, timeout=SLOW)
    expect(mine).to_have_count(0, timeout=SLOW)
    assert FIRST not in widget.frame.locator("body").inner_text()
    widget.wait_until_idle()
    widget.send("Bob here")
    widget.wait_until_idle()
    open_history(widget)
    assert titles(widget) == ["Bob here"]
    shot(page, "history-second-person")
    other.close()
    owners = people(hostcall)
    assert sorted(p for p in owners.values() if p) == ["ann", "ann", "bob"]
