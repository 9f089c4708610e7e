"""A call's card is built off the page and shown once the page's answer is on its way, or
after at most 100 ms (widget/cards.js SHOW_WITHIN_MS: the frame that painted it
held up the handler's answer). Shown late, it still sits where the call came in the
conversation, and a handler that takes its time has its card shown while it runs, with the
text before it: the thread's drawing waits for a call with the page's handler only until
its answer is sent, at most 100 ms (widget/toolcalls.js HOLD_MS).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import ASK_NEXT, SLOW, handler_runs, open_chat

pytestmark = pytest.mark.e2e

LEAD_IN = "Let me look at your board."  # the scripted planner's text before read_board_tasks
BEFORE = "(a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING)"


def test_a_card_shown_after_the_answer_keeps_its_place_and_a_slow_handler_shows_it_running(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_NEXT)
    cards = widget.calls("read_board_tasks")
    reply = widget.last_reply()
    expect(reply).to_contain_text("Here is the order I suggest", timeout=SLOW)
    widget.wait_until_idle()
    expect(cards).to_have_count(1)
    expect(cards.first).to_have_attribute("data-state", "done")
    lead = widget.frame.locator("[data-part=message][data-role=assistant]").filter(has_text=LEAD_IN)
    # lead-in text, then the card, then the reply: the card took its place when the call came
    assert lead.last.evaluate(BEFORE, cards.first.element_handle())
    assert cards.first.evaluate(BEFORE, reply.element_handle())
    assert handler_runs(page, "read_board_tasks") == 1

    # A handler that has not answered: its card shows, running in the page, meanwhile.
    page.evaluate(
        "Hostcall('register', 'read_board_tasks', () => new Promise(ok => {"
        " window.answerBoard = () => ok({tasks: [{title: 'Held task', status: 'todo'}]}) }))"
    )
    widget.send(ASK_NEXT)
    held = cards.nth(1)
    expect(held.locator("[data-part=tool-call-note]")).to_have_text(
        "Running in the page…", timeout=SLOW
    )
    expect(held).to_be_visible()
    assert cards.first.evaluate(BEFORE, held.element_handle())
    # The text before the call is drawn too, and the working indicator: the thread's drawing
    # waits for a call with the page's handler only until its answer is sent, at most 100 ms
    # (widget/toolcalls.js HOLD_MS), never for the handler itself.
    expect(lead).to_have_count(2)
    expect(lead.nth(1)).to_be_visible()
    assert lead.nth(1).evaluate(BEFORE, held.element_handle())
    expect(widget.frame.locator("[data-part=working]")).to_be_visible()
    shot(page, "cards-10-slow-handler-running")
    page.evaluate("answerBoard()")
    expect(held).to_have_attribute("data-state", "done", timeout=SLOW)
    widget.wait_until_idle()
    shot(page, "cards-20-answered")
