"""A visitor's edit of their last message and regeneration of the last answer (docs/protocol.md,
``POST .../messages/{id}/edit`` and ``.../regenerate``), on both stores through the real app:
a new run on a branch, the old one kept; never across a write that already ran."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.visitors.personal_data import export
from tests.support.databases import store_url as on_store
from tests.support.harness import Conv, Harness, write_agent
from tests.support.loopback import Live, live_server
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_server_tools import ask, build, fetch_tool

SHOP = {
    "id": "shop",
    "name": "Shop",
    "tools": [
        {
            "name": "sizes",
            "description": "The sizes in stock.",
            "input_schema": {"type": "object", "properties": {}},
            "output_schema": {"type": "object"},
            "effect": "read",
            "approval": "never",
        },
        {
            "name": "order",
            "description": "Order the shirt.",
            "input_schema": {"type": "object", "properties": {}},
            "output_schema": {"type": "object"},
            "effect": "write",
            "approval": "never",
        },
    ],
    "model": {
        "kind": "scripted",
        "rules": [
            {"match": "which size", "tool": "sizes", "arguments": {}, "reply": "Sizes: 38, 40."},
            {"match": "order it", "tool": "order", "arguments": {}, "reply": "Ordered."},
            {"match": "blue", "reply": "The blue one is in stock."},
            {"match": "red", "reply": "The red one is sold out."},
        ],
        "fallback": "Ask me about shirts.",
    },
}


@pytest.fixture(params=["sqlite", "postgres"])
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    with on_store(request.param) as url:
        agents = tmp_path / "agents"
        write_agent(agents, SHOP)
        h = Harness(tmp_path, agents, database_url=url)
        yield h
        h.stop()


def edit(h: Harness, conv: Conv, message_id: str, text: Any) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/messages/{message_id}/edit",
        json={"text": text},
        headers=conv.auth,
    )


def regenerate(h: Harness, conv: Conv, message_id: str) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/messages/{message_id}/regenerate", headers=conv.auth
    )


def thread(snap: dict[str, Any]) -> list[tuple[str, str]]:
    """The current branch's texts, as a reloaded widget draws them."""
    current = [m for m in snap["messages"] if not m.get("supersededBy") and m["text"]]
    return [(m["role"], m["text"]) for m in current]


def last(snap: dict[str, Any], role: str) -> dict[str, Any]:
    return [m for m in snap["messages"] if m["role"] == role and not m.get("supersededBy")][-1]


def stored(h: Harness, conv: Conv) -> list[tuple[str, str, str | None]]:
    messages = h.call(h.runtime.store.list_messages, conv.id)
    return [(m.role, m.text, m.superseded_by) for m in messages if m.role != "tool"]


