"""A server too busy to take new work, in Chromium (docs/deploy.md, "Back-pressure"): the
widget shows "Busy, retrying…", sends the same request again after the server's Retry-After
on its own, and the visitor's message, kept all along, gets its reply once the server has
room. The server has room for one step, and a run held on the fake model fills it, so the
refusal is certain; stopping that run makes the room."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from hostcall.qa.servers import HostcallServer, start_hostcall
from tests.e2e.conftest import shot
from tests.e2e.flows_helpers import SLOW, open_chat
from tests.e2e.test_run_control import _provider_agents
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text

FULL_AT_ONE = {"HOSTCALL_MAX_STEPS_IN_FLIGHT": "1", "HOSTCALL_BUSY_RETRY_AFTER_SECONDS": "1"}
# The held run's model writes and then holds the rest: only a Stop ends its step.
HELD = Reply([text("Once upon a time"), text("..."), DONE], stall=60)
PLANNED = Reply([text("Your week is planned."), chunk({}, "stop"), DONE])


def _busy_demo(tmp_path: Path, provider: FakeProvider) -> HostcallServer:
    agents = _provider_agents(tmp_path, provider)
    return start_hostcall(tmp_path, command="demo", extra=["--agents", str(agents)],
                          env=FULL_AT_ONE)  # fmt: skip


@contextmanager
def _held_run(demo: HostcallServer) -> Iterator[None]:
    """Another visitor's run, its step in flight (the server's one room) until the end."""
    origin = {"Origin": demo.board.rstrip("/")}
    with httpx.Client(base_url=demo.url, timeout=30) as api:
        made = api.post("/api/agents/planner/conversations", headers=origin).json()
        auth = {"Authorization": f"Bearer {made['sessionToken']}"}
        conversation = f"/api/conversations/{made['conversationId']}"
        run = api.post(f"{conversation}/messages", json={"text": "a story"}, headers=auth)
        assert run.status_code == 202, run.text
        yield
        stopped = api.post(f"{conversation}/runs/{run.json()['runId']}/stop", headers=auth)
        assert stopped.status_code == 200, stopped.text


def test_a_busy_server_s_refusal_is_retried_with_the_message_kept(
    page: Page, tmp_path: Path, provider: FakeProvider
) -> None:
    provider.replies += [HELD, PLANNED]
    demo = _busy_demo(tmp_path, provider)
    try:
        with _held_run(demo):
            widget = open_chat(page, demo)
            frame = widget.frame
            widget.send("Plan my week")
            mine = frame.locator("[data-part=message][data-role=user]", has_text="Plan my week")
            busy = mine.locator("[data-part=message-busy]")
            expect(busy).to_have_text("Busy, retrying…", timeout=SLOW)
            expect(busy).to_have_attribute("role", "status")
            shot(page, "busy-door-1-retrying")
        expect(widget.last_reply()).to_have_text("Your week is planned.", timeout=SLOW)
        expect(busy).to_have_count(0)
        expect(mine).to_have_count(1)
        widget.wait_until_idle()
        shot(page, "busy-door-2-answered")
        # What the model read is the message as typed, sent once.
        sent = [m["content"] for m in provider.received[-1].body["messages"] if m["role"] == "user"]
        assert sent == ["Plan my week"]
    finally:
        demo.stop()


def test_a_retry_the_busy_server_refuses_goes_again_on_its_own(
    page: Page, tmp_path: Path, provider: FakeProvider
) -> None:
    upstream = json.dumps({"error": {"message": "upstream down"}}).encode()
    provider.replies += [Reply([upstream], status=500, media_type="application/json"), HELD,
                         PLANNED]  # fmt: skip
    demo = _busy_demo(tmp_path, provider)
    try:
        widget = open_chat(page, demo)
        widget.send("Plan my week")
        failed = widget.error()
        expect(failed).to_contain_text("The assistant is not available right now", timeout=SLOW)
        widget.wait_until_idle()
        with _held_run(demo):
            failed.locator("[data-part=retry]").click()
            busy = widget.frame.locator("[data-part=error][role=status]", has_text="Busy")
            expect(busy).to_have_text("Busy, retrying…", timeout=SLOW)
            shot(page, "busy-door-3-retry-refused")
        expect(widget.last_reply()).to_have_text("Your week is planned.", timeout=SLOW)
        expect(busy).to_have_count(0)
        widget.wait_until_idle()
        assert widget.messages("user") == ["Plan my week"]
        assert len(provider.received) == 3
    finally:
        demo.stop()


def test_stop_while_a_message_waits_for_room_keeps_it_unsent(
    page: Page, tmp_path: Path, provider: FakeProvider
) -> None:
    provider.replies += [HELD, PLANNED]
    demo = _busy_demo(tmp_path, provider)
    try:
        with _held_run(demo):
            widget = open_chat(page, demo)
            frame = widget.frame
            widget.send("Plan my week")
            mine = frame.locator("[data-part=message][data-role=user]", has_text="Plan my week")
            expect(mine.locator("[data-part=message-busy]")).to_be_visible(timeout=SLOW)
            frame.locator("[data-part=stop]").click()
            # At once: not sent, with its Retry, and the composer free again.
            expect(mine).to_have_attribute("data-state", "failed")
            expect(mine.locator("[data-part=message-busy]")).to_have_count(0)
            expect(mine.locator("[data-part=message-retry]")).to_be_visible()
            widget.wait_until_idle()
            shot(page, "busy-door-4-stopped")
            # Its Retry-After (1 s) passes while the server still has no room: a resend
            # would be refused and show "Busy" again.
            frame.locator("body").evaluate("() => new Promise(r => setTimeout(r, 1500))")
            expect(mine.locator("[data-part=message-busy]")).to_have_count(0)
            expect(mine).to_have_attribute("data-state", "failed")
        mine.locator("[data-part=message-retry]").click()
        expect(widget.last_reply()).to_have_text("Your week is planned.", timeout=SLOW)
        widget.wait_until_idle()
        assert widget.messages("user") == ["Plan my week"]
        # The held run's step and this one: the stopped message was never sent on its own.
        assert len(provider.received) == 2
        sent = [m["content"] for m in provider.received[-1].body["messages"] if m["role"] == "user"]
        assert sent == ["Plan my week"]
    finally:
        demo.stop()
