"""Feedback and human handoff in real Chromium: the visitor's widget framed in the task
board (localhost) from Hostcall (127.0.0.1), and an operator's console in another browser,
side by side. The visitor rates a reply; the operator finds it by its rating, takes the
conversation over, writes as themselves, and hands it back to the agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, FrameLocator, Page, expect

from tests.e2e.conftest import Demo, shot
from tests.e2e.test_console import SLOW, Site, ask, person, site
from tests.e2e.test_ui import audit, widget_frame

pytestmark = pytest.mark.e2e
__all__ = ["site"]  # test_console's fixture: the demo with accounts made by `hostcall users`
WIDGET = "[data-part=hostcall-frame]"


@pytest.fixture
def board(browser: Browser, site: Site) -> Iterator[tuple[Page, FrameLocator]]:
    """The visitor: the task board on localhost, the chat opened."""
    context = browser.new_context(viewport={"width": 900, "height": 820}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.goto(site.demo.board)
    page.locator("[data-part=hostcall-launcher]").click()
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    yield page, widget
    context.close()


def _reply(widget: FrameLocator, n: int = 1) -> None:
    expect(widget.locator("[data-part=message][data-role=assistant][data-message-id]")
           .nth(n - 1)).to_contain_text("Hello!")  # fmt: skip


def test_the_visitor_rates_a_reply_by_keyboard_and_the_operator_finds_it(
    browser: Browser, site: Site, board: tuple[Page, FrameLocator]
) -> None:
    demo: Demo = site.demo
    page, widget = board
    # The rating bar is not part of the first screen: nothing of it loads before a reply.
    loaded: list[str] = []
    page.on("request", lambda r: loaded.append(r.url.rsplit("/", 1)[-1].split("?")[0]))
    ask(widget, "hello")
    _reply(widget)
    reply = widget.locator("[data-part=message][data-role=assistant][data-message-id]").first
    bar = reply.locator("[data-part=feedback]")
    expect(bar).to_have_attribute("aria-label", "Rate this reply")
    assert {"people.js", "people.css", "locale-en-people.js"} <= set(loaded)
    down = bar.locator("[data-part=feedback-down]")
    expect(down).to_have_attribute("aria-pressed", "false")
    down.focus()
    page.keyboard.press("Enter")
    expect(down).to_have_attribute("aria-pressed", "true")
    expect(bar.locator("[data-part=feedback-status]")).to_have_text("Thanks for your feedback.")
    comment = bar.locator("[data-part=feedback-comment]")
    expect(comment).to_be_visible()
    page.keyboard.press("Tab")  # from the thumb to the comment that opened after it
    expect(comment).to_be_focused()
    page.keyboard.type("It did not say what my board holds.")
    shot(page, "feedback-widget-comment")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(comment).to_be_hidden()
    shot(page, "feedback-widget")
    audit(widget_frame(page), "a rated reply")

    # After a reload the visitor's rating is still shown.
    page.reload()
    page.locator("[data-part=hostcall-launcher]").click()
    widget = page.frame_locator(WIDGET)
    again = widget.locator("[data-part=message][data-role=assistant][data-message-id]").first
    expect(again.locator("[data-part=feedback-down]")).to_have_attribute("aria-pressed", "true")

    console = person(browser, demo, "olga")
    console.goto(f"{demo.hostcall}/console/conversations")
    console.locator("[data-part=filter-feedback]").select_option("down")
    console.locator("[data-part=apply]").click()
    row = console.locator("[data-part=conversation]")
    expect(row).to_have_count(1)
    expect(row.locator("[data-part=feedback-counts]")).to_have_text("0 good · 1 bad")
    shot(console, "feedback-console-list")
    row.locator("[data-part=open]").click()
    rated = console.locator("[data-part=turn][data-role=assistant] [data-part=feedback]")
    said = " Visitor\u2019s rating: bad \u2014 \u201cIt did not say what my board holds.\u201d"
    expect(rated).to_have_text(said)
    shot(console, "feedback-console-conversation")


def test_an_operator_takes_over_writes_and_hands_back_side_by_side(
    browser: Browser, site: Site, board: tuple[Page, FrameLocator]
) -> None:
    demo: Demo = site.demo
    page, widget = board
    ask(widget, "hello")
    _reply(widget)

    console = person(browser, demo, "olga")
    console.goto(f"{demo.hostcall}/console/conversations")
    console.locator("[data-part=conversation] [data-part=open]").first.click()
    expect(console.locator("[data-part=handoff-state]")).to_have_text(
        "The agent answers this conversation."
    )
    console.once("dialog", lambda d: d.accept())
    console.locator("[data-part=take-over]").click()
    expect(console.locator("[data-part=handoff-state][data-state=taken]")).to_contain_text(
        "You hold this conversation"
    )
    notices = widget.locator("[data-part=notice]")
    expect(notices.last).to_have_text("olga joined the conversation.")

    # The visitor writes: no run, no "working"; the operator reads it live.
    ask(widget, "Can you move my deadline to Friday?")
    expect(console.locator("[data-part=turn][data-role=user]").last).to_contain_text(
        "Can you move my deadline to Friday?", timeout=SLOW
    )
    expect(widget.locator("[data-part=working]")).to_be_hidden()
    expect(console.locator("[data-part=run]")).to_have_count(1)

    box = console.locator("[data-part=person-message]")
    box.fill("Hi, I am Olga from the team. Done: your deadline is Friday.")
    console.locator("[data-part=send-person]").click()
    said = widget.locator("[data-part=message][data-role=operator]")
    expect(said).to_contain_text("Done: your deadline is Friday.")
    expect(said.locator("[data-part=message-author]")).to_have_text("olga")
    expect(box).to_have_value("")
    shot(page, "handoff-widget")
    shot(console, "handoff-console")
    audit(widget_frame(page), "a person of the team in the conversation")
    audit(console, "the console holding a conversation")

    console.locator("[data-part=hand-back]").click()
    expect(notices.last).to_have_text("olga left the conversation. The assistant answers again.")
    expect(console.locator("[data-part=take-over]")).to_be_visible()
    ask(widget, "hello again")
    _reply(widget, 2)
    expect(console.locator("[data-part=run]")).to_have_count(2, timeout=SLOW)
    shot(page, "handoff-widget-after")


def test_the_widget_speaks_the_visitors_language_for_a_person_and_for_ratings(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": 900, "height": 820}, locale="fr-FR")
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.goto(site.demo.board)
    page.locator("[data-part=hostcall-launcher]").click()
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    ask(widget, "bonjour")
    reply = widget.locator("[data-part=message][data-role=assistant][data-message-id]").first
    expect(reply.locator("[data-part=feedback]")).to_have_attribute(
        "aria-label", "Évaluer cette réponse"
    )
    console = person(browser, site.demo, "olga")
    console.goto(f"{site.demo.hostcall}/console/conversations")
    console.locator("[data-part=conversation] [data-part=open]").first.click()
    console.once("dialog", lambda d: d.accept())
    console.locator("[data-part=take-over]").click()
    expect(widget.locator("[data-part=notice]").last).to_have_text(
        "olga a rejoint la conversation."
    )
    shot(page, "handoff-widget-fr")
    context.close()
