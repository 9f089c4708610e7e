"""Runs survive restarts; calls always end; a misbehaving model cannot hang a run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import EventSource

from hostcall.settings import ROOT
from tests.support.harness import (
    BOARD,
    SECRET,
    Harness,
    allow_hosts,
    planner_definition,
    write_agent,
)


def test_waiting_run_resumes_after_restart(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    call = harness.open_call(conv)
    harness.restart()
    assert harness.snapshot(conv)["run"]["status"] == "waiting"
    assert harness.answer(call, BOARD).status_code == 200
    assert harness.settle(conv)["run"]["status"] == "finished"
    assert "Fix login bug" in harness.assistant_texts(conv)[-1]


def test_call_expires_across_a_restart(tmp_path: Path) -> None:
    data = planner_definition()
    data["tools"][0]["deadline_seconds"] = 0.5
    agents = tmp_path / "agents"
    write_agent(agents, data)
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation()
        h.say(conv, "What should I work on next?")
        call = h.open_call(conv)
        h.stop()
        time.sleep(0.8)  # the deadline passes while no server runs
        h.start()
        snap = h.settle(conv)
        assert snap["run"]["status"] == "finished"
        assert snap["calls"][0]["state"] == "expired"
        assert snap["calls"][0]["outcome"]["error"]["code"] == "timeout"
        late = h.answer(call, BOARD)
        assert late.status_code == 410 and late.json()["error"]["code"] == "call_expired"
        # The model read the timeout (the demo's reply says so in words, without the code).
        assert h.model_error(snap["calls"][0])["code"] == "timeout"
        assert "couldn't read your board" in h.assistant_texts(conv)[-1]
    finally:
        h.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(db: Path, port: int, agents: Path | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET[0]}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hostcall",
            "serve",
            "--db",
            str(db),
            "--port",
            str(port),
            "--log-level",
            "warning",
            *(["--agents", str(agents)] if agents else []),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.stdout.read().decode() if process.stdout else ""
            raise AssertionError(f"server exited with {process.returncode}:\n{out}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError("server did not start in 20 s")


def _wait_status(
    client: httpx.Client, conv: dict[str, Any], wanted: str, timeout: float = 10
) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
    for _ in range(int(timeout / 0.05)):
        snap: dict[str, Any] = client.get(
            f"/api/conversations/{conv['conversationId']}", headers=auth
        ).json()
        if snap["run"] and snap["run"]["status"] == wanted:
            return snap
        time.sleep(0.05)
    raise AssertionError(f"run never reached {wanted}: {snap['run']}")


def test_sigkill_while_a_call_is_pending_then_restart_and_answer(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    port = _free_port()
    server = _start_server(db, port)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, headers={"Origin": base}) as client:
            conv = client.post("/api/agents/planner/conversations").json()
            auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
            r = client.post(
                f"/api/conversations/{conv['conversationId']}/messages",
                json={"text": "What should I work on next?"},
                headers=auth,
            )
            assert r.status_code == 202
            call = _wait_status(client, conv, "waiting")["calls"][0]
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(10)

    server = _start_server(db, port)
    try:
        with httpx.Client(base_url=base) as client:
            r = client.post(
                f"/api/calls/{call['toolCallId']}/result",
                json={"token": call["resultToken"], "output": BOARD},
            )
            assert r.status_code == 200, r.text
            snap = _wait_status(client, conv, "finished")
            assert "Fix login bug" in snap["messages"][-1]["text"]
            again = client.post(
                f"/api/calls/{call['toolCallId']}/result",
                json={"token": call["resultToken"], "output": BOARD},
            )
            assert again.status_code == 409
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)


def _agent_with_rules(tmp_path: Path, rules: list[dict[str, Any]], **extra: Any) -> Path:
    data = planner_definition()
    data["model"] = {"kind": "scripted", "rules": rules, "fallback": "fallback"}
    data.update(extra)
    agents = tmp_path / "agents"
    write_agent(agents, data)
    return agents


def test_unknown_tool_and_malformed_arguments_are_answered_not_crashed(tmp_path: Path) -> None:
    agents = _agent_with_rules(
        tmp_path,
        [
            {
                "match": "ghost",
                "tool": "delete_everything",
                "raw_arguments": "{}",
                "error_reply": "got {{ error.code }}",
            },
            {
                "match": "garbled",
                "tool": "read_board_tasks",
                "raw_arguments": '{"boardId": ',
                "error_reply": "got {{ error.code }}",
            },
            {
                "match": "wrongtype",
                "tool": "read_board_tasks",
                "arguments": {"status": "someday"},
                "error_reply": "got {{ error.code }}: {{ error.errors | length }} errors",
            },
        ],
    )
    h = Harness(tmp_path, agents)
    try:
        for text, expected in [
            ("ghost", "got unknown_tool"),
            ("garbled", "got invalid_arguments"),
            ("wrongtype", "got invalid_arguments: 2 errors"),
        ]:
            conv = h.conversation()
            h.say(conv, text)
            snap = h.settle(conv)
            assert snap["run"]["status"] == "finished"
            assert snap["calls"][0]["state"] == "failed"
            assert h.assistant_texts(conv)[-1] == expected
            types = [t for t, _ in h.events(conv)]
            assert "hostcall.tool_call_dispatch" not in types  # never reached a surface
    finally:
        h.stop()


def test_a_model_that_keeps_calling_tools_ends_with_a_step_limit_error(tmp_path: Path) -> None:
    # With max_steps 1, the step after the (failed) tool call is one too many.
    agents = _agent_with_rules(
        tmp_path,
        [{"match": "loop", "tool": "read_board_tasks", "raw_arguments": "not json"}],
        max_steps=1,
    )
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation()
        h.say(conv, "loop")
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "step_limit"
        assert [t for t, _ in h.events(conv)][-1] == "RUN_ERROR"
        # The conversation goes on: the next message starts a new run.
        h.say(conv, "hello")
        assert h.settle(conv)["run"]["status"] == "finished"
        assert h.assistant_texts(conv)[-1] == "fallback"
    finally:
        h.stop()


def test_unreachable_model_fails_the_run_with_a_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = planner_definition()
    port = _free_port()  # nothing listens there
    data["model"] = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}
    agents = tmp_path / "agents"
    write_agent(agents, data)
    allow_hosts(agents, data["model"]["base_url"])
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation()
        h.say(conv, "hello")
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "model_unreachable"
        errors = [d for t, d in h.events(conv) if t == "RUN_ERROR"]
        # The visitor reads a sentence; the operator's log has the address.
        assert len(errors) == 1 and str(port) not in errors[0]["message"]
        assert errors[0]["message"] == snap["run"]["error"]["message"]
        assert "not available right now" in errors[0]["message"]
        assert f"agent=planner conversation={conv.id}" in caplog.text
        assert f"code=model_unreachable: model at http://127.0.0.1:{port}/v1" in caplog.text
        # The conversation is not stuck: a new message starts a new run.
        h.say(conv, "again")
        assert h.settle(conv)["run"]["status"] == "failed"
    finally:
        h.stop()


def test_frozen_agent_definition_is_stored_with_the_run(harness: Harness) -> None:
    conv = harness.conversation()
    run_id = harness.say(conv, "What should I work on next?")
    harness.open_call(conv)
    run = harness.call(harness.runtime.store.get_run, run_id)
    assert run is not None
    assert run.agent == json.loads((harness.agents_dir / "planner.json").read_text())


def test_a_reply_that_fails_at_run_time_tells_the_visitor_nothing_internal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Passes `hostcall check` (it renders on the example result) but divides by zero on
    # this answer: the visitor reads a generic sentence, the operator the rule and error.
    agents = _agent_with_rules(
        tmp_path,
        [{"match": "next", "tool": "read_board_tasks", "arguments": {"boardId": "b"},
          "reply": "{{ 10 // (result.tasks | length) }} each"}],
    )  # fmt: skip
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation()
        h.say(conv, "next")
        assert h.answer(h.open_call(conv), {"tasks": []}).status_code == 200
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"] == {
            "code": "reply_template_failed",
            "message": "Sorry, something went wrong and the assistant stopped. Please try again.",
        }
        [error] = [d for t, d in h.events(conv) if t == "RUN_ERROR"]
        assert "division" not in error["message"] and "rule" not in error["message"]
        assert not any("division" in text for text in h.assistant_texts(conv))
        assert "agent=planner" in caplog.text
        assert "rule #1 'reply' failed: ZeroDivisionError" in caplog.text
        # Nothing was lost: the answered call stays answered; the next message runs.
        [call] = snap["calls"]
        assert call["state"] == "answered" and call["outcome"] == {"output": {"tasks": []}}
        h.say(conv, "hello")
        assert h.settle(conv)["run"]["status"] == "finished"
    finally:
        h.stop()


STORY = " ".join(f"word{n}" for n in range(40))  # ten chunks of four words


def _shown(
    frames: list[tuple[str, dict[str, Any]]], final: dict[str, str] | None = None
) -> dict[str, str]:
    """The assistant messages a widget shows after applying these events, by id; ``final``
    collects each text a widget took as final (shown when its ``TEXT_MESSAGE_END`` came:
    the widget announces it and tells the host page)."""
    shown: dict[str, str] = {}
    roles: dict[str, str] = {}
    final = {} if final is None else final
    for name, data in frames:
        if name == "TEXT_MESSAGE_START":
            roles[data["messageId"]] = data["role"]
            if data["role"] == "assistant":
                shown[data["messageId"]] = ""
        elif name == "TEXT_MESSAGE_CONTENT" and roles.get(data["messageId"]) == "assistant":
            shown[data["messageId"]] += data["delta"]
        elif name == "TEXT_MESSAGE_END" and data["messageId"] in shown:
            final[data["messageId"]] = shown[data["messageId"]]
        elif name == "hostcall.text_message_discarded":
            shown.pop(data["value"]["messageId"])
    return shown


def test_sigkill_mid_answer_then_restart_shows_the_answer_once(tmp_path: Path) -> None:
    agents = _agent_with_rules(
        tmp_path, [{"match": "(?i)story", "reply": STORY, "pace_seconds": 0.3}]
    )
    db, port = tmp_path / "mid.db", _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _start_server(db, port, agents)
    try:
        with httpx.Client(base_url=base, timeout=10, headers={"Origin": base}) as client:
            conv = client.post("/api/agents/planner/conversations").json()
            cid, auth = conv["conversationId"], {"Authorization": f"Bearer {conv['sessionToken']}"}
            url = f"/api/conversations/{cid}/events?token={conv['streamToken']}"
            with client.stream("GET", url) as stream:
                client.post(f"/api/conversations/{cid}/messages", json={"text": "A story"},
                            headers=auth)  # fmt: skip
                chunks = 0
                for event in EventSource(stream).iter_sse():  # the live stream, until mid-answer
                    if event.event == "TEXT_MESSAGE_CONTENT":
                        chunks += 1
                    if chunks == 3:  # the user's text, then two chunks of the answer
                        break
                server.send_signal(signal.SIGKILL)
                server.wait(10)
    finally:
        if server.poll() is None:
            server.kill()

    server = _start_server(db, port, agents)
    try:
        with httpx.Client(base_url=base, timeout=10) as client:
            snap = _wait_status(client, conv, "finished", timeout=30)
            assert [m["text"] for m in snap["messages"] if m["role"] == "assistant"] == [STORY]
            token = client.post(f"/api/conversations/{cid}/stream-token", headers=auth).json()
            frames: list[tuple[str, dict[str, Any]]] = []
            url = f"/api/conversations/{cid}/events?token={token['streamToken']}"
            with client.stream("GET", url) as stream:
                for event in EventSource(stream).iter_sse():
                    frames.append((event.event, event.json()))
                    if event.event == "RUN_FINISHED":
                        break
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    # The cut-off message was discarded, then ended (AG-UI: every started message ends);
    # the answer is shown once, whole, and the cut copy was never taken as final.
    final: dict[str, str] = {}
    assert list(_shown(frames, final).values()) == [STORY]
    assert list(final.values()) == [STORY]
    [cut] = [d["value"]["messageId"] for n, d in frames if n == "hostcall.text_message_discarded"]
    ends = [
        i for i, (n, d) in enumerate(frames) if n == "TEXT_MESSAGE_END" and d["messageId"] == cut
    ]
    discarded = [i for i, (n, _) in enumerate(frames) if n == "hostcall.text_message_discarded"]
    assert len(ends) == 1 and discarded[0] + 1 == ends[0]


def test_a_snapshot_taken_mid_answer_resumes_the_stream_before_the_open_message(
    harness: Harness,
) -> None:
    """A message still streaming is not stored yet, so a snapshot cannot hold it: its
    ``lastEventId`` stops just before that message's start, and the stream replays it whole
    (once, a widget resyncing from a snapshot mid-answer, or after a
    restart, missed the start and the discard of the cut copy, and kept showing it)."""
    from hostcall.leases import run_key
    from hostcall.protocol.events import (
        RunStarted,
        TextMessageContent,
        TextMessageEnd,
        TextMessageStart,
    )
    from hostcall.store.records import Run, RunStatus

    store, conv = harness.runtime.store, harness.conversation()
    agent = harness.runtime.agents["planner"].source
    journal = harness.runtime.engine.journal
    harness.call(store.create_run, Run("r_mid", conv.id, agent, RunStatus.RUNNING))
    # Held, as a live step's run is: a running run without a lease is a crashed one, which
    # the sweeper adopts (and appends to) when it comes round on a slow machine.
    assert harness.call(harness.runtime.leases.take, run_key("r_mid"))
    harness.call(journal.emit, conv.id, RunStarted(conv.id, "r_mid"))
    start = harness.call(journal.emit, conv.id, TextMessageStart("m_mid", "assistant"))
    harness.call(journal.emit, conv.id, TextMessageContent("m_mid", "Once upon"))

    def last_event_id() -> str:
        r = harness.http.get(f"/api/conversations/{conv.id}", headers=conv.auth)
        assert r.status_code == 200, r.text
        assert all(m["id"] != "m_mid" for m in r.json()["messages"])
        return str(r.json()["lastEventId"])

    assert last_event_id() == f"{conv.id}:{start.seq - 1}"
    end = harness.call(journal.emit, conv.id, TextMessageEnd("m_mid"))
    assert last_event_id() == f"{conv.id}:{end.seq}"  # ended: nothing open any more
    harness.call(store.update_run, "r_mid", status=RunStatus.FINISHED)
    assert last_event_id() == f"{conv.id}:{end.seq}"
