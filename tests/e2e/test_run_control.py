"""Stop and Retry in the widget, in Chromium (docs/embedding.md): a visitor
stops a slow reply or a run waiting on its calls, and retries after a model error without
the message being sent twice."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import SLOW, open_chat, snapshot
from tests.e2e.test_console import _users_add, ask, open_conversation, person
from tests.support.loopback import live_server
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text


def _agents(tmp_path: Path, **planner: Any) -> Path:
    """The demo's agents, the planner changed by ``planner`` (its model, its rules)."""
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    path = agents / "planner.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **planner}))
    return agents


def _provider_agents(tmp_path: Path, provider: FakeProvider) -> Path:
    """The demo's agents, the planner's model the fake provider, which it may reach."""
    agents = _agents(
        tmp_path, model={"kind": "openai", "base_url": provider.base_url, "model": "m"}
    )
    platform = agents / "_platform.json"
    data = json.loads(platform.read_text())
    data["environments"]["demo"]["allowed_hosts"].append(f"127.0.0.1:{provider.port}")
    platform.write_text(json.dumps(data))
    return agents


def test_stop_ends_a_slow_reply_and_the_visitor_writes_again(
    page: Page, tmp_path: Path, provider: FakeProvider
) -> None:
    # A model that writes its first words and then stalls (for less than the adapter's 60 s
    # timeout, so only a stop can cut it short), then a quick one for the next message.
    provider.replies.append(Reply([text("Once upon a time"), text(" there was"), DONE], stall=30))
    provider.replies.append(Reply([text("Hello, what shall we plan?"), chunk({}, "stop"), DONE]))
    demo = start_demo(tmp_path, extra=["--agents", str(_provider_agents(tmp_path, provider))])
    try:
        widget = open_chat(page, demo)
        frame = widget.frame
        widget.send("tell me a story")
        stop = frame.locator("[data-part=stop]")
        send = frame.locator("[data-part=send]")
        expect(stop).to_be_visible(timeout=SLOW)
        expect(stop).to_have_accessible_name("Stop")
        expect(send).to_be_hidden()
        reply = widget.last_reply()
        expect(reply).to_contain_text("Once upon a time", timeout=SLOW)
        shot(page, "run-control-1-stop-while-working")
        # By keyboard: the control is a real button in the composer's tab order.
        stop.focus()
        page.keyboard.press("Enter")
        error = widget.error()
        expect(error).to_contain_text("You stopped this reply.", timeout=SLOW)
        expect(error.locator("[data-part=retry]")).to_be_visible()
        expect(stop).to_be_hidden()
        expect(send).to_be_visible()
        expect(frame.locator("[data-part=composer-input]")).to_be_focused()
        widget.wait_until_idle()
        # The step was stopped, not left reading: the server hung up on the model.
        assert provider.hung_up.wait(SLOW / 1000), "the stopped step went on reading the model"
        # The half-told story is gone, as from the snapshot; nothing more of it came.
        snap = snapshot(page, demo)
        assert snap["run"]["status"] == "stopped" and snap["run"]["error"]["code"] == "cancelled"
        shot(page, "run-control-2-stopped")
        # The visitor writes again at once.
        widget.send("hello")
        expect(widget.last_reply()).to_have_text("Hello, what shall we plan?", timeout=SLOW)
        widget.wait_until_idle()
        expect(frame.locator("[data-part=message]", has_text="Once upon a time")).to_have_count(0)
        expect(frame.locator("[data-part=message]", has_text="there was")).to_have_count(0)
        assert len(provider.received) == 2
    finally:
        demo.stop()


def test_stop_while_an_action_waits_for_approval_says_it_on_the_card_in_french(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo, "?locale=fr")
    widget.send("Add a task to write the notes")
    card = widget.wait_for_call("create_task", "waiting")
    stop = widget.frame.locator("[data-part=stop]")
    expect(stop).to_have_accessible_name("Arrêter")
    expect(stop).to_have_text("Arrêter")
    stop.click()
    expect(widget.error()).to_contain_text("Vous avez arrêté cette réponse.", timeout=SLOW)
    expect(card).to_have_attribute("data-state", "stopped", timeout=SLOW)
    expect(card.locator("[data-part=tool-call-status]")).to_have_text("Arrêtée")
    expect(card.locator("[data-part=tool-call-note]")).to_have_text("Arrêtée avant la fin.")
    expect(card.locator("[data-part=approve]")).to_have_count(0)
    widget.wait_until_idle()
    shot(page, "run-control-3-stopped-approval-fr")
    [call] = snapshot(page, demo)["calls"]
    assert call["state"] == "failed" and call["outcome"]["error"]["code"] == "cancelled"


