"""A visitor's Stop and Retry (docs/protocol.md, their endpoints), on both stores, with the
fake OpenAI-compatible provider (tests/support/provider.py) and the demo's scripted agent."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from hostcall.notices import run_notice, tool_notice
from hostcall.settings import DEMO_AGENTS
from tests.support.databases import store_url as on_store
from tests.support.harness import BOARD, Conv, Harness, allow_hosts, write_agent
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text
from tests.unit.console_client import ConsoleClient, fast_passwords

FOREIGN = {"Origin": "https://evil.example"}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    with on_store(request.param) as url:
        yield url


def _harness(tmp_path: Path, agents: Path, url: str | None) -> Harness:
    return Harness(tmp_path, agents, database_url=url)


@pytest.fixture
def talker(
    tmp_path: Path,
    provider: FakeProvider,
    store_url: str | None,
) -> Iterator[Harness]:
    """An agent on the fake provider, on SQLite or PostgreSQL."""
    agents = tmp_path / "agents"
    write_agent(agents, {
        "id": "talker", "name": "Talker",
        "model": {"kind": "openai", "base_url": provider.base_url, "model": "m"},
        "tools": [],
    })  # fmt: skip
    allow_hosts(agents, provider.base_url)
    h = _harness(tmp_path, agents, store_url)
    yield h
    h.stop()


@pytest.fixture
def planner(tmp_path: Path, store_url: str | None) -> Iterator[Harness]:
    """The demo's scripted planner, on SQLite or PostgreSQL."""
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    h = _harness(tmp_path, agents, store_url)
    yield h
    h.stop()


def stop(h: Harness, conv: Conv, run_id: str, **headers: str) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/runs/{run_id}/stop", headers={**conv.auth, **headers}
    )


def retry(h: Harness, conv: Conv, **headers: str) -> Any:
    return h.http.post(f"/api/conversations/{conv.id}/retry", headers={**conv.auth, **headers})


