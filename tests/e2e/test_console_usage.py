"""The console's usage page in real Chromium: a visitor talks to the planner in one browser,
an operator reads the tokens and cost in another, by keyboard, in English and Japanese."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.test_console import _users_add, ask, person, visitor
from tests.e2e.test_ui import audit

pytestmark = pytest.mark.e2e


@pytest.fixture
def priced(tmp_path: Path) -> Iterator[Demo]:
    """The demo, its planner priced (its scripted model goes by "scripted")."""
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = agents / "planner.json"
    data = json.loads(planner.read_text())
    data["prices"] = {"scripted": {"input": 2.5, "output": 10}}
    planner.write_text(json.dumps(data))
    db = tmp_path / "e2e.db"
    _users_add(db, "olga", "operator")
    demo = start_demo(tmp_path, db=db, extra=["--agents", str(agents)])
    yield demo
    demo.stop()


def test_an_operator_reads_a_conversations_tokens_and_cost(browser: Browser, priced: Demo) -> None:
    chat = visitor(browser, priced)
    for text in ("hello", "hello again"):
        ask(chat, text)
        expect(chat.locator("[data-part=message][data-role=assistant]")).to_have_count(
            2 if text == "hello" else 3  # the greeting, then a reply each
        )
    expect(chat.locator("[data-part=send]")).to_be_enabled()

    ops = person(browser, priced, "olga")
    ops.get_by_role("link", name="Usage").click()
    expect(ops).to_have_url(re.compile(r"/console/usage$"))
    row = ops.locator("[data-part=usage-by-agent] [data-part=usage-row][data-agent=planner]")
    expect(row.locator("[data-part=steps]")).to_have_text("2")
    expect(row.locator("[data-part=estimated]")).to_have_text("2")
    cost = row.locator("[data-part=cost]").inner_text()
    assert re.fullmatch(r"0\.\d{6}", cost), cost
    expect(ops.locator("[data-part=usage-by-day] [data-part=usage-row]")).to_have_count(1)
    audit(ops, "the usage page")
    shot(ops, "console-usage")

    # The period, by keyboard: the field, a new value, Enter.
    period = ops.get_by_label("Days")
    period.focus()
    period.fill("7")
    period.press("Enter")
    expect(ops).to_have_url(re.compile(r"/console/usage\?days=7$"))
    expect(ops.locator("[data-part=usage-intro]")).to_contain_text("last 7 days")

    link = ops.locator("[data-part=usage-by-conversation] a").first
    link.focus()
    link.press("Enter")
    summary = ops.locator("[data-part=usage-summary]")
    expect(summary).to_contain_text("model steps: 2")
    expect(summary).to_contain_text(f"cost: {cost}.")
    expect(ops.locator("[data-part=usage-estimated]")).to_contain_text(": 2.")
    audit(ops, "a conversation with its usage")
    shot(ops, "console-conversation-usage")

    ops.goto(f"{priced.hostcall}/console/usage?lang=ja")
    expect(ops.get_by_role("heading", level=1)).to_have_text("使用量とコスト")
    audit(ops, "the usage page in Japanese")
    shot(ops, "console-usage-ja")


def test_a_bad_period_is_refused_with_the_accepted_range(browser: Browser, priced: Demo) -> None:
    ops: Page = person(browser, priced, "olga")
    response = ops.goto(f"{priced.hostcall}/console/usage?days=0")
    assert response is not None and response.status == 400
    expect(ops.locator("body")).to_contain_text("days must be a whole number from 1 to 366")
