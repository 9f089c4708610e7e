"""Starters, follow-ups and the conversation's rating in real Chromium: the widget framed in
the task board (localhost) from Hostcall (127.0.0.1), its planner given a ``suggestions`` and
a ``rating`` block. Opening the chat creates nothing; a starter, picked by keyboard, creates
the conversation and sends; a follow-up sends; a reply that ends the conversation asks for a
rating, once, which the operator's console then shows."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, FrameLocator, Page, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import shot, start_demo
from tests.e2e.test_console import SLOW, Site, _users_add, person

pytestmark = pytest.mark.e2e
WIDGET = "[data-part=hostcall-frame]"
PHONE = {"width": 390, "height": 760}

SUGGESTIONS = {
    "starters": {
        "en": ["Hello", "What should I work on next?"],
        "fr": ["Bonjour", "Que dois-je faire ensuite ?"],
    },
    # The planner's greeting reply says "Ask me …": offer the visitor a way to finish.
    "follow_ups": [
        {"when": ["ask me"], "offer": {"en": ["Thanks, that's all"], "fr": ["Merci, c'est tout"]}}
    ],
}
# Its fallback reply (to "Thanks, that's all") ends the conversation.
RATING = {"after_handoff": True, "when": ["I can read your board"]}


def serve(tmp_path: Path, suggestions: dict[str, object]) -> Site:
    """The demo, its planner given ``suggestions`` and the ``RATING`` block."""
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    planner |= {"suggestions": suggestions, "rating": RATING}
    (agents / "planner.json").write_text(json.dumps(planner))
    db = tmp_path / "e2e.db"
    _users_add(db, "olga", "operator")
    return Site(start_demo(tmp_path, db=db, extra=["--agents", str(agents)]), agents)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    running = serve(tmp_path, SUGGESTIONS)
    yield running
    running.demo.stop()


def board(browser: Browser, site: Site, *, theme: str = "light", phone: bool = False,
          locale: str = "en-US") -> tuple[Page, FrameLocator]:  # fmt: skip
    """The visitor's task board, the chat opened (the widget able to send)."""
    size = PHONE if phone else {"width": 900, "height": 820}
    options: dict[str, object] = (
        {"is_mobile": True, "has_touch": True, "screen": PHONE} if phone else {}
    )
    context = browser.new_context(viewport=size, locale=locale, color_scheme=theme, **options)  # type: ignore[arg-type]
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.goto(f"{site.demo.board}?theme={theme}")
    page.locator("[data-part=hostcall-launcher]").click()
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    return page, widget