def wait_for(h: Harness, conv: Conv, event: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(t == event for t, _ in h.events(conv)):
        assert time.monotonic() < deadline, f"no {event} after {timeout}s"
        time.sleep(0.02)


def reply(words: str) -> Reply:
    return Reply([text(words), chunk({}, "stop"), DONE])


def _user_turns(provider: FakeProvider) -> list[str]:
    return [m["content"] for m in provider.received[-1].body["messages"] if m["role"] == "user"]


# ---- Stop ------------------------------------------------------------------------------------


def test_stop_ends_a_slow_run_at_once_and_the_visitor_writes_again(
    talker: Harness,
    provider: FakeProvider,
) -> None:
    """The model streams a few words, then stalls: "Working…" sat past a minute before."""
    slow = Reply([text("Let me think"), text(" some more"), chunk({}, "stop"), DONE], stall=3.0)
    provider.replies.extend([slow, reply("Here you are.")])
    h = talker
    conv = h.conversation("talker")
    run_id = h.say(conv, "plan my week")
    wait_for(h, conv, "TEXT_MESSAGE_CONTENT")
    started = time.monotonic()
    r = stop(h, conv, run_id)
    assert r.status_code == 200, r.text
    assert r.json() == {"runId": run_id, "status": "stopped", "code": "cancelled"}
    snap = h.snapshot(conv)
    assert time.monotonic() - started < 2
    notice = run_notice("cancelled")
    assert snap["run"] == {"runId": run_id, "status": "stopped",
                           "error": {"code": "cancelled", "message": notice}}  # fmt: skip
    # The stream shows the run ended: the half-streamed text is discarded and ended, then
    # one RUN_ERROR; the snapshot agrees (no assistant message).
    kinds = [t for t, _ in h.events(conv)]
    assert kinds[-3:] == ["hostcall.text_message_discarded", "TEXT_MESSAGE_END", "RUN_ERROR"]
    [error] = [d for t, d in h.events(conv) if t == "RUN_ERROR"]
    assert error["code"] == "cancelled" and error["runId"] == run_id
    assert [m["role"] for m in snap["messages"]] == ["user"]
    # The visitor writes again at once, and the next run reads one coherent history.
    h.say(conv, "just the plan")
    assert h.finish(conv)["run"]["status"] == "finished"
    assert _user_turns(provider) == ["plan my week", "just the plan"]
    # Nothing of the stopped step came after its RUN_ERROR.
    time.sleep(0.2)
    assert h.assistant_texts(conv) == ["Here you are."]


def test_a_step_this_process_does_not_run_commits_nothing_once_its_run_is_stopped(
    talker: Harness,
    provider: FakeProvider,
) -> None:
    """Stop against a step in another process: that process cannot be told to stop; the
    broken lease refuses what its step appends next and its end, as after an adoption."""
    slow = Reply([text("Let me think"), text(" some more"), chunk({}, "stop"), DONE], stall=1.0)
    provider.replies.append(slow)
    h = talker
    conv = h.conversation("talker")
    run_id = h.say(conv, "plan my week")
    wait_for(h, conv, "TEXT_MESSAGE_CONTENT")
    # As if the step ran elsewhere: this process forgets it is stepping the run, so Stop
    # cannot cancel it here, and only the lease stops it.
    h.runtime.engine._stepping.clear()
    assert stop(h, conv, run_id).status_code == 200
    after_stop = h.events(conv)
    assert after_stop[-1][0] == "RUN_ERROR"
    h.call(h.runtime.engine.drain)  # the step reads the model's next words, and tries
    assert len(provider.received) == 1
    assert h.events(conv) == after_stop
    snap = h.snapshot(conv)
    assert snap["run"]["status"] == "stopped" and snap["run"]["error"]["code"] == "cancelled"
    assert [m["role"] for m in snap["messages"]] == ["user"]


def test_stop_of_a_waiting_run_cancels_its_calls_and_tells_the_model(planner: Harness) -> None:
    h = planner
    conv = h.conversation()
    run_id = h.say(conv, "What should I work on next?")
    call = h.open_call(conv)
    r = stop(h, conv, run_id)
    assert r.status_code == 200, r.text
    snap = h.snapshot(conv)
    assert snap["run"]["status"] == "stopped" and snap["run"]["error"]["code"] == "cancelled"
    [shown] = snap["calls"]
    assert shown["state"] == "failed"
    assert shown["outcome"] == {"error": {"code": "cancelled",
                                          "message": tool_notice("cancelled")}}  # fmt: skip
    # The model's history stays coherent: a tool message answers the call it asked for.
    stored = h.call(h.runtime.store.list_messages, conv.id)
    [told] = [json.loads(m.text) for m in stored if m.role == "tool"]
    assert told["error"]["code"] == "cancelled" and "stopped" in told["error"]["message"]
    results = [d for t, d in h.events(conv) if t == "TOOL_CALL_RESULT"]
    assert [json.loads(d["content"])["error"]["code"] for d in results] == ["cancelled"]
    # The page's late answer is refused; nothing is lost, nothing added.
    before = h.events(conv)
    assert h.answer(call, BOARD).status_code == 409
    assert h.events(conv) == before
    # Stop twice: the documented answer, not a 500.
    again = stop(h, conv, run_id)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "run_not_active"
    assert again.json()["error"]["details"]["status"] == "stopped"
    assert h.events(conv) == before
    # The visitor goes on.
    h.say(conv, "What should I work on next?")
    assert h.open_call(conv)["state"] == "dispatched"


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_a_stop_is_its_own_outcome_in_the_console_and_the_metrics_never_a_failure(
    planner: Harness,
) -> None:
    h = planner
    conv = h.conversation()
    run_id = h.say(conv, "What should I work on next?")
    h.open_call(conv)

    def runs(outcome: str) -> float:
        labels = {"agent": "planner", "outcome": outcome}
        return REGISTRY.get_sample_value("hostcall_runs_total", labels) or 0.0

    before = {outcome: runs(outcome) for outcome in ("failed", "stopped")}
    assert stop(h, conv, run_id).status_code == 200
    assert {outcome: runs(outcome) - before[outcome] for outcome in before} == {
        "failed": 0, "stopped": 1,
    }  # fmt: skip
    operator = ConsoleClient(h.app, h.runtime, "olga", "operator")
    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    assert [r["status"] for r in detail["runs"]] == ["stopped"]

    def listed(status: str) -> list[str]:
        found = operator.http.get(f"/console/api/conversations?status={status}")
        assert found.status_code == 200, found.text
        return [c["id"] for c in found.json()["items"]]

    assert (listed("stopped"), listed("failed")) == ([conv.id], [])
    page = operator.http.get("/console/conversations").text
    assert '<option value="stopped" >Stopped by the visitor</option>' in page


def test_stop_after_the_run_finished_changes_nothing(planner: Harness) -> None:
    """Stop against the step finishing, the step first: the run stays finished."""
    h = planner
    conv = h.conversation()
    run_id = h.say(conv, "What should I work on next?")
    assert h.answer(h.open_call(conv), BOARD).status_code == 200
    assert h.finish(conv)["run"]["status"] == "finished"
    before = h.events(conv)
    r = stop(h, conv, run_id)
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_not_active"
    assert r.json()["error"]["details"]["status"] == "finished"
    assert h.events(conv) == before and h.snapshot(conv)["run"]["status"] == "finished"


def test_two_stops_at_once_stop_the_run_once(planner: Harness) -> None:
    h = planner
    conv = h.conversation()
    run_id = h.say(conv, "Add a task to write the notes")
    h.open_call(conv, "awaiting_confirmation")
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: stop(h, conv, run_id), range(2)))
    assert sorted(a.status_code for a in answers) == [200, 409]
    kinds = [t for t, _ in h.events(conv)]
    assert kinds.count("RUN_ERROR") == 1 and kinds.count("TOOL_CALL_RESULT") == 1


