"""Surfaces: each call is assigned to one surface by the server, that assignment
is the claim, and a call whose surface goes away moves on by the rules of docs/protocol.md:
reads run again elsewhere with the same call id, writes go to the form, never twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.protocol.events import CustomName
from tests.support.harness import BOARD, Conv, Harness
from tests.support.live import Frame, Live, live_server, settings_for

ASK_READ = "What should I work on next?"
ASK_WRITE = "Add a task to call Bob"
BOTH = ["read_board_tasks", "create_task"]
TASK = {"id": "t9", "title": "Call Bob", "status": "todo"}
A, B = "tab-a-0000", "tab-b-0000"  # two tabs of one conversation
DISPATCH = CustomName.TOOL_CALL_DISPATCH.value


def register(h: Harness, conv: Conv, surface: str | None, tools: list[str]) -> Any:
    body: dict[str, Any] = {"tools": tools}
    if surface is not None:
        body["surfaceId"] = surface
    return h.http.post(f"/api/conversations/{conv.id}/capabilities", json=body, headers=conv.auth)


def touch(h: Harness, conv: Conv, surface: str) -> None:
    r = h.http.post(f"/api/conversations/{conv.id}/surfaces/{surface}/activity", headers=conv.auth)
    assert r.status_code == 204, r.text


def leave(h: Harness, conv: Conv, surface: str) -> None:
    r = h.http.post(f"/api/conversations/{conv.id}/surfaces/{surface}/leave", headers=conv.auth)
    assert r.status_code == 204, r.text


def claim(h: Harness, conv: Conv, surface: str) -> dict[str, Any]:
    """What a page's snapshot does: it writes the surface's calls to it (the claim)."""
    r = h.http.get(f"/api/conversations/{conv.id}?surface={surface}", headers=conv.auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


def dispatches(h: Harness, conv: Conv) -> list[dict[str, Any]]:
    return [d for t, d in h.events(conv) if t == DISPATCH]


def approve(h: Harness, call: dict[str, Any], surface: str, **extra: Any) -> None:
    r = h.decide(call, "approve", surfaceId=surface, **extra)
    assert r.status_code == 200, r.text


# ---- assignment at dispatch ----------------------------------------------------------------


def test_the_surface_where_the_person_approved_runs_the_call_every_time(harness: Harness) -> None:
    for attempt in range(10):
        conv = harness.conversation()
        register(harness, conv, A, BOTH)
        register(harness, conv, B, BOTH)
        touch(harness, conv, A)  # A is the most recently active...
        harness.say(conv, ASK_WRITE)
        call = harness.open_call(conv, "awaiting_confirmation")
        assert call["surfaceId"] is None and call["route"] == "form"
        edited = {"input": {"title": "Call Bob now"}} if attempt % 2 else {}
        approve(harness, call, B, **edited)  # ...but the person is in B
        sent = harness.open_call(conv)
        assert (sent["surfaceId"], sent["route"], sent["assignment"]) == (
            B,
            "handler",
            1,
        )
        [event] = dispatches(harness, conv)
        assert event["surfaceId"] == B and event["toolCallId"] == call["toolCallId"]


def test_without_a_decision_the_most_recently_active_surface_with_a_handler_runs_it(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    register(harness, conv, A, BOTH)
    register(harness, conv, B, BOTH)
    register(harness, conv, "console-00", [])  # active, but cannot run it
    touch(harness, conv, A)
    touch(harness, conv, "console-00")
    harness.say(conv, ASK_READ)
    call = harness.open_call(conv)
    assert call["surfaceId"] == A
    assert harness.answer(call, BOARD).status_code == 200
    harness.settle(conv)
    touch(harness, conv, B)
    harness.say(conv, ASK_READ)
    assert harness.open_call(conv)["surfaceId"] == B


def test_a_call_no_surface_can_run_goes_to_the_form_with_the_reason(harness: Harness) -> None:
    conv = harness.conversation()
    register(harness, conv, A, ["create_task"])
    harness.say(conv, ASK_READ)
    call = harness.open_call(conv)
    assert (call["route"], call["surfaceId"], call["formReason"]) == ("form", None, "no_handler")


def test_approving_on_a_surface_without_the_handler_sends_it_to_one_that_has_it(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    register(harness, conv, A, BOTH)
    register(harness, conv, "phone-0000", [])
    harness.say(conv, ASK_WRITE)
    approve(harness, harness.open_call(conv, "awaiting_confirmation"), "phone-0000")
    assert harness.open_call(conv)["surfaceId"] == A


# ---- the claim -----------------------------------------------------------------------------


def test_the_assigned_surfaces_snapshot_is_the_claim_and_no_other_surface_can_make_it(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    register(harness, conv, A, BOTH)
    register(harness, conv, B, BOTH)
    touch(harness, conv, A)
    harness.say(conv, ASK_READ)
    call = harness.open_call(conv)
    assert call["state"] == "dispatched"
    claim(harness, conv, B)
    assert harness.open_call(conv)["state"] == "dispatched"  # not B's to claim
    [seen] = [c for c in claim(harness, conv, A)["calls"]]
    assert (seen["state"], seen["delivered"], seen["surfaceId"]) == (
        "delivered",
        True,
        A,
    )
    assert harness.answer(seen, BOARD).status_code == 200  # no /delivered request needed


# ---- when the surface goes away ------------------------------------------------------------


def test_a_read_whose_page_left_runs_again_on_another_surface_with_the_same_call_id(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    register(harness, conv, A, BOTH)
    register(harness, conv, B, BOTH)
    touch(harness, conv, A)
    harness.say(conv, ASK_READ)
    first = harness.open_call(conv)
    claim(harness, conv, A)
    leave(harness, conv, A)
    again = harness.open_call(conv)
    assert again["toolCallId"] == first["toolCallId"]
    assert (again["state"], again["surfaceId"], again["assignment"]) == (
        "dispatched",
        B,
        2,
    )
    assert [d["surfaceId"] for d in dispatches(harness, conv)] == [A, B]
    # The first run's answer (the page's last breath) and the rerun's are one answer: the
    # call id is the idempotency key, and the second gets 409.
    assert harness.answer(first, BOARD).status_code == 200
    assert harness.answer(again, BOARD).status_code == 409
    snap = harness.settle(conv)
    assert snap["run"]["status"] == "finished"
    results = [d for t, d in harness.events(conv) if t == "TOOL_CALL_RESULT"]
    assert len(results) == 1


def test_a_read_left_on_the_form_goes_to_the_reloaded_page_when_it_registers(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    register(harness, conv, "page-load-1", BOTH)
    harness.say(conv, ASK_READ)
    call = harness.open_call(conv)
    claim(harness, conv, "page-load-1")
    leave(harness, conv, "page-load-1")  # the reload: no other surface yet
    waiting = harness.open_call(conv)
    assert (waiting["route"], waiting["formReason"]) == ("form", "no_handler")
    register(harness, conv, "page-load-2", BOTH)  # the same page, loaded again
    again = harness.open_call(conv)
    assert again["toolCallId"] == call["toolCallId"]
    assert (again["surfaceId"], again["route"], again["state"]) == (
        "page-load-2",
        "handler",
        "dispatched",
    )
    assert "formReason" not in again


def test_a_delivered_write_whose_page_left_goes_to_the_form_and_never_to_a_handler_again(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    register(harness, conv, A, BOTH)
    register(harness, conv, B, BOTH)
    harness.say(conv, ASK_WRITE)
    approve(harness, harness.open_call(conv, "awaiting_confirmation"), A)
    claim(harness, conv, A)
    leave(harness, conv, A)
    call = harness.open_call(conv)
    assert (call["route"], call["surfaceId"], call["formReason"]) == ("form", None, "surface_gone")
    assert call["state"] == "delivered"
    register(harness, conv, "tab-c-0000", BOTH)  # a new page with a handler: still the form
    touch(harness, conv, B)
    harness.call(harness.runtime.engine.ledger.rehoming.rehome, conv.id)
    assert harness.open_call(conv)["route"] == "form"
    assert [d["surfaceId"] for d in dispatches(harness, conv)] == [A, None]
    assert harness.answer(call, TASK).status_code == 200  # the person answers it
    assert harness.settle(conv)["run"]["status"] == "finished"


def test_a_write_its_page_never_received_moves_to_another_surface(harness: Harness) -> None:
    conv = harness.conversation()
    register(harness, conv, A, BOTH)
    register(harness, conv, B, BOTH)
    harness.say(conv, ASK_WRITE)
    approve(harness, harness.open_call(conv, "awaiting_confirmation"), A)
    leave(harness, conv, A)  # before its stream wrote the dispatch
    call = harness.open_call(conv)
    assert (call["surfaceId"], call["assignment"], call["state"]) == (B, 2, "dispatched")


def test_an_idempotent_write_runs_again_like_a_read(tmp_path: Path, agents_dir: Path) -> None:
    planner = agents_dir / "planner.json"
    data = json.loads(planner.read_text())
    for tool in data["tools"]:
        if tool["name"] == "create_task":
            tool["idempotent"] = True
    planner.write_text(json.dumps(data))
    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation()
        register(h, conv, A, BOTH)
        register(h, conv, B, BOTH)
        h.say(conv, ASK_WRITE)
        approve(h, h.open_call(conv, "awaiting_confirmation"), A)
        claim(h, conv, A)
        leave(h, conv, A)
        assert h.open_call(conv)["surfaceId"] == B
    finally:
        h.stop()


def test_a_client_that_names_no_surface_is_always_present(harness: Harness) -> None:
    conv = harness.conversation()
    assert register(harness, conv, None, BOTH).json() == {
        "surfaceId": "conversation",
        "tools": BOTH,
        "pageTools": [],
        "refused": [],
    }
    harness.say(conv, ASK_READ)
    call = harness.open_call(conv)
    assert (call["surfaceId"], call["route"]) == ("conversation", "handler")
    assert harness.call(harness.runtime.engine.ledger.rehoming.rehome, conv.id) == []


# ---- bad input: a clear error, and nothing changed -------------------------------------------


@pytest.mark.parametrize("bad", ["short", "has space!", "x" * 65, 42, [A]])
def test_a_bad_surface_id_is_refused_and_changes_nothing(harness: Harness, bad: Any) -> None:
    conv = harness.conversation()
    r = harness.http.post(
        f"/api/conversations/{conv.id}/capabilities",
        json={"tools": BOTH, "surfaceId": bad},
        headers=conv.auth,
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["details"]["field"] == "surfaceId"
    assert str(bad)[:20] in r.json()["error"]["message"]
    assert harness.call(harness.runtime.store.list_surfaces, conv.id) == []


def test_a_decision_naming_a_bad_surface_is_refused_and_the_call_still_waits(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    harness.say(conv, ASK_WRITE)
    call = harness.open_call(conv, "awaiting_confirmation")
    before = harness.events(conv)
    r = harness.decide(call, "approve", surfaceId="../../etc")
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "surfaceId"
    assert harness.open_call(conv)["state"] == "awaiting_confirmation"
    assert harness.events(conv) == before


def test_surface_requests_need_the_conversations_session(harness: Harness) -> None:
    conv, other = harness.conversation(), harness.conversation()
    for tail in ("activity", "leave"):
        url = f"/api/conversations/{conv.id}/surfaces/tab-a-0000/{tail}"
        assert harness.http.post(url).status_code == 401
        assert harness.http.post(url, headers=other.auth).status_code == 403
        bad = f"/api/conversations/{conv.id}/surfaces/bad!/{tail}"
        assert harness.http.post(bad, headers=conv.auth).status_code == 400
    assert harness.call(harness.runtime.store.list_surfaces, conv.id) == []


# ---- streams: attach, claim on write, grace period, stale replays ----------------------------


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    with live_server(settings_for(tmp_path, surface_grace_seconds=0.3)) as server:
        yield server


def register_live(live: Live, conv: Conv, surface: str, tools: list[str]) -> None:
    r = live.client.post(
        f"/api/conversations/{conv.id}/capabilities",
        json={"tools": tools, "surfaceId": surface},
        headers=conv.auth,
    )
    assert r.status_code == 200, r.text


def ticket(live: Live, conv: Conv) -> str:
    """A fresh stream token: each opens one stream."""
    r = live.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["streamToken"])


def next_dispatch(stream: Iterator[Frame]) -> dict[str, Any]:
    """The CALL of the next dispatch event on the stream."""
    frame = next(f for f in stream if f.event == DISPATCH)
    return dict(frame.data["value"])


def wait_for(live: Live, conv: Conv, check: Any, timeout: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        call = live.snapshot(conv)["calls"][-1]
        if check(call):
            return dict(call)
        assert time.monotonic() < deadline, f"call never got there: {call}"
        time.sleep(0.03)


def test_a_surfaces_stream_claims_its_dispatch_as_it_writes_it(live: Live) -> None:
    conv = live.conversation()
    register_live(live, conv, A, BOTH)
    with live.stream(live.events_url(conv, surface=A)) as stream:
        live.say(conv, ASK_READ)
        frame = next_dispatch(stream)
        assert frame["surfaceId"] == A
        call = live.snapshot(conv)["calls"][-1]
        assert (call["state"], call["delivered"]) == ("delivered", True)
        [surface] = live.snapshot(conv)["surfaces"]
        assert surface == {"surfaceId": A, "tools": BOTH, "present": True}


def test_a_stream_lost_past_the_grace_period_gives_its_read_to_another_surface(
    live: Live,
) -> None:
    conv = live.conversation()
    register_live(live, conv, A, BOTH)
    with live.stream(live.events_url(conv, surface=B)):
        register_live(live, conv, B, BOTH)
        with live.stream(live.events_url(conv, ticket(live, conv), surface=A)) as stream:
            live.say(conv, ASK_READ)
            assert next_dispatch(stream)["surfaceId"] == A
        # A's stream closed without a word: after the grace period, B runs it again.
        moved = wait_for(live, conv, lambda c: c["surfaceId"] == B)
        assert moved["assignment"] == 2


def test_a_stale_dispatch_is_not_replayed_to_the_surface_it_no_longer_belongs_to(
    live: Live,
) -> None:
    conv = live.conversation()
    register_live(live, conv, A, BOTH)  # registered, but never opens a stream
    live.say(conv, ASK_READ)
    first = wait_for(live, conv, lambda c: c["surfaceId"] == A)
    assert first["state"] == "dispatched"
    wait_for(live, conv, lambda c: c["route"] == "form")  # the grace period passed
    # A comes back (a late reconnect) and replays the whole log: its old dispatch is not
    # passed on, so it does not run the call on that one; the form's dispatch is. Being
    # back with a handler, A then gets the read again, as a new assignment.
    with live.stream(live.events_url(conv, surface=A)) as stream:
        frame = next_dispatch(stream)
        assert frame["surfaceId"] is None and frame["route"] == "form"
        again = next_dispatch(stream)
    assert (again["surfaceId"], again["assignment"]) == (A, 2)
    assert live.snapshot(conv)["calls"][-1]["state"] == "delivered"


def test_a_stream_naming_a_bad_surface_is_refused(live: Live) -> None:
    conv = live.conversation()
    r = live.client.get(live.events_url(conv, surface="no"))
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "surface"
    assert live.snapshot(conv)["surfaces"] == []


def test_the_streams_of_a_process_whose_lease_lapsed_stop_counting(
    tmp_path: Path, agents_dir: Path
) -> None:
    """A stream counts for the process serving it. When that process's ``process:`` lease
    lapses (it died), the sweeper drops its streams: after the grace period its page's read
    runs again on another surface. The same code serves SQLite and PostgreSQL
    (tests/system/test_processes.py kills a real process on PostgreSQL)."""
    h = Harness(tmp_path, agents_dir, surface_grace_seconds=2.0)
    try:
        store = h.runtime.store
        assert h.call(store.expired_leases, float("inf"), other_than="nobody") == [
            f"process:{h.runtime.leases.owner}"
        ]  # this process's own, for its life
        conv = h.conversation()
        register(h, conv, B, BOTH)
        register(h, conv, A, BOTH)

        async def streams_elsewhere() -> None:  # A's page streams from another process
            async with store.transaction():
                await store.take_lease("process:ghost", "ghost", h.clock() + 60, h.clock())
                await store.attach_surface(conv.id, A, h.clock(), "ghost")
                await store.attach_surface(conv.id, B, h.clock() - 1, h.runtime.leases.owner)

        h.call(streams_elsewhere)  # alive for now
        h.say(conv, ASK_READ)
        first = h.open_call(conv)
        assert first["surfaceId"] == A
        claim(h, conv, A)
        h.clock.advance(2.5)
        _sweep(h)  # the ghost lives: its stream still counts, past the grace period
        assert h.open_call(conv)["surfaceId"] == A
        # It dies: its lease lapses.
        h.call(store.take_lease, "process:ghost", "ghost", h.clock() - 1, h.clock())
        _sweep(h)
        surface = h.call(store.get_surface, conv.id, A)
        assert surface is not None and surface.streams == 0 and surface.detached_at is not None
        assert "process:ghost" not in h.call(store.expired_leases, float("inf"))
        assert h.open_call(conv)["surfaceId"] == A  # the grace period: a reconnect keeps it
        h.clock.advance(2.5)
        _sweep(h)
        again = h.open_call(conv)
        assert (again["toolCallId"], again["surfaceId"]) == (first["toolCallId"], B)
    finally:
        h.stop()


def _sweep(h: Harness) -> None:
    assert h.client is not None and h.client.portal is not None
    engine = h.runtime.engine
    h.client.portal.call(lambda: engine.sweep(stalled=True))
    h.client.portal.call(engine.drain)
