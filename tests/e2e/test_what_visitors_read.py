"""What the visitor reads, in real Chromium (the board on localhost, the widget on 127.0.0.1):
a link in untrusted text shows where it goes and a bidi override cannot reverse text; a person
of the team who writes while the chat is closed badges its launcher; the built-in person tool
reads as what it does; a stopped reply's Retry goes once the conversation has moved on."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import SLOW, session
from tests.e2e.test_console import _users_add, person

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}
LANGUAGES = {
    "en-US": "Asking for a person…",
    "fr-FR": "Appel à une personne de l\u2019équipe…",
    "es-ES": "Llamando a una persona del equipo…",
    "ja-JP": "担当者を呼んでいます…",
}


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The demo, its planner also repeating what it is told (text the visitor cannot vouch
    for, as a tool's output quoted by a model) and asking for a person; an operator, olga."""
    tmp = tmp_path_factory.mktemp("desk")
    agents = tmp / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    path = agents / "planner.json"
    planner = json.loads(path.read_text())
    planner["model"]["rules"][:0] = [
        {"match": "(?s)^repeat: (?P<said>.+)$", "reply": "{{ said }}"},
        {"match": "(?i)a person", "tool": "ask_for_person",
         "arguments": {"reason": "the visitor asked"},
         "reply": "Someone from the team will join you here."},
    ]  # fmt: skip
    planner["tools"].append({"kind": "person", "name": "ask_for_person",
                             "description": "Ask for a person of the team."})  # fmt: skip
    path.write_text(json.dumps(planner))
    db = tmp / "e2e.db"
    _users_add(db, "olga", "operator")
    running = start_demo(tmp, db=db, extra=["--agents", str(agents)])
    yield running
    running.stop()


def _visitor(browser: Browser, demo: Demo, locale: str = "en-US", **options: object) -> Widget:
    context = browser.new_context(locale=locale, **options)  # type: ignore[arg-type]
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.goto(demo.board)
    return Widget(page, timeout=SLOW).open()


def test_a_link_shows_where_it_goes_and_an_override_cannot_reverse_text(
    browser: Browser, desk: Demo
) -> None:
    widget = _visitor(browser, desk, viewport={"width": 900, "height": 820})
    box = widget.frame.locator("[data-part=composer-input]")
    box.fill(
        "repeat: Pay at [your bank](https://evil.example/login), see https://ok.example"
        " or [ok.example](https://ok.example). Say \u202elive\u202c now."
    )
    box.press("Enter")
    expect(widget.last_reply()).to_contain_text("now.")
    widget.wait_until_idle()
    reply = widget.last_reply()
    links = reply.locator("a")
    expect(links).to_have_count(3)
    # Words that are not the address: the host follows them, the whole address is the title.
    expect(links.nth(0)).to_have_text("your bank (evil.example)")
    expect(links.nth(0).locator("[data-part=link-host]")).to_have_text(" (evil.example)")
    expect(links.nth(0)).to_have_attribute("href", "https://evil.example/login")
    expect(links.nth(0)).to_have_attribute("title", "https://evil.example/login")
    # The address itself, or its host, needs nothing more.
    expect(links.nth(1)).to_have_text("https://ok.example")
    expect(links.nth(2)).to_have_text("ok.example")
    # U+202E would show "live" as "evil": it is gone, and the text takes its own direction.
    expect(reply).to_have_attribute("dir", "auto")
    assert "Say live now." in reply.inner_text()
    for part in ("message-text", "history-item-title"):
        texts = widget.frame.locator(f"[data-part={part}]").all_text_contents()
        assert not any(re.search("[\u202a-\u202e\u2066-\u2069]", t) for t in texts), texts
    shot(widget.page, "untrusted-link-host")
    widget.page.context.close()


