"""Sessions across tabs in real Chromium (hostcall/visitors/sessions.py): tabs of one browser share
the widget's session cookie, and two of them resuming at the same instant send the same one.
Both must end up in the visitor's conversation, able to send, with no new conversation.

The race is forced, not hoped for: the browser's two resumes are held until both are sent,
and let go while the server is stopped, so both carry one cookie and the server sees it twice."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, Response, Route, expect

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import SLOW, open_chat, session

pytestmark = pytest.mark.e2e

FRAME = "[data-part=hostcall-frame]"


def user_texts(widget: Widget) -> Locator:
    return widget.frame.locator("[data-part=message][data-role=user] [data-part=message-text]")


def unread_connections(port: int) -> int:
    """Connections to 127.0.0.1:``port`` holding bytes the server has not read yet (Linux's
    /proc/net/tcp): requests that reached a stopped server."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.rpartition(":")[2], 16) == port and state == "01":  # ESTABLISHED
            count += int(queues.partition(":")[2], 16) > 0
    return count


class HeldPair:
    """Holds the first resume until a second one is sent, then lets both go with the server
    stopped (SIGSTOP), so that neither answer can land in the browser before both requests
    have left with the cookie as it was; then lets the server go on (SIGCONT)."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.waiting: list[Route] = []
        self.released = False
        self.responses: list[Response] = []

    def route(self, route: Route) -> None:
        if self.released:  # asking again, later: passes
            route.continue_()
            return
        self.waiting.append(route)
        if len(self.waiting) < 2:
            return  # the first: held
        self.released = True
        pid = self.demo.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            for each in self.waiting:
                each.continue_()  # Chromium adds the cookie as it sends: the jar's, unchanged
            deadline = time.monotonic() + 10
            while unread_connections(self.demo.port) < 2:
                assert time.monotonic() < deadline, "the two resumes never reached the server"
                time.sleep(0.02)
        finally:
            os.kill(pid, signal.SIGCONT)

    def answered(self, response: Response) -> None:
        if response.url.endswith("/session") and response.request.method == "POST":
            self.responses.append(response)  # read later: not inside the event handler

    def answers(self) -> list[tuple[int, dict[str, Any]]]:
        return [(r.status, r.json()) for r in self.responses]


def test_two_tabs_opening_at_the_same_instant_both_keep_the_visitors_conversation(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo)
    widget.send("What should I work on next?")
    expect(widget.last_reply()).to_be_visible()
    widget.wait_until_idle()
    first = session(page, demo)["conversationId"]

    pair = HeldPair(demo)
    context = page.context
    context.route("**/api/agents/*/session", pair.route)
    context.on("response", pair.answered)
    tabs = [context.new_page(), context.new_page()]
    for tab in tabs:
        tab.goto(demo.board)
        tab.locator("[data-part=hostcall-launcher]").click()
    widgets = [Widget(tab, timeout=SLOW) for tab in tabs]
    for each in widgets:
        each.wait_until_idle()
    context.unroute("**/api/agents/*/session")

    # The race happened: one cookie, two resumes; one was refused as superseded, and asked
    # again once the winner's cookie had landed.
    answers = pair.answers()
    statuses = [status for status, _ in answers]
    assert statuses[:2] in ([200, 404], [404, 200]), answers
    lost = next(body for status, body in answers if status == 404)
    assert lost["error"]["code"] == "no_session"
    assert lost["error"]["details"] == {"superseded": True}
    assert statuses[2:] and statuses[2:][-1] == 200, answers

    # All three tabs are in the visitor's conversation, and each of them can send.
    for n, (tab, each) in enumerate(zip([page, *tabs], [widget, *widgets], strict=True)):
        assert session(tab, demo)["conversationId"] == first
        expect(user_texts(each).first).to_have_text("What should I work on next?")
        each.send(f"Hello from tab {n}")
        each.wait_until_idle()
        expect(each.frame.locator("[data-part=message-failed]")).to_have_count(0)
    shot(tabs[1], "sessions-two-tabs-opened-at-once")
    expect(user_texts(widgets[1])).to_have_text(
        ["What should I work on next?", *(f"Hello from tab {n}" for n in range(3))]
    )
