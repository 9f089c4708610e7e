"""A server too busy to take a message, in Chromium: the widget shows "Busy, retrying…" under
the visitor's message, sends it again after the server's Retry-After on its own, and the
message, kept all along, gets its reply once the server has room (docs/deploy.md,
"Back-pressure")."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from hostcall.qa.servers import start_hostcall
from tests.e2e.conftest import shot
from tests.e2e.flows_helpers import SLOW, open_chat
from tests.e2e.test_run_control import _provider_agents
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text

# Room for one step: the held run below fills it, deterministically.
FULL_AT_ONE = {"HOSTCALL_MAX_STEPS_IN_FLIGHT": "1", "HOSTCALL_BUSY_RETRY_AFTER_SECONDS": "1"}


def test_a_busy_server_s_refusal_is_retried_with_the_message_kept(
    page: Page, tmp_path: Path, provider: FakeProvider
) -> None:
    # The held run's model writes and then holds the rest (only a Stop ends it); the
    # widget's message gets a quick reply.
    provider.replies.append(Reply([text("Once upon a time"), text("..."), DONE], stall=60))
    provider.replies.append(Reply([text("Your week is planned."), chunk({}, "stop"), DONE]))
    demo = start_hostcall(
        tmp_path, command="demo", extra=["--agents", str(_provider_agents(tmp_path, provider))],
        env=FULL_AT_ONE,
    )  # fmt: skip
    try:
        origin = {"Origin": demo.board.rstrip("/")}
        with httpx.Client(base_url=demo.url, timeout=30) as api:
            made = api.post("/api/agents/planner/conversations", headers=origin).json()
            auth = {"Authorization": f"Bearer {made['sessionToken']}"}
            conversation = f"/api/conversations/{made['conversationId']}"
            run = api.post(f"{conversation}/messages", json={"text": "a story"}, headers=auth)
            assert run.status_code == 202, run.text

            widget = open_chat(page, demo)
            frame = widget.frame
            widget.send("Plan my week")
            mine = frame.locator("[data-part=message][data-role=user]", has_text="Plan my week")
            busy = mine.locator("[data-part=message-busy]")
            expect(busy).to_have_text("Busy, retrying…", timeout=SLOW)
            expect(busy).to_have_attribute("role", "status")
            shot(page, "busy-door-1-retrying")

            stopped = api.post(f"{conversation}/runs/{run.json()['runId']}/stop", headers=auth)
            assert stopped.status_code == 200, stopped.text
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