def test_a_person_writing_while_the_chat_is_closed_badges_the_launcher(
    browser: Browser, desk: Demo
) -> None:
    widget = _visitor(browser, desk, viewport={"width": 900, "height": 820})
    page = widget.page
    widget.send("I would like a person, please")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Someone from the team will join you here.")
    launcher = page.locator("[data-part=hostcall-launcher]")
    conversation = session(page, desk)["conversationId"]
    launcher.click()  # closed: the agent's reply is read, nothing is unread
    expect(launcher).to_have_attribute("aria-expanded", "false")
    expect(page.locator("[data-part=hostcall-badge]:visible")).to_have_count(0)

    console = person(browser, desk, "olga")
    console.goto(f"{desk.hostcall}/console/conversations/{conversation}")
    console.once("dialog", lambda d: d.accept())
    console.locator("[data-part=take-over]").click()
    expect(console.locator("[data-part=handoff-state][data-state=taken]")).to_be_visible()
    console.locator("[data-part=person-message]").fill("Hi, Olga here. How can I help?")
    console.locator("[data-part=send-person]").click()
    expect(console.locator("[data-part=person-message]")).to_have_value("")

    # "olga joined", then her message: two things to read.
    badge = page.locator("[data-part=hostcall-badge]")
    expect(badge).to_have_text("2")
    expect(launcher).to_have_attribute("aria-label", re.compile(r", 2 unread$"))
    shot(page, "handoff-closed-badge")
    launcher.click()
    said = widget.frame.locator("[data-part=message][data-role=operator]")
    expect(said).to_contain_text("How can I help?")
    expect(badge).to_be_hidden()
    page.context.close()
    console.context.close()


@pytest.mark.parametrize("locale", list(LANGUAGES))
def test_the_person_tool_reads_as_asking_for_a_person_without_its_input(
    browser: Browser, desk: Demo, locale: str
) -> None:
    widget = _visitor(browser, desk, locale, viewport={"width": 900, "height": 820})
    widget.send("a person, please")
    widget.wait_until_idle()
    card = widget.call("ask_for_person")
    expect(card.locator("[data-part=tool-call-title]")).to_have_text(
        re.compile(re.escape(LANGUAGES[locale]) + "$")
    )
    expect(card.locator("[data-part=tool-call-title] code")).to_have_count(0)
    expect(card.locator("[data-part=tool-call-input]")).to_be_hidden()
    expect(card.locator("[data-part=tool-call-result]")).to_have_count(0)
    assert "the visitor asked" not in card.inner_text()
    shot(widget.page, f"person-tool-card-{locale[:2]}")
    widget.page.context.close()


def test_a_stopped_reply_s_retry_goes_once_the_conversation_moves_on_on_a_phone(
    browser: Browser, desk: Demo
) -> None:
    widget = _visitor(
        browser, desk, viewport=PHONE, screen=PHONE, device_scale_factor=2, is_mobile=True,
        has_touch=True,
    )  # fmt: skip
    frame = widget.frame
    widget.send("Add a task to write the notes")
    widget.wait_for_call("create_task", "waiting")
    widget.stop()
    stopped = widget.error()
    expect(stopped).to_contain_text("You stopped this reply.")
    expect(frame.locator("[data-part=retry]")).to_have_count(1)
    shot(widget.page, "run-control-phone-stopped")
    widget.send("hello")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_contain_text("Hello!")
    # What happened stays in the thread; its Retry, which would retry an old turn, does not.
    expect(frame.locator("[data-part=error]", has_text="You stopped this reply.")).to_have_count(1)
    expect(frame.locator("[data-part=retry]")).to_have_count(0)
    shot(widget.page, "run-control-phone-moved-on")
    widget.page.context.close()


def test_a_first_visit_meets_no_error_response(browser: Browser, desk: Demo) -> None:
    """Nothing to resume is the usual first visit, not a fault: no 4xx in the page's console."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(SLOW)
    errors: list[str] = []
    page.on("response", lambda r: errors.append(f"{r.status} {r.request.method} {r.url}")
            if r.status >= 400 and r.url.startswith(desk.hostcall) else None)  # fmt: skip
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and str(m.location.get("url", "")).startswith(desk.hostcall)
            else None)  # fmt: skip
    page.goto(desk.board)
    widget = Widget(page, timeout=SLOW).open()
    widget.send("hello")
    widget.wait_until_idle()
    assert errors == []
    context.close()
