"""The seed scenario on the real demo, in Chromium: the page's handler answers
"What should I work on next?"; "Add a task…" asks for a confirmation that can be edited or
rejected; with no handler, or a handler whose output is wrong, a person answers through the
form built from the output schema; a handler that throws reaches the agent as client_error.
"""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import Page, Route, expect

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import (
    ASK_ADD,
    ASK_NEXT,
    PROPOSED_TITLE,
    SLOW,
    board_titles,
    calls_of,
    handler_runs,
    open_chat,
    snapshot,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo(shared_demo: Demo) -> Demo:
    """Every test here has its own browser context, so its own conversation and board."""
    return shared_demo


def test_next_work_is_read_from_the_page_in_progress_before_todo(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    shot(page, "flows-01-chat-open")
    doing, todo = board_titles(page, "in-progress"), board_titles(page, "todo")
    assert doing and todo, "the demo board starts with tasks in both columns"

    widget.send(ASK_NEXT)

    call = widget.calls("read_board_tasks")
    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    reply = widget.last_reply()
    expect(reply).to_contain_text("Here is the order I suggest", timeout=SLOW)
    widget.wait_until_idle()
    # The titles, in the order the agent suggests them: every in-progress task, then the todo.
    suggested = reply.locator("li strong").all_inner_texts()
    assert suggested == doing + todo
    assert handler_runs(page, "read_board_tasks") == 1
    expect(page.locator("[data-part=handler-runs]")).to_contain_text("read_board_tasks \u00d7 1")
    [server_call] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert server_call["route"] == "handler"
    assert server_call["state"] == "answered"
    shot(page, "flows-02-next-work-answered", readme="read-board-answered")


def test_edited_task_is_created_on_the_board_and_confirmed(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_ADD)

    call = widget.calls("create_task")
    expect(call).to_have_attribute("data-state", "waiting", timeout=SLOW)
    expect(call.locator("[data-part=tool-call-input]")).to_contain_text(PROPOSED_TITLE)
    expect(call.locator("[data-part=confirm]")).to_be_visible()
    assert handler_runs(page, "create_task") == 0, "nothing runs before the person approves"
    shot(page, "flows-03-confirmation", readme="confirmation-card")

    call.locator("[data-part=edit]").click()
    form = call.locator("[data-part=form][data-purpose=edit]")
    title = form.locator("[data-part=input][data-path='/title']")
    expect(title).to_have_value(PROPOSED_TITLE)
    title.fill("Review the Q3 report with Dana")
    shot(page, "flows-04-edit")
    form.locator("[data-part=submit]").click()  # "Approve with changes"

    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    new_task = page.locator("[data-part=column][data-status=todo] [data-part=task]").filter(
        has_text="Review the Q3 report with Dana"
    )
    expect(new_task).to_have_count(1)
    expect(widget.last_reply()).to_contain_text(
        "Done: I created Review the Q3 report with Dana on your board (todo).", timeout=SLOW
    )
    widget.wait_until_idle()
    assert PROPOSED_TITLE not in board_titles(page), "the unedited title was not created"
    assert handler_runs(page, "create_task") == 1
    [server_call] = calls_of(snapshot(page, demo), "create_task")
    assert server_call["input"]["title"] == "Review the Q3 report with Dana"
    assert server_call["approval"]["decision"] == "approved"
    assert server_call["approval"]["edited"] is True
    shot(page, "flows-05-edited-task-created")


def test_rejected_task_is_not_created_and_the_agent_repeats_the_reason(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo)
    before = board_titles(page)
    widget.send(ASK_ADD)

    call = widget.calls("create_task")
    expect(call).to_have_attribute("data-state", "waiting", timeout=SLOW)
    call.locator("[data-part=reject]").click()
    reason = call.locator("[data-part=reject-reason]")
    expect(reason).to_be_focused()
    reason.fill("Dana already owns the Q3 report")
    shot(page, "flows-06-reject-reason")
    call.locator("[data-part=reject-confirm]").click()

    expect(call).to_have_attribute("data-state", "rejected", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text(
        "OK, I did not create the task (your reason: Dana already owns the Q3 report).",
        timeout=SLOW,
    )
    widget.wait_until_idle()
    assert board_titles(page) == before
    assert handler_runs(page, "create_task") == 0
    [server_call] = calls_of(snapshot(page, demo), "create_task")
    assert server_call["state"] == "rejected"
    assert server_call["outcome"]["error"]["code"] == "approval_rejected"
    shot(page, "flows-07-rejected")


def test_without_a_handler_a_person_answers_through_the_output_form(page: Page, demo: Demo) -> None:
    page.goto(demo.board)
    page.locator("[data-part=toggle-manual-create]").check()  # unregisters create_task
    widget = open_chat(page, demo)
    before = board_titles(page)
    widget.send(ASK_ADD)

    call = widget.calls("create_task")
    expect(call).to_have_attribute("data-state", "waiting", timeout=SLOW)
    call.locator("[data-part=approve]").click()

    form = call.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible(timeout=SLOW)
    expect(call).to_have_attribute("data-state", "waiting")
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(
        "The agent needs a result for this action. Fill it in below."
    )
    field = {
        name: form.locator(f"[data-part=field][data-field='/{name}']")
        for name in ("id", "title", "status")
    }
    # Prefilled where the input says it (the title), from the schema's default (the status).
    expect(field["title"].locator("[data-part=input]")).to_have_value(PROPOSED_TITLE)
    expect(field["status"].locator("[data-part=input]")).to_have_value('"todo"')

    field["title"].locator("[data-part=input]").fill("")
    field["status"].locator("[data-part=input]").select_option("")
    form.locator("[data-part=submit]").click()
    expect(form.locator("[data-part=form-errors]")).to_have_text(
        "Please correct the highlighted fields (3)."
    )
    for name in ("id", "title", "status"):
        expect(field[name].locator("[data-part=field-error]")).to_have_text(
            "This field is required."
        )
        expect(field[name].locator("[data-part=input]")).to_have_attribute("aria-invalid", "true")
    expect(field["id"].locator("[data-part=input]")).to_be_focused()
    shot(page, "flows-08-answer-form-errors", readme="form-fallback-errors")

    field["id"].locator("[data-part=input]").fill("T-42")
    field["title"].locator("[data-part=input]").fill("Review the Q3 report by hand")
    field["status"].locator("[data-part=input]").select_option(label="in-progress")
    expect(form.locator("[data-part=field-error]:visible")).to_have_count(0)
    shot(page, "flows-09-answer-form-filled")
    form.locator("[data-part=submit]").click()

    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text(
        "Done: I created Review the Q3 report by hand on your board (in-progress).", timeout=SLOW
    )
    widget.wait_until_idle()
    assert handler_runs(page, "create_task") == 0
    assert board_titles(page) == before, "no handler ran, so the board is unchanged"
    [server_call] = calls_of(snapshot(page, demo), "create_task")
    assert server_call["route"] == "form"
    assert server_call["outcome"] == {
        "output": {"id": "T-42", "title": "Review the Q3 report by hand", "status": "in-progress"}
    }
    shot(page, "flows-10-answered-by-form")


def test_handler_output_violating_the_schema_opens_a_prefilled_form(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    # The demo's own handler always answers well; this one forgets title and status and
    # returns the id as a number.
    page.evaluate("Hostcall('register', 'create_task', () => ({id: 5}))")
    widget.send(ASK_ADD)

    call = widget.calls("create_task")
    expect(call).to_have_attribute("data-state", "waiting", timeout=SLOW)
    call.locator("[data-part=approve]").click()

    form = call.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible(timeout=SLOW)
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(
        "The page returned a result that does not match the expected format. Correct it below."
    )
    returned = call.locator("[data-part=handler-output]")
    returned.locator("summary").click()
    expect(returned.locator("pre")).to_have_text('{\n  "id": 5\n}')
    field = {
        name: form.locator(f"[data-part=field][data-field='/{name}']")
        for name in ("id", "title", "status")
    }
    expect(field["id"].locator("[data-part=input]")).to_have_value("5")
    expect(field["id"].locator("[data-part=field-error]")).to_have_text("Must be text.")
    expect(field["title"].locator("[data-part=field-error]")).to_have_text(
        "This field is required."
    )
    expect(field["status"].locator("[data-part=field-error]")).to_have_text(
        "This field is required."
    )
    shot(page, "flows-11-invalid-handler-output", readme="invalid-output-form")

    field["id"].locator("[data-part=input]").fill("T-5")
    field["title"].locator("[data-part=input]").fill("Review the Q3 report")
    field["status"].locator("[data-part=input]").select_option(label="todo")
    form.locator("[data-part=submit]").click()

    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text(
        "Done: I created Review the Q3 report on your board (todo).", timeout=SLOW
    )
    widget.wait_until_idle()
    [server_call] = calls_of(snapshot(page, demo), "create_task")
    assert server_call["outcome"] == {
        "output": {"id": "T-5", "title": "Review the Q3 report", "status": "todo"}
    }
    shot(page, "flows-12-invalid-output-corrected")


def test_handler_that_throws_reaches_the_agent_as_client_error(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    page.evaluate(
        "Hostcall('register', 'read_board_tasks', () => { throw new Error('board is locked') })"
    )
    widget.send(ASK_NEXT)

    call = widget.calls("read_board_tasks")
    expect(call).to_have_attribute("data-state", "failed", timeout=SLOW)
    # The page's exception is the model's and the operator's: the visitor reads a sentence.
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(
        "This action could not be completed.", timeout=SLOW
    )
    reply = widget.last_reply()
    expect(reply).to_contain_text("I couldn't read your board just now", timeout=SLOW)
    widget.wait_until_idle()
    expect(widget.frame.locator("body")).not_to_contain_text("board is locked")
    expect(call.locator("[data-part=form]")).to_have_count(0)
    snap = snapshot(page, demo)
    [server_call] = calls_of(snap, "read_board_tasks")
    assert server_call["state"] == "failed"
    assert server_call["outcome"]["error"]["code"] == "client_error"
    assert "board is locked" not in json.dumps(snap)
    shot(page, "flows-13-handler-threw")


def test_a_result_over_the_byte_limit_is_refused_by_the_widget_not_the_server(
    page: Page, demo: Demo
) -> None:
    """140,000 "é" are fewer characters than the 256 KiB limit but more bytes: the widget counts
    UTF-8 bytes as the server does, so it reports client_error instead of posting a 413."""
    widget = open_chat(page, demo)
    page.evaluate(
        "Hostcall('register', 'read_board_tasks', () => ({tasks: "
        "[{id: 'T-1', title: 'é'.repeat(140000), status: 'todo'}]}))"
    )
    widget.send(ASK_NEXT)

    call = widget.calls("read_board_tasks")
    expect(call).to_have_attribute("data-state", "failed", timeout=SLOW)
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(
        "This action could not be completed."
    )
    expect(widget.last_reply()).to_contain_text("I couldn't read your board just now")
    [server_call] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert server_call["state"] == "failed"
    assert server_call["outcome"]["error"]["code"] == "client_error"


def test_a_message_sent_before_the_conversation_exists_is_sent_once_when_it_does(
    page: Page, demo: Demo
) -> None:
    # A slow network (or a loaded machine): the widget's start (resuming this browser's
    # conversation, if any) is held until the visitor has typed and pressed Enter.
    held: list[Route] = []
    page.context.route("**/api/agents/planner/session", lambda route: held.append(route))
    page.goto(demo.board)
    page.locator("[data-part=hostcall-launcher]").click()
    widget = Widget(page, timeout=SLOW)
    box = widget.frame.locator("[data-part=composer-input]")
    box.wait_for()
    deadline = time.monotonic() + SLOW / 1000
    while not held:
        assert time.monotonic() < deadline, "the widget never asked for its conversation"
        page.wait_for_timeout(20)
    box.fill(ASK_NEXT)
    box.press("Enter")
    assert widget.state() == "starting", "the message must be typed before the widget is ready"
    # Taken, to go once the conversation exists: the box is emptied, and no "please wait" shows
    # (which is all the visitor got when such a message was never sent).
    expect(box).to_have_value("")
    expect(widget.frame.locator("[data-part=composer-hint]")).to_be_hidden()
    for route in held:
        route.continue_()
    page.context.unroute("**/api/agents/planner/session")

    expect(widget.calls("read_board_tasks")).to_have_attribute("data-state", "done", timeout=SLOW)
    expect(widget.last_reply()).to_contain_text("Here is the order I suggest", timeout=SLOW)
    widget.wait_until_idle()
    shot(page, "flows-queued-first-message")
    assert widget.messages("user") == [ASK_NEXT]
    assert box.input_value() == ""
    sent = [m["text"] for m in snapshot(page, demo)["messages"] if m["role"] == "user"]
    assert sent == [ASK_NEXT]