def refused(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code, response.text


def test_regenerate_starts_a_new_run_and_keeps_the_old_one(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    first = h.say(conv, "the blue shirt?")
    snap = h.finish(conv)
    r = regenerate(h, conv, last(snap, "assistant")["id"])
    assert r.status_code == 202, r.text
    second = r.json()["runId"]
    assert second != first
    snap = h.finish(conv)
    assert snap["run"] == {"runId": second, "status": "finished", "error": None}
    assert thread(snap) == [("user", "the blue shirt?"), ("assistant", "The blue one is in stock.")]
    # The old branch is kept, marked with the run that replaced it, in the snapshot and
    # the store.
    old = [m for m in snap["messages"] if m.get("supersededBy")]
    assert [(m["role"], m["runId"], m["supersededBy"]) for m in old] == [
        ("user", first, second),
        ("assistant", first, second),
    ]
    assert [r.id for r in h.call(h.runtime.store.list_runs, conv.id)] == [first, second]
    # AG-UI's parentRunId names the run it branches from.
    started = [d for t, d in h.events(conv) if t == "RUN_STARTED"]
    assert [d.get("parentRunId") for d in started] == [None, first]


def test_edit_replaces_the_last_message_on_a_branch(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "hello")
    h.finish(conv)
    first = h.say(conv, "the blue shirt?")
    snap = h.finish(conv)
    r = edit(h, conv, last(snap, "user")["id"], "  the red shirt?  ")
    assert r.status_code == 202, r.text
    snap = h.finish(conv)
    assert thread(snap) == [
        ("user", "hello"),
        ("assistant", "Ask me about shirts."),
        ("user", "the red shirt?"),
        ("assistant", "The red one is sold out."),
    ]
    assert stored(h, conv) == [
        ("user", "hello", None),
        ("assistant", "Ask me about shirts.", None),
        ("user", "the blue shirt?", r.json()["runId"]),
        ("assistant", "The blue one is in stock.", r.json()["runId"]),
        ("user", "the red shirt?", None),
        ("assistant", "The red one is sold out.", None),
    ]
    started = [d for t, d in h.events(conv) if t == "RUN_STARTED"]
    assert started[-1]["parentRunId"] == first
    # And again: the edited message is the last one now; the first edit stays superseded.
    again = edit(h, conv, last(snap, "user")["id"], "the blue shirt?")
    assert again.status_code == 202, again.text
    assert thread(h.finish(conv))[-1] == ("assistant", "The blue one is in stock.")
    assert len(stored(h, conv)) == 8


def test_a_read_tool_that_ran_does_not_stop_a_regeneration(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "which size?")
    call = h.open_call(conv)
    assert h.answer(call, {}).status_code == 200
    snap = h.finish(conv)
    r = regenerate(h, conv, last(snap, "assistant")["id"])
    assert r.status_code == 202, r.text
    again = h.open_call(conv)
    assert again["toolCallId"] != call["toolCallId"]
    assert h.answer(again, {}).status_code == 200
    assert thread(h.finish(conv)) == [("user", "which size?"), ("assistant", "Sizes: 38, 40.")]


def test_a_write_that_already_ran_refuses_edit_and_regenerate(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "order it")
    call = h.open_call(conv)
    assert h.answer(call, {}).status_code == 200
    snap = h.finish(conv)
    before = (stored(h, conv), h.events(conv))
    refused(regenerate(h, conv, last(snap, "assistant")["id"]), 409, "write_already_ran")
    refused(edit(h, conv, last(snap, "user")["id"], "order the red one"), 409, "write_already_ran")
    assert (stored(h, conv), h.events(conv)) == before
    # A new message goes on as ever.
    h.say(conv, "the red shirt?")
    assert thread(h.finish(conv))[-1] == ("assistant", "The red one is sold out.")


def test_a_write_delivered_to_the_page_refuses_a_branch_while_unanswered(shop: Harness) -> None:
    """Delivered is enough: the page may have run it. (The run is waiting on it, so Stop
    first, as the visitor would.)"""
    h = shop
    conv = h.conversation("shop")
    run_id = h.say(conv, "order it")
    call = h.open_call(conv)
    stream = h.http.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert stream.status_code == 200
    delivered = h.http.post(
        f"/api/calls/{call['toolCallId']}/delivered", json={"token": call["resultToken"]}
    )
    assert delivered.status_code in (200, 204), delivered.text
    running = edit(h, conv, last(h.snapshot(conv), "user")["id"], "no, wait")
    refused(running, 409, "run_in_progress")
    stopped = h.http.post(f"/api/conversations/{conv.id}/runs/{run_id}/stop", headers=conv.auth)
    assert stopped.status_code == 200
    snap = h.snapshot(conv)
    assert snap["run"]["status"] == "stopped"
    refused(edit(h, conv, last(snap, "user")["id"], "no, wait"), 409, "write_already_ran")


def test_bad_branches_are_refused_and_lose_nothing(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "hello")
    snap = h.finish(conv)
    first_user, first_answer = last(snap, "user")["id"], last(snap, "assistant")["id"]
    h.say(conv, "the blue shirt?")
    snap = h.finish(conv)
    other = h.conversation("shop")
    h.say(other, "hello")
    theirs = last(h.finish(other), "user")["id"]
    before = (stored(h, conv), h.events(conv))

    refused(edit(h, conv, first_user, "hi"), 409, "not_last_message")
    refused(regenerate(h, conv, first_answer), 409, "not_last_message")
    # An answer's id to edit, a question's id to regenerate.
    refused(edit(h, conv, last(snap, "assistant")["id"], "hi"), 409, "not_last_message")
    refused(regenerate(h, conv, last(snap, "user")["id"]), 409, "not_last_message")
    refused(edit(h, conv, last(snap, "user")["id"], "   "), 422, "invalid_message")
    refused(edit(h, conv, last(snap, "user")["id"], "x" * 100_000), 422, "invalid_message")
    refused(edit(h, conv, last(snap, "user")["id"], 7), 422, "invalid_message")
    refused(edit(h, conv, theirs, "hi"), 404, "unknown_message")
    refused(regenerate(h, conv, "m_nope"), 404, "unknown_message")
    unknown = h.http.post("/api/conversations/c_nope/messages/m_nope/regenerate", headers=conv.auth)
    assert unknown.status_code in (401, 403, 404), unknown.text
    assert (stored(h, conv), h.events(conv)) == before
    assert thread(h.snapshot(other))[0] == ("user", "hello")


def test_a_branch_during_a_run_is_run_in_progress(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "order it")
    h.open_call(conv)
    snap = h.snapshot(conv)
    before = (stored(h, conv), h.events(conv))
    refused(edit(h, conv, last(snap, "user")["id"], "the red shirt?"), 409, "run_in_progress")
    assert (stored(h, conv), h.events(conv)) == before


def test_the_model_reads_the_current_branch_only(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "the blue shirt?")
    snap = h.finish(conv)
    assert edit(h, conv, last(snap, "user")["id"], "the red shirt?").status_code == 202
    h.finish(conv)
    history = h.call(h.runtime.store.recent_messages, conv.id, 10)
    assert [(m.role, m.text) for m in history] == [
        ("user", "the red shirt?"),
        ("assistant", "The red one is sold out."),
    ]


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_the_console_and_the_export_keep_the_old_branch_marked(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    first = h.say(conv, "the blue shirt?")
    snap = h.finish(conv)
    second = regenerate(h, conv, last(snap, "assistant")["id"]).json()["runId"]
    h.finish(conv)
    operator = ConsoleClient(h.app, h.runtime, "olga", "operator")
    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    marked = [(m["role"], m["runId"], m.get("supersededBy")) for m in detail["messages"]]
    assert marked == [
        ("user", first, second),
        ("assistant", first, second),
        ("user", second, None),
        ("assistant", second, None),
    ]
    page = operator.http.get(f"/console/conversations/{conv.id}")
    assert page.status_code == 200
    document = h.call(export, h.runtime.store, [conv.id], subject="test")
    [exported] = document["conversations"]
    assert [m.get("supersededBy") for m in exported["messages"]] == [second, second, None, None]
    assert [r["id"] for r in exported["runs"]] == [first, second]


@pytest.fixture(scope="module")
def target() -> Iterator[Live]:
    with live_server() as live:
        yield live


def test_a_server_write_that_failed_on_its_way_back_refuses_a_branch(
    tmp_path: Path, target: Live
) -> None:
    """The server's block sent its request; the answer was an error, so the write may have
    happened all the same: nothing runs it again."""
    tool = fetch_tool(f"{target.base}/status/503?w={{{{ $fromAI.what }}}}", effect="write")
    h = build(tmp_path, target, tool)
    try:
        conv, snap = ask(h, "fetch it")
        assert h.model_error(snap["calls"][0])["code"] == "block_failed"
        snap = h.finish(conv)
        before = (stored(h, conv), h.events(conv))
        refused(regenerate(h, conv, last(snap, "assistant")["id"]), 409, "write_already_ran")
        assert (stored(h, conv), h.events(conv)) == before
    finally:
        h.stop()


def test_a_refused_branch_costs_the_visitor_no_message(tmp_path: Path) -> None:
    # Two messages a conversation: the first is said; refused edits and regenerations
    # (a write ran, not the last message) must leave the second to the visitor.
    agents = tmp_path / "agents"
    write_agent(agents, {**SHOP, "limits": {"messages_per_minute_per_conversation": 2}})
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("shop")
        h.say(conv, "order it")
        assert h.answer(h.open_call(conv), {}).status_code == 200
        snap = h.finish(conv)
        for _ in range(3):
            refused(regenerate(h, conv, last(snap, "assistant")["id"]), 409, "write_already_ran")
            refused(edit(h, conv, last(snap, "user")["id"], "red"), 409, "write_already_ran")
            refused(edit(h, conv, "m_not_there", "red"), 404, "unknown_message")
        h.say(conv, "the red shirt?")
        assert thread(h.finish(conv))[-1] == ("assistant", "The red one is sold out.")
        # The limit holds all the same: a third message is refused.
        third = h.http.post(
            f"/api/conversations/{conv.id}/messages", json={"text": "blue?"}, headers=conv.auth
        )
        assert third.status_code == 429, third.text
    finally:
        h.stop()