def test_stop_is_authorized_like_the_other_visitor_requests(planner: Harness) -> None:
    h = planner
    conv, other = h.conversation(), h.conversation()
    run_id = h.say(conv, "What should I work on next?")
    h.open_call(conv)
    url = f"/api/conversations/{conv.id}/runs/{run_id}/stop"
    assert h.http.post(url).status_code == 401
    wrong = h.http.post(url, headers=other.auth)
    assert wrong.status_code == 403
    foreign = stop(h, conv, run_id, **FOREIGN)
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "origin_not_allowed"
    # Another conversation's run is not this conversation's to stop.
    elsewhere = h.http.post(f"/api/conversations/{other.id}/runs/{run_id}/stop", headers=other.auth)
    assert elsewhere.status_code == 404 and elsewhere.json()["error"]["code"] == "unknown_run"
    assert h.snapshot(conv)["run"]["status"] == "waiting"


# ---- Retry -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 429, 500])
def test_retry_after_a_model_error_runs_again_without_sending_again(
    talker: Harness,
    provider: FakeProvider,
    status: int,
) -> None:
    body = json.dumps({"error": {"message": "upstream says no", "type": "x"}}).encode()
    provider.replies.append(Reply([body], status=status, media_type="application/json"))
    provider.replies.append(reply("Here is your week."))
    h = talker
    conv = h.conversation("talker")
    h.say(conv, "plan my week")
    failed = h.finish(conv)
    assert failed["run"]["status"] == "failed"
    assert failed["run"]["error"]["code"] == "model_http_error"
    assert "upstream says no" not in json.dumps([failed, h.events(conv)])
    r = retry(h, conv)
    assert r.status_code == 202, r.text
    snap = h.finish(conv)
    assert snap["run"]["runId"] == r.json()["runId"] and snap["run"]["status"] == "finished"
    # The thread shows the message once; the model read one user turn.
    assert [(m["role"], m["text"]) for m in snap["messages"]] == [
        ("user", "plan my week"),
        ("assistant", "Here is your week."),
    ]
    assert _user_turns(provider) == ["plan my week"]
    user_starts = [
        d for t, d in h.events(conv) if t == "TEXT_MESSAGE_START" and d["role"] == "user"
    ]
    assert len(user_starts) == 1


def test_retry_with_nothing_to_retry_is_refused(
    talker: Harness,
    provider: FakeProvider,
) -> None:
    h = talker
    conv = h.conversation("talker")
    none = retry(h, conv)
    assert none.status_code == 409 and none.json()["error"]["code"] == "nothing_to_retry"
    provider.replies.append(reply("Done."))
    h.say(conv, "hello")
    assert h.finish(conv)["run"]["status"] == "finished"
    before = h.events(conv)
    after_finish = retry(h, conv)
    assert after_finish.status_code == 409
    assert after_finish.json()["error"]["code"] == "nothing_to_retry"
    assert h.events(conv) == before and len(provider.received) == 1


def test_retry_during_a_run_is_run_in_progress(planner: Harness) -> None:
    h = planner
    conv = h.conversation()
    h.say(conv, "What should I work on next?")
    h.open_call(conv)
    before = h.events(conv)
    r = retry(h, conv)
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_in_progress"
    assert h.events(conv) == before
    foreign = retry(h, conv, **FOREIGN)
    assert foreign.status_code == 403


def test_a_stopped_run_can_be_retried_over_what_the_model_was_told(planner: Harness) -> None:
    """Retry after Stop runs the agent again over the history: its call was answered as
    cancelled, so the model goes on from there (the scripted planner says it could not
    read the board); the message is not sent again."""
    h = planner
    conv = h.conversation()
    run_id = h.say(conv, "What should I work on next?")
    h.open_call(conv)
    assert stop(h, conv, run_id).status_code == 200
    r = retry(h, conv)
    assert r.status_code == 202, r.text
    snap = h.finish(conv)
    assert snap["run"] == {"runId": r.json()["runId"], "status": "finished", "error": None}
    users = [m for m in snap["messages"] if m["role"] == "user"]
    assert len(users) == 1
    assert h.assistant_texts(conv)[-1].startswith("I couldn't read your board just now")
