"""Surfaces in real Chromium: the call goes to the tab where the person is, reads
run again after a reload or a navigation (same call id, no form), writes never run twice,
and "for this conversation" in the confirmation card stops the questions.

Tabs of one browser context share the widget's conversation (its storage), while each tab
keeps its own demo board (sessionStorage): which board changed says which tab ran the call.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import (
    ASK_NEXT,
    SLOW,
    board_titles,
    calls_of,
    handler_runs,
    open_chat,
    session,
    snapshot,
)

pytestmark = pytest.mark.e2e

RUNNING_HERE = "Running in the page…"
RUNNING_ELSEWHERE = "Running in another tab…"
RUNNING_AGAIN = "Running again here: the page that started it was reloaded or closed…"
WRITE_GONE = (
    "The page that was running this action closed before it finished. It may already have "
    "taken effect, so it is not run again: check, then enter the result yourself."
)


@pytest.fixture
def context(page: Page) -> BrowserContext:
    return page.context


def tab(context: BrowserContext, demo: Demo, query: str = "") -> tuple[Page, Widget]:
    page = context.new_page()
    page.set_default_timeout(10_000)
    return page, open_chat(page, demo, query)


def note(card: Locator) -> Locator:
    return card.locator("[data-part=tool-call-note]")


def reopen(page: Page) -> Widget:
    """After a reload or a navigation: the panel as the loader restores it, open. Not
    ``Widget.open()``: that waits for idle, and here a call may still be waiting."""
    widget = Widget(page, timeout=SLOW)
    if page.locator("[data-part=hostcall-panel]").is_hidden():
        page.locator("[data-part=hostcall-launcher]").click()
    expect(widget.frame.locator("[data-part=composer-input]")).to_be_visible(timeout=SLOW)
    return widget


# ---- two tabs: the handler runs where the person approved -----------------------------------


def test_approving_in_tab_b_runs_the_handler_in_b_ten_times_out_of_ten(
    page: Page, demo: Demo, context: BrowserContext
) -> None:
    widget_a = open_chat(page, demo)
    page_b, widget_b = tab(context, demo, "?delay=1200")
    for n in range(10):
        edit = n >= 7  # the last three approve with an edited title
        widget_a.send(f"Add a task to check item {n}")
        card_a, card_b = widget_a.call("create_task"), widget_b.call("create_task")
        expect(card_b.locator("[data-part=approve]")).to_be_visible(timeout=SLOW)
        title = f"Check item {n}"
        if edit:
            title = f"Check item {n} twice"
            card_b.locator("[data-part=edit]").click()
            card_b.locator("[data-part=input][data-path='/title']").fill(title)
            card_b.locator("[data-part=submit]").click()
        else:
            card_b.locator("[data-part=approve]").click()
        expect(note(card_b)).to_have_text(RUNNING_HERE, timeout=SLOW)
        expect(note(card_a)).to_have_text(RUNNING_ELSEWHERE, timeout=SLOW)
        if n == 0:
            shot(page, "surfaces-01-tab-a-running-elsewhere")
        expect(card_a).to_have_attribute("data-state", "done", timeout=SLOW)
        expect(card_b).to_have_attribute("data-state", "done", timeout=SLOW)
        expect(widget_a.last_reply()).to_contain_text(f"Done: I created {title}", timeout=SLOW)
        widget_a.wait_until_idle()
        assert handler_runs(page_b, "create_task") == n + 1, f"run {n}"
        assert handler_runs(page, "create_task") == 0, f"run {n}"
        assert title in board_titles(page_b, "todo")
        assert title not in board_titles(page, "todo")
    shot(page_b, "surfaces-02-tab-b-ran-it")
    calls = calls_of(snapshot(page, demo), "create_task")
    assert len(calls) == 10 and len({c["surfaceId"] for c in calls}) == 1
    assert all(c["state"] == "answered" and c["approval"]["edited"] == (i >= 7)
               for i, c in enumerate(calls))  # fmt: skip


# ---- activity on the host page, outside the frame ------------------------------------------


def _say(demo: Demo, pages: list[Page], text: str) -> None:
    """Send a message as the widget would, but from the test: no click, key or focus in any
    tab, so nothing here counts as the person's activity."""
    for candidate in pages:  # a tab another tab's resume replaced holds a dead session
        saved = session(candidate, demo)
        cid, auth = saved["conversationId"], {"Authorization": f"Bearer {saved['sessionToken']}"}
        sent = httpx.post(f"{demo.hostcall}/api/conversations/{cid}/messages",
                          json={"text": text}, headers=auth, timeout=5)  # fmt: skip
        if sent.status_code != 401:
            assert sent.status_code == 202, sent.text
            return
    raise AssertionError("no tab holds a live session")