def test_a_starter_creates_the_conversation_a_follow_up_sends_and_the_end_is_rated_once(
    browser: Browser, site: Site
) -> None:
    page, widget = board(browser, site)
    posted: list[str] = []
    page.on("request", lambda r: r.method == "POST" and posted.append(r.url))
    starters = widget.locator("[data-part=starters]")
    expect(starters).to_have_attribute("aria-label", "Suggested questions")
    expect(starters.locator("[data-part=starter]")).to_have_text(SUGGESTIONS["starters"]["en"])
    shot(page, "suggestions-starters-light")
    # Opening the chat created nothing: no conversation until the visitor sends.
    assert not [u for u in posted if u.endswith("/conversations")], posted

    # A starter picked by keyboard: the conversation is made and the starter sent.
    starters.locator("[data-part=starter]").first.focus()
    page.keyboard.press("Enter")
    expect(
        widget.locator("[data-part=message][data-role=user] [data-part=message-text]")
    ).to_have_text(["Hello"])
    expect(starters).to_have_count(0)
    assert [u for u in posted if u.endswith("/conversations")], posted
    follow = widget.locator("[data-part=follow-ups]")
    expect(follow.locator("[data-part=follow-up]")).to_have_text(["Thanks, that's all"])
    expect(follow).to_have_attribute("role", "group")

    # A follow-up clicked: sent; the reply ends the conversation, and the rating is asked.
    follow.locator("[data-part=follow-up]").click()
    expect(
        widget.locator("[data-part=message][data-role=user] [data-part=message-text]")
    ).to_have_text(["Hello", "Thanks, that's all"])
    expect(follow).to_have_count(0)
    rating = widget.locator("[data-part=rating]")
    expect(rating.locator("[data-part=rating-question]")).to_have_text("How was this conversation?")
    expect(widget.locator("[data-part=live]")).to_have_text("How was this conversation?")
    # Five points, read out as such; picked with the arrow keys; a remark; sent by keyboard.
    scores = rating.get_by_role("radio")
    expect(scores).to_have_count(5)
    expect(scores.nth(3)).to_have_accessible_name("4 out of 5")
    scores.first.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(scores.nth(3)).to_be_checked()
    rating.locator("[data-part=rating-remark]").fill("Quick, thanks.")
    shot(page, "suggestions-rating-light")
    rating.locator("[data-part=rating-send]").focus()
    page.keyboard.press("Enter")
    expect(rating.locator("[data-part=rating-thanks]")).to_have_text(
        "Thanks for rating this conversation."
    )
    # The end again: asked once, not twice.
    box = widget.locator("[data-part=composer-input]")
    box.fill("Thanks again")
    box.press("Enter")
    expect(widget.locator("[data-part=message][data-role=assistant]")).to_have_count(4)
    expect(widget.locator("[data-part=rating]")).to_have_count(1)

    # A new conversation: empty again, the starters are back (and nothing is created yet).
    widget.locator("[data-part=new-conversation]").click()
    widget.locator("[data-part=restart-yes]").click()
    expect(widget.locator("[data-part=starters]")).to_have_count(1)
    expect(widget.locator("[data-part=starter]")).to_have_count(2)
    expect(widget.locator("[data-part=rating]")).to_have_count(0)

    console = person(browser, site.demo, "olga")
    console.goto(f"{site.demo.hostcall}/console/conversations")
    expect(console.locator("[data-part=conversation]")).to_have_count(1)
    console.locator("[data-part=conversation] [data-part=open]").first.click()
    shown = console.locator("[data-part=conversation-rating]")
    expect(shown.locator("[data-part=rating-score]")).to_have_text("4 out of 5")
    expect(shown.locator("[data-part=rating-remark]")).to_have_text("Quick, thanks.")
    shot(console, "suggestions-console-rating")
    console.context.close()
    page.context.close()


@pytest.mark.parametrize(
    ("theme", "phone", "locale"), [("dark", False, "fr-FR"), ("light", True, "en-US")]
)
def test_starters_follow_ups_and_rating_in_dark_in_french_and_on_a_phone(
    browser: Browser, site: Site, theme: str, phone: bool, locale: str
) -> None:
    page, widget = board(browser, site, theme=theme, phone=phone, locale=locale)
    lang = locale[:2]
    starters = widget.locator("[data-part=starter]")
    expect(starters).to_have_text(SUGGESTIONS["starters"][lang])
    name = f"suggestions-{'phone' if phone else theme}-{lang}"
    shot(page, f"{name}-starters")
    starters.first.click()
    widget.locator("[data-part=follow-up]").click()
    expect(widget.locator("[data-part=rating] [data-part=rating-question]")).to_be_visible()
    if phone:  # touch-sized points
        point = widget.locator("[data-part=rating-score] span").first.bounding_box()
        assert point and point["height"] >= 44, point
    shot(page, f"{name}-rating")
    page.context.close()


def test_a_person_handing_the_conversation_back_asks_for_its_rating_in_japanese(
    browser: Browser, site: Site
) -> None:
    page, widget = board(browser, site, locale="ja-JP")
    widget.locator("[data-part=starter]").first.click()  # "Hello": the conversation is made
    expect(widget.locator("[data-part=follow-up]")).to_have_text(["Thanks, that's all"])
    console = person(browser, site.demo, "olga")
    console.goto(f"{site.demo.hostcall}/console/conversations")
    console.locator("[data-part=conversation] [data-part=open]").first.click()
    console.once("dialog", lambda d: d.accept())
    console.locator("[data-part=take-over]").click()
    expect(widget.locator("[data-part=notice]").last).to_contain_text("olga")
    expect(widget.locator("[data-part=rating]")).to_have_count(0)  # not while a person holds it
    console.locator("[data-part=hand-back]").click()
    rating = widget.locator("[data-part=rating]")
    expect(rating.locator("[data-part=rating-question]")).to_have_text("この会話はいかがでしたか？")  # noqa: RUF001
    expect(rating.get_by_role("radio").first).to_have_accessible_name("5 段階中 1")
    rating.get_by_role("radio").nth(4).check()
    rating.locator("[data-part=rating-send]").click()
    expect(rating.locator("[data-part=rating-thanks]")).to_be_visible()
    shot(page, "suggestions-ja-handed-back-rating")
    console.reload()
    expect(
        console.locator("[data-part=conversation-rating] [data-part=rating-score]")
    ).to_have_text("5 out of 5")
    console.context.close()
    page.context.close()


