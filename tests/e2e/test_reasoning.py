"""A model's reasoning in real Chromium: shown collapsed while the model thinks, above the
answer it leads to, openable once it has answered; loaded with the first reasoning, not with
the chat."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import shot, start_demo
from tests.e2e.flows_helpers import SLOW

pytestmark = pytest.mark.e2e

THOUGHT = (
    "The visitor asks what to plan. I read the board first: two tasks are late, one is quick. "
    "The late ones come before the quick one, then the review on Friday."
)


def test_the_reasoning_shows_collapsed_while_the_model_thinks_then_opens(
    tmp_path: Path, page: Page
) -> None:
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    planner["model"]["rules"].insert(0, {
        "match": "(?i)plan my week", "reasoning": THOUGHT, "pace_seconds": 0.4,
        "reply": "Start with the two late tasks, then the quick one.",
    })  # fmt: skip
    (agents / "planner.json").write_text(json.dumps(planner))
    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    try:
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url.rsplit("/", 1)[-1].split("?")[0]))
        page.set_viewport_size({"width": 900, "height": 820})
        page.goto(demo.board)
        widget = Widget(page, timeout=SLOW).open()
        assert "reasoning.js" not in fetched  # an idle chat does not load it
        widget.send("Plan my week")
        reasoning = widget.frame.locator("[data-part=reasoning]")
        # While the model thinks: collapsed, saying so, its text not shown.
        expect(reasoning).to_have_attribute("data-state", "thinking", timeout=SLOW)
        expect(reasoning.locator("[data-part=reasoning-summary]")).to_have_text("Thinking")
        expect(reasoning.locator("[data-part=reasoning-text]")).to_be_hidden()
        shot(page, "reasoning-thinking")
        widget.wait_until_idle()
        expect(reasoning).to_have_attribute("data-state", "done")
        expect(reasoning.locator("[data-part=reasoning-summary]")).to_have_text("Thought")
        # Above the answer it led to.
        answer = widget.frame.locator("[data-part=message][data-role=assistant]").last
        expect(answer).to_contain_text("Start with the two late tasks")
        follows = "(el, a) => !!(el.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING)"
        assert reasoning.evaluate(follows, answer.element_handle())
        reasoning.locator("[data-part=reasoning-summary]").click()
        text = reasoning.locator("[data-part=reasoning-text]")
        expect(text).to_be_visible()
        assert text.inner_text() == THOUGHT
        assert {"reasoning.js", "reasoning.css", "locale-en-reasoning.js"} <= set(fetched)
        shot(page, "reasoning-opened")

        # After a reload it is there again, ended, where it was: above its answer, once.
        page.reload()
        widget = Widget(page, timeout=SLOW).open()
        answer = widget.frame.locator("[data-part=message][data-role=assistant]").last
        expect(answer).to_contain_text("Start with the two late tasks", timeout=SLOW)
        reasoning = widget.frame.locator("[data-part=reasoning]")
        expect(reasoning).to_have_count(1, timeout=SLOW)
        expect(reasoning).to_have_attribute("data-state", "done")
        expect(reasoning.locator("[data-part=reasoning-summary]")).to_have_text("Thought")
        assert reasoning.evaluate(follows, answer.element_handle())
        reasoning.locator("[data-part=reasoning-summary]").click()
        assert reasoning.locator("[data-part=reasoning-text]").inner_text() == THOUGHT
        shot(page, "reasoning-reloaded")
    finally:
        demo.stop()
