"""Edit and regenerate in the widget, in Chromium (docs/protocol.md): the visitor has the last
answer written again, or edits their last message, and a reload shows the current branch
only; a turn whose write already ran says so and offers a new message instead."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from playwright.sync_api import APIResponse, Browser, Page, Route, expect

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import SLOW, calls_of, open_chat, snapshot
from tests.e2e.test_console import _users_add, person
from tests.e2e.test_run_control import _provider_agents
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text

# A conversation's snapshot (GET /api/conversations/{id}?surface=…), not its other routes.
SNAPSHOT = re.compile(r"/api/conversations/c_[0-9a-f]+\?")


def _reply(words: str) -> Reply:
    return Reply([text(words), chunk({}, "stop"), DONE])


def test_regenerate_then_edit_and_a_reload_shows_the_current_branch_only(
    page: Page, browser: Browser, tmp_path: Path, provider: FakeProvider
) -> None:
    provider.replies.append(_reply("Plan A: write the notes."))
    # The regenerated answer ends 2 s after its first words: the snapshot the widget asks
    # for as that run starts says "running" (below).
    provider.replies.append(replace(_reply("Plan B: call the team."), stall=2.0))
    provider.replies.append(_reply("Tuesday works."))
    db = tmp_path / "e2e.db"
    _users_add(db, "olga", "operator")
    agents = _provider_agents(tmp_path, provider)
    demo = start_demo(tmp_path, db=db, extra=["--agents", str(agents)])
    try:
        widget = open_chat(page, demo)
        frame = widget.frame
        widget.send("plan my week")
        expect(widget.last_reply()).to_have_text("Plan A: write the notes.", timeout=SLOW)
        widget.wait_until_idle()
        # Another tab of the same conversation follows the new branch too.
        other = Widget(page.context.new_page(), timeout=SLOW)
        other.page.goto(demo.board)
        other.open()
        expect(other.last_reply()).to_have_text("Plan A: write the notes.", timeout=SLOW)
        regenerate = frame.locator("[data-part=branch-regenerate]")
        expect(regenerate).to_have_accessible_name("Write the last answer again", timeout=SLOW)
        shot(page, "branches-1-controls")
        # The snapshot this tab asks for at the new branch's start comes back only after the
        # stream has finished that run: being older, it must not make the run look running.
        held: list[tuple[Route, APIResponse]] = []
        page.route(SNAPSHOT, lambda route: held.append((route, route.fetch())))
        # By keyboard: a real button.
        regenerate.focus()
        with page.expect_request(SNAPSHOT):
            page.keyboard.press("Enter")
        expect(widget.last_reply()).to_have_text("Plan B: call the team.", timeout=SLOW)
        widget.wait_until_idle()
        with page.expect_response(SNAPSHOT):
            for route, answer in held:
                route.fulfill(response=answer)
        page.unroute(SNAPSHOT)
        expect(frame.locator("[data-part=message]", has_text="Plan A")).to_have_count(0)
        assert widget.messages("user") == ["plan my week"]
        expect(other.last_reply()).to_have_text("Plan B: call the team.", timeout=SLOW)
        expect(other.frame.locator("[data-part=message]", has_text="Plan A")).to_have_count(0)
        assert other.messages("user") == ["plan my week"]
        other.page.close()
        widget.wait_until_idle()  # the late snapshot was applied meanwhile: still idle

        # Edit the message: Enter sends the edited text.
        edit = frame.locator("[data-part=branch-edit]")
        expect(edit).to_have_accessible_name("Edit your last message", timeout=SLOW)
        edit.click()
        box = frame.locator("[data-part=branch-input]")
        expect(box).to_be_focused()
        expect(box).to_have_value("plan my week")
        box.fill("plan my Tuesday")
        shot(page, "branches-2-editing")
        box.press("Enter")
        expect(widget.last_reply()).to_have_text("Tuesday works.", timeout=SLOW)
        widget.wait_until_idle()
        assert widget.messages("user") == ["plan my Tuesday"]

        # The server kept every branch; a reload draws the current one.
        snap = snapshot(page, demo)
        kept = [(m["text"], bool(m.get("supersededBy"))) for m in snap["messages"]]
        assert kept == [
            ("plan my week", True),
            ("Plan A: write the notes.", True),
            ("plan my week", True),
            ("Plan B: call the team.", True),
            ("plan my Tuesday", False),
            ("Tuesday works.", False),
        ]
        page.reload()
        widget = Widget(page, timeout=SLOW).open()
        expect(widget.last_reply()).to_have_text("Tuesday works.", timeout=SLOW)
        widget.wait_until_idle()
        assert widget.messages("user") == ["plan my Tuesday"]
        for old in ("Plan A", "Plan B"):
            expect(widget.frame.locator("[data-part=message]", has_text=old)).to_have_count(0)
        expect(widget.frame.locator("[data-part=branch-regenerate]")).to_have_count(1, timeout=SLOW)
        shot(page, "branches-3-reloaded")
        assert len(provider.received) == 3

        # The console shows the old branch too, marked.
        console = person(browser, demo, "olga")
        console.goto(f"{demo.hostcall}/console/conversations/{snap['conversationId']}")
        turns = console.locator("[data-part=turn][data-superseded]")
        expect(turns).to_have_count(4)
        expect(turns.first.locator("[data-part=superseded]")).to_contain_text("replaced by run")
        expect(console.locator("[data-part=turn]:not([data-superseded])")).to_have_count(2)
        shot(console, "branches-5-console")
    finally:
        demo.stop()


def test_a_write_that_already_ran_is_not_regenerated_in_french_and_dark(
    page: Page, demo: Demo
) -> None:
    page.emulate_media(color_scheme="dark")
    widget = open_chat(page, demo, "?locale=fr")
    widget.send("Add a task to write the notes")
    widget.approve("create_task")
    widget.wait_until_idle()
    frame = widget.frame
    frame.locator("[data-part=branch-regenerate]").click()
    error = widget.error()
    expect(error).to_have_attribute("data-code", "write_already_ran", timeout=SLOW)
    expect(error).to_contain_text("C'est déjà fait")
    offer = error.locator("[data-part=branch-new]")
    expect(offer).to_have_text("Écrire un nouveau message")
    shot(page, "branches-4-already-happened-fr-dark")
    offer.click()
    expect(frame.locator("[data-part=composer-input]")).to_be_focused()
    # An edit of the message is refused the same way; the message stays as it was, and the
    # edited text goes to the composer for a new message.
    frame.locator("[data-part=branch-edit]").click()
    frame.locator("[data-part=branch-input]").fill("Add a task to write the minutes")
    frame.locator("[data-part=branch-send]").click()
    expect(widget.error().locator("[data-part=branch-new]")).to_be_visible(timeout=SLOW)
    expect(frame.locator("[data-part=branch-form]")).to_have_count(0)
    assert widget.messages("user") == ["Add a task to write the notes"]
    widget.error().locator("[data-part=branch-new]").click()
    composer = frame.locator("[data-part=composer-input]")
    expect(composer).to_have_value("Add a task to write the minutes")
    # Nothing was run again, nothing was superseded.
    snap = snapshot(page, demo)
    assert not [m for m in snap["messages"] if m.get("supersededBy")]
    assert len(calls_of(snap, "create_task")) == 1


def test_an_answer_drawn_with_its_run_s_end_gets_regenerate_in_view(page: Page, demo: Demo) -> None:
    # The scripted greeting comes in one burst with its run's end: the controls go on once
    # that burst is drawn, on its answer, and the view stays at the end of the thread.
    widget = open_chat(page, demo)
    frame = widget.frame
    inner = next(f for f in page.frames if "/widget/" in f.url)
    for turn in range(1, 4):
        widget.send("hello")
        widget.wait_until_idle()
        answer = frame.locator("[data-part=message][data-role=assistant]").last
        expect(answer.locator("[data-part=branch-regenerate]")).to_have_count(1, timeout=SLOW)
        expect(frame.locator("[data-part=branch-regenerate]")).to_have_count(1)
        inner.wait_for_function(
            "() => { const l = document.querySelector('[data-part=messages]')"
            "; return l.scrollHeight - l.scrollTop - l.clientHeight < 2 }",
            timeout=SLOW,
        )
        assert widget.messages("user") == ["hello"] * turn
