"""What survives on the real demo, in Chromium: a page reload in the middle of a
call (the conversation comes back, the handler does not run twice, the run finishes), a
server restart in the middle of a call (the widget's answer gets through, the run finishes),
and a second answer for a call already answered (refused by the server, ignored by the widget).
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import (
    ASK_NEXT,
    SLOW,
    board_titles,
    calls_of,
    handler_runs,
    open_chat,
    snapshot,
)

pytestmark = pytest.mark.e2e

RUNNING_IN_PAGE = "Running in the page…"


def _is_answer(request: Request) -> bool:
    """POST /api/calls/{id}/result, from the widget."""
    return request.method == "POST" and request.url.endswith("/result")


def _status(request: Request) -> str:
    response = request.response()
    return str(response.status) if response else "no response"


def _answer_requests(page: Page) -> list[Request]:
    sent: list[Request] = []
    page.on("request", lambda r: _is_answer(r) and sent.append(r))
    return sent


def _hold_board_handler(page: Page) -> None:
    """A read_board_tasks handler that answers when the test calls `window.answerBoard`."""
    page.evaluate(
        "Hostcall('register', 'read_board_tasks', () => new Promise(ok => {"
        " window.answerBoard = () => ok({tasks: [{title: 'Held task', status: 'todo'}]}) }))"
    )


def test_reload_during_a_read_restores_the_chat_and_runs_the_read_again_not_a_form(
    page: Page, demo: Demo
) -> None:
    # The page's handlers wait for `demoBoard.release()`: the reload lands while the first
    # run is still going, and the second is seen running however slow the machine is.
    widget = open_chat(page, demo, "?delay=hold")
    widget.send(ASK_NEXT)
    call = widget.calls("read_board_tasks")
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(RUNNING_IN_PAGE, timeout=SLOW)
    assert handler_runs(page, "read_board_tasks") == 1
    mine = widget.frame.locator("[data-part=message][data-role=user]")
    asked_id = mine.last.get_attribute("data-message-id")
    assert asked_id, "the server's TEXT_MESSAGE_START gave the question its id"
    [before] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert before["state"] == "delivered"
    shot(page, "flows-20-reload-handler-running")

    page.reload()

    # The chat is open again and shows the conversation so far, with the same ids. (Not
    # "Send is visible": it is, while the widget starts, and again only once the run is over.)
    expect(widget.frame.locator("html[data-agent-state=working]")).to_have_count(1, timeout=SLOW)
    expect(mine).to_have_count(1, timeout=SLOW)
    expect(mine.last).to_have_attribute("data-message-id", asked_id)
    expect(mine.last.locator("[data-part=message-text]")).to_have_text(ASK_NEXT)
    expect(
        widget.frame.locator("[data-part=message][data-role=assistant]").filter(
            has_text="Let me look at your board."
        )
    ).to_have_count(1)
    # A read is safe to run again: the new page's handler runs it, with the same call id
    # (its idempotency key), and nobody is asked to type what the page can read.
    expect(call).to_have_count(1)
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(
        "Running again here: the page that started it was reloaded or closed…", timeout=SLOW
    )
    expect(call.locator("[data-part=form]")).to_have_count(0)
    # The page's handler has it (and holds it): let it answer.
    page.wait_for_function("demoBoard.runs().length === 2", timeout=SLOW)
    shot(page, "flows-21-reload-read-runs-again")
    assert page.evaluate("demoBoard.release()") == 1, "one handler was waiting"
    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    reply = widget.last_reply()
    expect(reply).to_contain_text("Here is the order I suggest", timeout=SLOW)
    widget.wait_until_idle()
    expect(call.locator("[data-part=form]")).to_have_count(0)
    assert reply.locator("li strong").all_inner_texts() == (
        board_titles(page, "in-progress") + board_titles(page, "todo")
    )
    runs = page.evaluate("demoBoard.runs()")
    assert runs == [{"callId": before["toolCallId"], "tool": "read_board_tasks"}] * 2
    [after] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert (after["toolCallId"], after["state"], after["assignment"]) == (
        before["toolCallId"], "answered", 2,
    )  # fmt: skip
    shot(page, "flows-22-reload-answered")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_server_restart_during_a_call_still_finishes_the_run(
    page: Page, demo: Demo, tmp_path: Path, sig: signal.Signals
) -> None:
    widget = open_chat(page, demo, "?delay=2000")
    answers: list[str] = []  # how each POST …/result ended: "failed" or its status
    page.on("requestfailed", lambda r: _is_answer(r) and answers.append("failed"))
    page.on("requestfinished", lambda r: _is_answer(r) and answers.append(_status(r)))

    widget.send(ASK_NEXT)
    call = widget.calls("read_board_tasks")
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(RUNNING_IN_PAGE, timeout=SLOW)

    with page.expect_event("requestfailed", predicate=_is_answer, timeout=SLOW):
        demo.stop(sig)  # the handler answers while the server is down
    shot(page, "flows-23-restart-server-down")
    again = start_demo(tmp_path, db=demo.db, port=demo.port, host_port=demo.host_port)
    try:
        expect(call).to_have_attribute("data-state", "done", timeout=30_000)
        reply = widget.last_reply()
        expect(reply).to_contain_text("Here is the order I suggest", timeout=SLOW)
        widget.wait_until_idle()
        expect(widget.frame.locator("[data-part=connection]")).to_be_hidden(timeout=SLOW)
        assert reply.locator("li strong").all_inner_texts() == (
            board_titles(page, "in-progress") + board_titles(page, "todo")
        )
        assert handler_runs(page, "read_board_tasks") == 1
        assert answers[0] == "failed" and answers[-1] == "200", answers
        [server_call] = calls_of(snapshot(page, again), "read_board_tasks")
        assert server_call["state"] == "answered"
        shot(page, f"flows-24-restart-{sig.name.lower()}-finished")
    finally:
        again.stop()


def test_second_result_for_an_answered_call_is_refused(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    _hold_board_handler(page)
    widget.send(ASK_NEXT)
    call = widget.calls("read_board_tasks")
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(RUNNING_IN_PAGE, timeout=SLOW)
    [waiting] = calls_of(snapshot(page, demo), "read_board_tasks")
    token = waiting["resultToken"]

    page.evaluate("answerBoard()")
    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    widget.wait_until_idle()
    messages = widget.frame.locator("[data-part=message]")
    shown = messages.count()

    replay = httpx.post(
        f"{demo.hostcall}/api/calls/{waiting['toolCallId']}/result",
        json={"token": token, "output": {"tasks": [{"title": "Forged", "status": "todo"}]}},
        timeout=5,
    )
    assert replay.status_code == 409
    assert replay.json()["error"]["code"] == "call_already_settled"
    [settled] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert settled["outcome"] == {"output": {"tasks": [{"title": "Held task", "status": "todo"}]}}
    assert "resultToken" not in settled
    expect(messages).to_have_count(shown)
    expect(call).to_have_attribute("data-state", "done")


def test_duplicate_result_from_the_page_is_ignored(page: Page, demo: Demo) -> None:
    page.add_init_script(
        """addEventListener('message', e => {
          if (e.data?.type === 'hostcall:hello' && e.ports[0]) window.__widgetPort = e.ports[0]
        }, true)"""
    )
    sent = _answer_requests(page)
    widget = open_chat(page, demo)
    _hold_board_handler(page)
    widget.send(ASK_NEXT)
    call = widget.calls("read_board_tasks")
    expect(call.locator("[data-part=tool-call-note]")).to_have_text(RUNNING_IN_PAGE, timeout=SLOW)
    page.evaluate("answerBoard()")
    expect(call).to_have_attribute("data-state", "done", timeout=SLOW)
    widget.wait_until_idle()
    call_id = call.get_attribute("data-call-id")
    assert len(sent) == 1

    # The page (the trusted parent) answers the same call again, exactly as the loader would:
    # on the channel the widget's hello handed it (kept by the init script below).
    page.evaluate(
        """callId => window.__widgetPort.postMessage({type: 'hostcall:result', callId,
                output: {tasks: [{title: 'Second answer', status: 'todo'}]}})""",
        call_id,
    )
    # A later turn, as a sync point: the widget has handled the duplicate by then.
    widget.send("Hello")
    expect(widget.last_reply()).to_contain_text("Hello! Ask me", timeout=SLOW)
    widget.wait_until_idle()

    assert len(sent) == 1, [r.url for r in sent]
    expect(call).to_have_attribute("data-state", "done")
    [settled] = calls_of(snapshot(page, demo), "read_board_tasks")
    assert settled["outcome"] == {"output": {"tasks": [{"title": "Held task", "status": "todo"}]}}
    expect(
        widget.frame.locator("[data-part=message-text]").filter(has_text="Second answer")
    ).to_have_count(0)