def test_retry_after_a_model_error_runs_again_and_sends_nothing_twice(
    page: Page, tmp_path: Path, provider: FakeProvider
) -> None:
    agents = _provider_agents(tmp_path, provider)
    upstream = json.dumps({"error": {"message": "upstream secret words"}}).encode()
    provider.replies.append(Reply([upstream], status=500, media_type="application/json"))
    provider.replies.append(Reply([text("Here is your week."), chunk({}, "stop"), DONE]))
    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    try:
        widget = open_chat(page, demo)
        widget.send("plan my week")
        error = widget.error()
        expect(error).to_contain_text("The assistant is not available right now", timeout=SLOW)
        expect(widget.frame.locator("body")).not_to_contain_text("upstream secret words")
        widget.wait_until_idle()
        shot(page, "run-control-4-model-error")
        error.locator("[data-part=retry]").click()
        expect(widget.last_reply()).to_have_text("Here is your week.", timeout=SLOW)
        widget.wait_until_idle()
        # The thread shows the message once, and the model read it once.
        assert widget.messages("user") == ["plan my week"]
        turns = [m for m in provider.received[-1].body["messages"] if m["role"] == "user"]
        assert [m["content"] for m in turns] == ["plan my week"]
        assert len(provider.received) == 2
        snap = snapshot(page, demo)
        assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]
        shot(page, "run-control-5-retried")
    finally:
        demo.stop()


def test_a_server_side_call_shows_its_title_and_a_sentence_never_the_upstream_body(
    page: Page, tmp_path: Path
) -> None:
    """The demo showed "(block_failed) … status 404: {"error": …}" and the tool's raw name."""
    with contextlib.ExitStack() as stack:
        _server_call_fails(page, tmp_path, stack)


def _server_call_fails(page: Page, tmp_path: Path, stack: contextlib.ExitStack) -> None:
    data = json.loads((DEMO_AGENTS / "planner.json").read_text())
    [holidays] = [t for t in data["tools"] if t["name"] == "public_holidays"]
    # A holidays service that answers 404, its body quoting what it was sent.
    target = stack.enter_context(live_server())
    holidays["request"]["url"] = f"{target.base}/status/404?c={{{{ $fromAI.country }}}}"
    agents = _agents(tmp_path, tools=data["tools"])
    platform = agents / "_platform.json"
    environments = json.loads(platform.read_text())
    environments["environments"]["demo"]["allowed_hosts"].append(target.host)
    platform.write_text(json.dumps(environments))
    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    stack.callback(demo.stop)
    widget = open_chat(page, demo)
    widget.send("holidays in France")
    card = widget.wait_for_call("public_holidays", "failed")
    expect(card.locator("[data-part=tool-call-title]")).to_have_text(
        "Tool call Look up public holidays"
    )
    expect(card.locator("[data-part=tool-call-note]")).to_have_text(
        "This action could not be completed."
    )
    expect(widget.last_reply()).to_have_text(
        "I couldn't look that up just now. Please try again later.", timeout=SLOW
    )
    widget.wait_until_idle()
    body = widget.frame.locator("body")
    for leak in ("block_failed", "404", "target says no", "status"):
        expect(body).not_to_contain_text(leak)
    snap = snapshot(page, demo)
    [call] = snap["calls"]
    assert call["outcome"] == {
        "error": {"code": "block_failed", "message": "This action could not be completed."}
    }
    shot(page, "run-control-6-server-call-failed")


# ---- an operator's cancel and "End call", as the visitor reads them --------------------------


@pytest.fixture
def operated(tmp_path: Path) -> Iterator[Demo]:
    db = tmp_path / "e2e.db"
    _users_add(db, "olga", "operator")
    demo = start_demo(tmp_path, db=db, extra=["--agents", str(_agents(tmp_path))])
    yield demo
    demo.stop()


def test_an_operator_s_cancel_and_end_call_read_as_what_they_are(
    browser: Browser, operated: Demo
) -> None:
    """An operator's cancel read "Sorry, something went wrong"; "Expire call" told the model
    the call timed out. Each now has its own words, here in Japanese."""
    demo = operated
    widget = browser.new_context(locale="ja-JP").new_page()
    widget.set_default_timeout(SLOW)
    widget.goto(f"{demo.hostcall}/widget/planner?locale=ja")
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    console = person(browser, demo, "olga")
    console.on("dialog", lambda dialog: dialog.accept())

    # End call: a call waiting on the visitor's form.
    ask(widget, "What should I work on next?")
    card = widget.locator("[data-part=tool-call][data-tool=read_board_tasks]")
    expect(card.locator("[data-part=form]")).to_be_visible()
    open_conversation(console, demo)
    console.locator("[data-part=expire]").first.click()
    expect(card).to_have_attribute("data-state", "stopped")
    expect(card.locator("[data-part=tool-call-note]")).to_have_text(
        "サポートチームのメンバーがこの操作を終了しました。"
    )
    expect(widget.locator("[data-part=error]")).to_have_count(0)
    shot(widget, "run-control-7-operator-ended-ja")

    # Cancel run: a run waiting on the visitor's approval.
    ask(widget, "Add a task to write the notes")
    approval = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(approval.locator("[data-part=approve]")).to_be_visible()
    open_conversation(console, demo)
    console.locator("[data-part=cancel-run]").first.click()
    error = widget.locator("[data-part=error]")
    expect(error).to_contain_text("サポートチームのメンバーがこのリクエストを停止しました。")
    expect(error).not_to_contain_text("問題が発生しました")  # "something went wrong"
    expect(approval).to_have_attribute("data-state", "stopped")
    expect(approval.locator("[data-part=tool-call-note]")).to_have_text(
        "サポートチームのメンバーがこの操作を取り消しました。"
    )
    shot(widget, "run-control-8-operator-cancelled-ja")