def _activity(page: Page) -> Any:
    """Until the server has taken the tab's activity (its surface touched): a request only
    sent may reach the server after the message that follows, whose call then goes to the
    tab that was active before. Taken means a 2xx: the other tab's resume rotated the
    session, so this tab's first try is refused (401), and the activity counts only when it
    is sent again after this tab's own resume."""
    return page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/activity") and r.ok
    )


def test_typing_clicking_or_focusing_on_the_host_page_makes_that_tab_the_one_calls_go_to(
    page: Page, demo: Demo, context: BrowserContext
) -> None:
    # Both tabs' clocks are Playwright's, run forward past the 2 s activity throttles (the
    # loader's and the widget's) rather than waited out.
    context.clock.install()
    widget_a = open_chat(page, demo)
    page_b, widget_b = tab(context, demo)
    # The conversation is made with its first message; tab B joins it then.
    widget_a.send("hello")
    widget_a.wait_until_idle()
    expect(widget_b.frame.locator("[data-part=message][data-role=user]")).to_have_count(1)
    checkbox = page.locator("[data-part=toggle-manual-create]")
    for n, how in enumerate(("click", "focus", "key")):
        if how == "key":
            checkbox.focus()  # where the key will go (this focus is tab A's activity too)
        # The person works in tab B's chat: B becomes the most recently active tab...
        context.clock.fast_forward(2100)  # past the 2 s throttles
        with _activity(page_b):
            widget_b.frame.locator("[data-part=composer-input]").click()
        # ...then does something on tab A's own page, outside its widget's frame.
        context.clock.fast_forward(2100)
        with _activity(page):
            if how == "click":
                page.locator("[data-part=brand]").click()
            elif how == "focus":
                checkbox.focus()
            else:
                page.keyboard.press("Shift")
        _say(demo, [page_b, page], ASK_NEXT)
        expect(widget_b.last_reply()).to_contain_text("Here is the order I suggest", timeout=SLOW)
        widget_b.wait_until_idle()
        assert handler_runs(page, "read_board_tasks") == n + 1, how
        assert handler_runs(page_b, "read_board_tasks") == 0, how


# ---- reloads and navigation -----------------------------------------------------------------


def test_a_link_navigation_during_a_read_runs_it_on_the_new_page_with_the_same_call_id(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo, "?delay=3000")
    widget.send(ASK_NEXT)
    card = widget.call("read_board_tasks")
    expect(note(card)).to_have_text(RUNNING_HERE, timeout=SLOW)
    [before] = calls_of(snapshot(page, demo), "read_board_tasks")
    # A real link of the site, clicked: the page navigates (pagehide), then loads anew.
    page.evaluate(
        "() => { const a = document.createElement('a'); a.href = '?delay=3000&view=list';"
        " a.textContent = 'List view'; a.dataset.part = 'test-link'; document.body.prepend(a) }"
    )
    with page.expect_navigation():
        page.locator("[data-part=test-link]").click()
    widget = reopen(page)
    card = widget.call("read_board_tasks")
    expect(note(card)).to_have_text(RUNNING_AGAIN, timeout=SLOW)
    expect(card).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text("Here is the order I suggest", timeout=SLOW)
    expect(card.locator("[data-part=form]")).to_have_count(0)
    runs = page.evaluate("demoBoard.runs()")
    assert runs == [{"callId": before["toolCallId"], "tool": "read_board_tasks"}] * 2
    [after] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert after["toolCallId"] == before["toolCallId"] and after["state"] == "answered"


