"""A visitor's first contact with the widget, in real Chromium: loading it stores nothing
until the person writes."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo
from tests.e2e.flows_helpers import ASK_ADD, ASK_NEXT, SLOW, open_chat, session

pytestmark = pytest.mark.e2e


def rows(demo: Demo, sql: str) -> list[tuple[Any, ...]]:
    """Read the server's database (read-only, beside the running server)."""
    with contextlib.closing(sqlite3.connect(f"file:{demo.db}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


def conversations(demo: Demo) -> int:
    return int(rows(demo, "SELECT count(*) FROM conversations")[0][0])


# ----------------------------------------------------------------------------- no empty ones


def test_loading_the_widget_stores_nothing_until_the_person_writes(
    page: Page, demo: Demo
) -> None:
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
