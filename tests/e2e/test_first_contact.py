"""A visitor's first contact with the widget, in real Chromium: loading it stores nothing
until the person writes; what comes while the chat is closed shows on the launcher; a
mistyped ``data-agent`` shows no launcher at all and says why, at load."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from hostcall.qa.servers import HostPage, serve_host_page
from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import ASK_ADD, ASK_NEXT, SLOW, handler_runs, open_chat, session

pytestmark = pytest.mark.e2e

LAUNCHER = "[data-part=hostcall-launcher]"
BADGE = "[data-part=hostcall-badge]"
HELLO = "hello"  # one reply, no call

#: Records every launcher ever added to the page, and the page API's `error` events, from
#: before the snippet runs (its queue keeps the listener for the loader).
WATCH = """
window.__launchers = 0
window.__errors = []
new MutationObserver(() => {
  if (document.querySelector('[data-part=hostcall-launcher]')) window.__launchers++
}).observe(document, { childList: true, subtree: true })
window.Hostcall = function () { (Hostcall.q = Hostcall.q || []).push(arguments) }
Hostcall('on', 'error', e => window.__errors.push(e))
"""


def rows(demo: Demo, sql: str) -> list[tuple[Any, ...]]:
    """Read the server's database (read-only, beside the running server)."""
    with contextlib.closing(sqlite3.connect(f"file:{demo.db}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


def conversations(demo: Demo) -> int:
    return int(rows(demo, "SELECT count(*) FROM conversations")[0][0])


# ----------------------------------------------------------------------------- no empty ones


def test_loading_the_widget_stores_nothing_until_the_person_writes(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    expect(widget.frame.locator("[data-part=composer-input]")).to_be_editable()
    page.reload()
    widget = Widget(page, timeout=SLOW).open()
    # The standalone page (the console's "try it" pane loads the same) stores nothing either.
    standalone = page.context.new_page()
    standalone.goto(f"{demo.hostcall}/widget/planner")
    expect(standalone.locator("html[data-agent-state=idle]")).to_have_count(1, timeout=SLOW)
    standalone.close()
    assert conversations(demo) == 0
    assert rows(demo, "SELECT count(*) FROM surfaces") == [(0,)]

    # The first message makes the conversation, once, and its first call comes to this page.
    widget.send(ASK_NEXT)
    widget.wait_for_call("read_board_tasks", "done")
    widget.wait_until_idle()
    assert conversations(demo) == 1
    first = session(page, demo)["conversationId"]
    assert rows(demo, "SELECT route FROM calls") == [("handler",)]

    # A reload resumes it, as before: the thread is there, nothing new is stored.
    page.reload()
    widget = Widget(page, timeout=SLOW).open()
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(1)
    assert session(page, demo)["conversationId"] == first
    widget.send(ASK_ADD)
    widget.wait_for_call("create_task", "waiting")
    assert conversations(demo) == 1
    assert rows(demo, "SELECT count(*) FROM messages WHERE role = 'user'") == [(2,)]


def test_a_new_conversation_is_made_with_its_first_message(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_NEXT)
    widget.wait_until_idle()
    widget.frame.locator("[data-part=new-conversation]").click()
    widget.frame.locator("[data-part=restart-yes]").click()
    widget.wait_until_idle()
    assert conversations(demo) == 1  # starting afresh stores nothing yet
    widget.send(ASK_NEXT)
    widget.wait_for_call("read_board_tasks", "done")
    widget.wait_until_idle()
    assert conversations(demo) == 2
    assert rows(demo, "SELECT count(*) FROM messages WHERE role = 'user'") == [(2,)]


def test_a_tab_opened_before_the_first_message_joins_the_conversation(
    page: Page, demo: Demo
) -> None:
    widget_a = open_chat(page, demo)
    page_b = page.context.new_page()
    widget_b = open_chat(page_b, demo)
    assert conversations(demo) == 0
    widget_a.send(ASK_NEXT)
    # B joins once the message is in; the message's call ran in A, where it was written.
    expect(widget_b.calls("read_board_tasks")).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(widget_b.last_reply()).to_contain_text("Here is the order I suggest", timeout=SLOW)
    assert handler_runs(page, "read_board_tasks") == 1
    assert handler_runs(page_b, "read_board_tasks") == 0
    assert conversations(demo) == 1
    assert session(page_b, demo)["conversationId"] == session(page, demo)["conversationId"]
    widget_b.wait_until_idle()
    widget_b.send("hello")  # and goes on from there
    expect(widget_a.last_reply()).to_contain_text("Hello!", timeout=SLOW)
    assert conversations(demo) == 1


# ----------------------------------------------------------------------------- the badge


class HeldMessages:
    """Holds the widget's message posts until let go: the chat is closed meanwhile, so what
    the run brings arrives while it is closed."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.held: list[Route] = []
        page.context.route("**/api/conversations/*/messages", self.hold)

    def hold(self, route: Route) -> None:
        self.held.append(route)

    def release(self) -> None:
        for _ in range(500):  # Playwright dispatches the route while it waits
            if self.held:
                break
            self.page.wait_for_timeout(20)
        assert len(self.held) == 1, f"{len(self.held)} message posts held"
        self.held.pop().continue_()


def test_the_launcher_counts_replies_and_approvals_that_came_while_closed(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo)
    launcher = page.locator(LAUNCHER)
    badge = page.locator(BADGE)
    held = HeldMessages(page)

    widget.send(ASK_NEXT)
    launcher.click()  # closed while the run has not started
    expect(page.locator("[data-part=hostcall-panel]")).to_be_hidden()
    held.release()
    widget.wait_until_idle()
    expect(badge).to_have_text("2")  # "Let me look at your board.", then the reply
    expect(launcher).to_have_accessible_name("Chat, 2 unread")
    shot(page, "first-contact-badge-reply")

    launcher.click()  # opening clears it
    expect(badge).to_be_hidden()
    expect(launcher).to_have_accessible_name("Chat")

    widget.send(HELLO)
    launcher.click()
    held.release()
    widget.wait_until_idle()
    expect(badge).to_have_text("1")
    expect(launcher).to_have_accessible_name("Chat, 1 unread")
    launcher.click()
    expect(badge).to_be_hidden()

    widget.send(ASK_ADD)
    launcher.click()
    held.release()
    expect(widget.call("create_task")).to_have_attribute("data-state", "waiting", timeout=SLOW)
    expect(badge).to_have_text("1")  # the approval card
    expect(launcher).to_have_accessible_name("Chat, 1 unread")
    launcher.click()
    expect(badge).to_be_hidden()
    expect(widget.call("create_task").locator("[data-part=confirm]")).to_be_visible()
    # Nothing came while it was open: no badge for what the person saw.
    widget.approve("create_task")
    widget.wait_until_idle()
    expect(badge).to_be_hidden()
    expect(launcher).to_have_accessible_name("Chat")


def test_the_count_grows_with_each_reply_another_tab_brings(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_NEXT)
    widget.wait_until_idle()
    page.locator(LAUNCHER).click()  # closed, and the conversation goes on in another tab
    other = page.context.new_page()
    there = open_chat(other, demo)
    for n in (1, 2):
        there.send(HELLO)
        there.wait_until_idle()
        expect(page.locator(BADGE)).to_have_text(str(n), timeout=SLOW)
    expect(page.locator(LAUNCHER)).to_have_accessible_name("Chat, 2 unread")
    shot(page, "first-contact-badge-two")
    page.locator(LAUNCHER).click()
    expect(page.locator(BADGE)).to_be_hidden()
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(3)


@pytest.mark.parametrize(
    ("locale", "name"),
    [("fr", "Discussion, 1 non lu"), ("es", "Chat, 1 sin leer"), ("ja", "チャット、未読 1 件")],
)
def test_the_badge_speaks_the_page_locale(page: Page, demo: Demo, locale: str, name: str) -> None:
    widget = open_chat(page, demo, f"?locale={locale}")
    held = HeldMessages(page)
    widget.send(HELLO)
    page.locator(LAUNCHER).click()
    held.release()
    widget.wait_until_idle()
    expect(page.locator(BADGE)).to_have_text("1")
    expect(page.locator(LAUNCHER)).to_have_accessible_name(name)
    shot(page, f"first-contact-badge-{locale}")


# ----------------------------------------------------------------------------- data-agent


def test_a_mistyped_agent_shows_no_launcher_and_says_why_at_load(page: Page, demo: Demo) -> None:
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.add_init_script(WATCH)
    with serve_host_page(HostPage(demo.hostcall, "plannr")) as host:
        page.goto(host.url)
        expected = (
            "Hostcall: no widget: there is no agent 'plannr' on this server (check the "
            "snippet's data-agent)"
        )
        page.wait_for_function("() => window.__errors.length > 0", timeout=SLOW)
        assert page.evaluate("window.__errors") == [
            {"code": "unknown_agent", "message": expected.removeprefix("Hostcall: no widget: ")}
        ]
        assert expected in console, console
        # Never drawn, so nothing to hover, and nothing framed or fetched for it.
        page.mouse.move(1240, 760)
        assert page.evaluate("window.__launchers") == 0
        expect(page.locator(LAUNCHER)).to_have_count(0)
        drawn = page.locator("[data-part=hostcall-panel], [data-part=hostcall-frame]")
        expect(drawn).to_have_count(0)
        # The page's commands still do nothing harmful.
        page.evaluate("Hostcall('open'); Hostcall('send', 'hello')")
        expect(page.locator("[data-part=hostcall-frame]")).to_have_count(0)
        shot(page, "first-contact-unknown-agent")
    assert "widget refused: unknown_agent: agent=plannr" in demo.output()
    assert conversations(demo) == 0