def test_a_reload_during_a_write_never_runs_it_twice_and_asks_for_the_result_with_the_reason(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo, "?delay=3000")
    widget.send("Add a task to water the plants")
    card = widget.call("create_task")
    card.locator("[data-part=approve]").click()
    expect(note(card)).to_have_text(RUNNING_HERE, timeout=SLOW)
    assert handler_runs(page, "create_task") == 1

    page.reload()

    widget = reopen(page)
    card = widget.call("create_task")
    expect(card).to_have_attribute("data-state", "waiting", timeout=SLOW)
    expect(note(card)).to_have_text(WRITE_GONE)
    form = card.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible()
    shot(page, "surfaces-03-write-after-reload-form")
    form.locator("[data-part=input][data-path='/id']").fill("T-by-hand")
    form.locator("[data-part=submit]").click()
    expect(card).to_have_attribute("data-state", "done", timeout=SLOW)
    widget.wait_until_idle()
    assert handler_runs(page, "create_task") == 1  # before the reload, never after
    [call] = calls_of(snapshot(page, demo), "create_task")
    assert (call["state"], call["formReason"]) == ("answered", "surface_gone")
    assert call["outcome"]["output"]["id"] == "T-by-hand"


# ---- three tabs: the assigned one closes mid-call ---------------------------------------------


@pytest.fixture
def three_tabs(
    page: Page, demo: Demo, context: BrowserContext
) -> Iterator[list[tuple[Page, Widget]]]:
    tabs = [(page, open_chat(page, demo, "?delay=3000"))]
    tabs += [tab(context, demo, "?delay=3000") for _ in range(2)]
    yield tabs


def test_closing_the_tab_running_a_read_moves_it_to_another_tab(
    demo: Demo, three_tabs: list[tuple[Page, Widget]]
) -> None:
    (page_a, widget_a), (page_b, widget_b), (page_c, widget_c) = three_tabs
    widget_c.send(ASK_NEXT)  # the person is in C: C runs it
    expect(note(widget_c.call("read_board_tasks"))).to_have_text(RUNNING_HERE, timeout=SLOW)
    for widget in (widget_a, widget_b):
        expect(note(widget.call("read_board_tasks"))).to_have_text(RUNNING_ELSEWHERE)
    [first] = calls_of(snapshot(page_a, demo), "read_board_tasks")

    page_c.close()

    cards = [w.call("read_board_tasks") for w in (widget_a, widget_b)]
    for card in cards:
        expect(card).to_have_attribute("data-state", "done", timeout=SLOW)
    runs = [handler_runs(p, "read_board_tasks") for p in (page_a, page_b)]
    assert sorted(runs) == [0, 1], runs
    [moved] = calls_of(snapshot(page_a, demo), "read_board_tasks")
    assert moved["toolCallId"] == first["toolCallId"] and moved["assignment"] == 2
    assert moved["surfaceId"] != first["surfaceId"] and moved["state"] == "answered"
    widget_a.wait_until_idle()


def test_closing_the_tab_running_a_write_sends_it_to_the_form_in_the_others(
    demo: Demo, three_tabs: list[tuple[Page, Widget]]
) -> None:
    (page_a, widget_a), (page_b, widget_b), (page_c, widget_c) = three_tabs
    widget_c.send("Add a task to feed the cat")
    widget_c.call("create_task").locator("[data-part=approve]").click()
    expect(note(widget_c.call("create_task"))).to_have_text(RUNNING_HERE, timeout=SLOW)

    page_c.close()

    cards = [w.call("create_task") for w in (widget_a, widget_b)]
    for card in cards:
        # "waiting" holds before the move too (the call runs in another tab): the note is
        # the sign that the closed tab's call came here, after its leave reached the server.
        expect(card).to_have_attribute("data-state", "waiting", timeout=SLOW)
        expect(note(card)).to_have_text(WRITE_GONE, timeout=SLOW)
    shot(page_b, "surfaces-04-write-tab-closed-form")
    form = cards[0].locator("[data-part=form][data-purpose=answer]")
    form.locator("[data-part=input][data-path='/id']").fill("T-cat")
    form.locator("[data-part=submit]").click()
    for card in cards:
        expect(card).to_have_attribute("data-state", "done", timeout=SLOW)
    widget_a.wait_until_idle()
    assert [handler_runs(p, "create_task") for p in (page_a, page_b)] == [0, 0]
    [call] = calls_of(snapshot(page_a, demo), "create_task")
    assert call["outcome"]["output"]["id"] == "T-cat"