# The reply that ends the conversation offers a follow-up too: the signal that the widget heard
# that reply, for in the same step it asks for the rating, or does not.
ENDING_OFFERS = {"when": ["I can read your board"], "offer": {"en": ["Show my board"]}}


@pytest.fixture
def ending_site(tmp_path: Path) -> Iterator[Site]:
    follow_ups = [*SUGGESTIONS["follow_ups"], ENDING_OFFERS]  # type: ignore[misc]
    running = serve(tmp_path, {**SUGGESTIONS, "follow_ups": follow_ups})
    yield running
    running.demo.stop()


def test_a_rated_conversation_is_not_asked_again_after_a_reload(
    browser: Browser, ending_site: Site
) -> None:
    page, widget = board(browser, ending_site)
    widget.locator("[data-part=starter]").first.click()
    widget.locator("[data-part=follow-up]").click()
    rating = widget.locator("[data-part=rating]")
    rating.get_by_role("radio").nth(1).check()
    rating.locator("[data-part=rating-send]").click()
    expect(rating.locator("[data-part=rating-thanks]")).to_be_visible()

    page.reload()
    chat = Widget(page, timeout=SLOW).open()
    mine = chat.frame.locator("[data-part=message][data-role=user] [data-part=message-text]")
    expect(mine).to_have_text(["Hello", "Thanks, that's all"])  # the conversation resumed
    expect(chat.frame.locator("[data-part=rating]")).to_have_count(0)  # nothing asked on reload
    # The end again: its follow-up shows that the reply was heard, and no question came with it.
    chat.send("Thanks, that's all")
    expect(chat.frame.locator("[data-part=follow-up]")).to_have_text(["Show my board"])
    expect(chat.frame.locator("[data-part=rating]")).to_have_count(0)
    shot(page, "suggestions-rated-reloaded")
    page.context.close()


def test_a_rating_asked_and_not_answered_comes_back_once_after_a_reload(
    browser: Browser, ending_site: Site
) -> None:
    page, widget = board(browser, ending_site)
    widget.locator("[data-part=starter]").first.click()
    widget.locator("[data-part=follow-up]").click()
    expect(widget.locator("[data-part=rating]")).to_have_count(1)  # asked; the visitor leaves

    page.reload()
    chat = Widget(page, timeout=SLOW).open()
    mine = chat.frame.locator("[data-part=message][data-role=user] [data-part=message-text]")
    expect(mine).to_have_text(["Hello", "Thanks, that's all"])
    # The question is there again, as it was, with what followed the reply; not asked anew.
    rating = chat.frame.locator("[data-part=rating]")
    expect(rating).to_have_count(1)
    expect(chat.frame.locator("[data-part=follow-up]")).to_have_text(["Show my board"])
    replies = chat.frame.locator("[data-part=message][data-role=assistant]")
    before = replies.count()
    chat.send("Thanks, that's all")
    expect(replies).to_have_count(before + 1)
    chat.wait_until_idle()
    expect(chat.frame.locator("[data-part=follow-up]")).to_have_text(["Show my board"])
    expect(rating).to_have_count(1)
    rating.get_by_role("radio").nth(3).check()
    rating.locator("[data-part=rating-send]").click()
    expect(rating.locator("[data-part=rating-thanks]")).to_be_visible()
    shot(page, "suggestions-asked-reloaded")
    page.context.close()
