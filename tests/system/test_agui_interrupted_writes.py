"""An AG-UI client that aborts its run while a server-side call's request is out: the call
ends ``cancelled``, a write saying it may already have taken effect (to the model, in the
ledger, and to the client), a read saying it has no result; a reload hands the client the
result its history lacks, and nothing is sent to the site again. Both stores."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostcall.agui import thread_conversation_id
from hostcall.conformance.client import Endpoint
from hostcall.settings import Settings
from hostcall.store import open_store
from hostcall.store.records import Call, StoredMessage
from tests.support.databases import store_url
from tests.support.harness import SECRET, write_agent
from tests.support.live import Live, live_server
from tests.support.loopback import Live as Target
from tests.support.loopback import live_server as target_server

SLOW = 30.0  # a ceiling for what the server does on its own, on a loaded machine


def _agent(target: Target) -> dict[str, Any]:
    def tool(name: str, effect: str) -> dict[str, Any]:
        # The site's /slow (GET only) answers after 5 s: the request is out while the
        # client aborts. The effect, not the method, says whether a call may run again.
        return {"name": name, "kind": "http", "description": f"{name}s.", "effect": effect,
                "request": {"method": "GET", "url": f"{target.base}/slow"},
                "deadline_seconds": 30}  # fmt: skip

    return {
        "id": "desk", "environment": "dev",
        "model": {"kind": "scripted", "fallback": "nothing", "rules": [
            {"match": "save", "tool": "save", "arguments": {}, "reply": "saved"},
            {"match": "peek", "tool": "peek", "arguments": {}, "reply": "peeked"}]},
        "tools": [tool("save", "write"), tool("peek", "read")],
    }  # fmt: skip


@pytest.fixture
def target() -> Iterator[Target]:
    with target_server() as live:
        yield live


@pytest.fixture(params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path: Path, target: Target) -> Iterator[Live]:
    agents = tmp_path / "agents"
    write_agent(agents, {"environments": {"dev": {"allowed_hosts": [target.host]}}},
                name="_platform.json")  # fmt: skip
    write_agent(agents, _agent(target))
    with store_url(str(request.param)) as url:
        extra: dict[str, Any] = {} if url is None else {"database_url": url}
        settings = Settings(agents_dir=agents, db_path=tmp_path / "hostcall.db",
                            secret_keys=SECRET, sweep_seconds=0.05, environ={},
                            **extra)  # fmt: skip
        with live_server(settings) as served:
            yield served


def _read(live: Live, cid: str) -> tuple[list[Call], list[StoredMessage]]:
    """The thread's calls and messages, read with a store of the test's own (the server's
    belongs to its event loop, in another thread)."""
    settings = live.app.state.hostcall.settings

    async def read() -> tuple[list[Call], list[StoredMessage]]:
        store = open_store(settings.database_url or settings.db_path, serving=False)
        try:
            return await store.list_calls(cid), await store.list_messages(cid)
        finally:
            await store.close()

    return asyncio.run(read())


def _body(thread: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"threadId": thread, "runId": f"run-{uuid.uuid4()}", "tools": [],
            "messages": messages}  # fmt: skip


def _abort_in_flight(live: Live, target: Target, text: str) -> tuple[str, list[dict[str, Any]]]:
    """Start a run whose server-side call goes to the site's /slow, and close the request
    (AG-UI's abortRun) once the site has the call's request; the thread and its history as
    an AG-UI client keeps it (the call, without its result)."""
    thread = f"thread-{uuid.uuid4()}"
    history: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": text}]
    with httpx.stream("POST", f"{live.url}/agui/desk", json=_body(thread, history),
                      timeout=SLOW) as r:  # fmt: skip
        assert r.status_code == 200
        for line in r.iter_lines():
            if "hostcall.tool_call_dispatch" in line:
                break
            if line.startswith("data:") and '"TOOL_CALL_START"' in line:
                start = json.loads(line[5:])
                call = {
                    "id": start["toolCallId"],
                    "type": "function",
                    "function": {"name": start["toolCallName"], "arguments": "{}"},
                }
                history.append(
                    {
                        "id": start.get("parentMessageId") or "a1",
                        "role": "assistant",
                        "content": "",
                        "toolCalls": [call],
                    }
                )
        deadline = time.monotonic() + SLOW
        while target.rec.hits["slow"] < 1:  # the request is out: now the client goes away
            assert time.monotonic() < deadline, "the call's request never reached the site"
            time.sleep(0.02)
    return thread, history


def _settled(live: Live, cid: str) -> tuple[Call, StoredMessage]:
    """The thread's one call once the stop has settled it, and the tool message the model
    reads for it."""
    deadline = time.monotonic() + SLOW
    while True:
        calls, messages = _read(live, cid)
        tool = [m for m in messages if m.role == "tool"]
        if calls and not calls[0].state.open and tool:
            return calls[0], tool[0]
        assert time.monotonic() < deadline, calls
        time.sleep(0.05)


def _reload(live: Live, thread: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    endpoint = Endpoint(f"{live.url}/agui/desk", timeout=SLOW)
    try:
        run = endpoint.post(_body(thread, history))
    finally:
        endpoint.close()
    assert run.status == 200, run.body
    return list(run.events)


def test_an_aborted_write_in_flight_may_have_taken_effect_and_a_reload_says_so(
    live: Live, target: Target
) -> None:
    thread, history = _abort_in_flight(live, target, "save")
    call, message = _settled(live, thread_conversation_id("desk", thread))
    assert call.state.value == "failed"
    assert call.outcome is not None
    error = call.outcome["error"]
    assert error["code"] == "cancelled" and error["mayHaveRun"] is True, error
    # What the model reads next: not "no result", which invites a silent retry.
    read = json.loads(message.text)["error"]
    assert "it may already have taken effect" in read["message"], read
    assert "no result" not in read["message"]

    events = _reload(live, thread, history)
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in results] == [call.id], events
    shown = json.loads(results[0]["content"])["error"]
    assert shown["mayHaveRun"] is True and "may already have taken effect" in shown["message"]
    assert events[-1]["type"] == "RUN_FINISHED", events
    # Nothing ran again: the site saw the write once, and a second reload whose history
    # has the result is handed nothing more.
    again = _reload(live, thread, [*history, {"id": "t1", "role": "tool", "toolCallId": call.id,
                                              "content": results[0]["content"]}])  # fmt: skip
    assert [e["type"] for e in again] == ["RUN_STARTED", "RUN_FINISHED"], again
    assert target.rec.hits["slow"] == 1


def test_an_aborted_read_in_flight_still_has_no_result(live: Live, target: Target) -> None:
    thread, history = _abort_in_flight(live, target, "peek")
    call, message = _settled(live, thread_conversation_id("desk", thread))
    assert call.outcome is not None
    error = call.outcome["error"]
    assert error["code"] == "cancelled" and "mayHaveRun" not in error, error
    assert json.loads(message.text)["error"]["message"].endswith("it has no result.")
    results = [e for e in _reload(live, thread, history) if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in results] == [call.id]
    assert "mayHaveRun" not in json.loads(results[0]["content"])["error"]