# ---- approval scopes -----------------------------------------------------------------------


def test_for_this_conversation_stops_the_question_until_a_new_conversation(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo)
    widget.send("Add a task to book the venue")
    card = widget.call("create_task")
    scope = card.locator("[data-part=scope]")
    expect(scope.get_by_label("Just this once")).to_be_checked()
    shot(page, "surfaces-05-scopes")
    scope.get_by_label("For this conversation").check()
    card.locator("[data-part=approve]").click()
    expect(card).to_have_attribute("data-state", "done", timeout=SLOW)
    widget.wait_until_idle()

    widget.send("Add a task to print the badges")
    second = widget.call("create_task")
    expect(second).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(second.locator("[data-part=approve]")).to_have_count(0)
    expect(widget.last_reply()).to_contain_text("Done: I created Print the badges", timeout=SLOW)
    widget.wait_until_idle()
    granted = calls_of(snapshot(page, demo), "create_task")[-1]
    assert granted["approval"] == {"reason": "grant", "scope": "conversation"}
    assert "Print the badges" in board_titles(page, "todo")

    widget.frame.locator("[data-part=new-conversation]").click()
    widget.frame.locator("[data-part=restart-yes]").click()  # ↻ asks first
    expect(widget.frame.locator("[data-part=send]")).to_be_enabled(timeout=SLOW)
    widget.send("Add a task to call the caterer")
    asked = widget.call("create_task")
    expect(asked.locator("[data-part=approve]")).to_be_visible(timeout=SLOW)
    expect(asked).to_have_attribute("data-state", "waiting")


# ---- a server killed mid-answer ---------------------------------------------------------------

STORY = " ".join(f"word{n}" for n in range(40))


def test_a_server_killed_mid_answer_shows_the_answer_once_live_and_in_the_snapshot(
    page: Page, tmp_path: Path
) -> None:
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    story = {"match": "(?i)tell me a story", "reply": STORY, "pace_seconds": 0.4}
    planner["model"]["rules"].insert(0, story)
    (agents / "planner.json").write_text(json.dumps(planner))
    extra = ["--agents", str(agents)]
    demo = start_demo(tmp_path, extra=extra)
    again: Demo | None = None
    try:
        widget = open_chat(page, demo)
        widget.send("Tell me a story")
        answers = widget.frame.locator("[data-part=message][data-role=assistant]").filter(
            has_text="word0"
        )
        expect(answers.last).to_contain_text("word5", timeout=SLOW)  # mid-answer

        demo.stop(signal.SIGKILL)
        again = start_demo(tmp_path, db=demo.db, port=demo.port, host_port=demo.host_port,
                           extra=extra)  # fmt: skip
        # The step runs again once the dead process's lease lapses; the live widget drops
        # the cut-off message and shows the answer once.
        expect(answers.last).to_contain_text("word39", timeout=40_000)
        widget.wait_until_idle()
        expect(answers).to_have_count(1)
        expect(answers.locator("[data-part=message-text]")).to_have_text(STORY)
        shot(page, "surfaces-06-answer-once-after-sigkill")
        snap = snapshot(page, again)
        assert [m["text"] for m in snap["messages"] if m["role"] == "assistant"] == [STORY]
        page.reload()  # and a page that replays the whole log shows it once too
        widget = reopen(page)
        answers = widget.frame.locator("[data-part=message][data-role=assistant]").filter(
            has_text="word0"
        )
        expect(answers.locator("[data-part=message-text]")).to_have_text(STORY)
        expect(answers).to_have_count(1)
    finally:
        (again or demo).stop()
