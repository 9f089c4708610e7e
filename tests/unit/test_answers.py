"""A result's token names its run, so the answer settles the call before reading it
(hostcall/calls/answers.py): every check the read made is made on the settled row, and a
check that fails rolls the settlement back. The refusals, and the store after them, are
exactly those of the long way; a token from before tokens named their run takes it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.tokens import Claims, Purpose, input_digest
from tests.support.databases import fresh_schema
from tests.support.harness import BOARD, Conv, Harness
from tests.unit.test_bad_input import (
    assert_error,
    read_call,
    results_of,
    short_deadlines,
    state,
    tool_messages,
)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Harness settings for a SQLite file (the default) or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield {}
    else:
        with fresh_schema() as url:
            yield {"database_url": url}


@pytest.fixture
def h(tmp_path: Path, agents_dir: Path, database: dict[str, Any]) -> Iterator[Harness]:
    harness = Harness(tmp_path, agents_dir, **database)
    yield harness
    harness.stop()


def token(h: Harness, conv: Conv, call: dict[str, Any], **changed: Any) -> str:
    """A result token the server signed, for ``call`` with ``changed`` claims."""
    claims = {
        "conversation_id": conv.id,
        "call_id": call["toolCallId"],
        "tool": call["toolCallName"],
        "digest": input_digest(call["input"]),
        "run_id": call["runId"],
    } | changed
    return h.runtime.tokens.sign(Purpose.CALL_RESULT, Claims(**claims))


def answers_correctly(h: Harness, conv: Conv) -> None:
    """The open call still takes a good answer, once, and the run finishes (on PostgreSQL
    the resumed run may still be waiting, not yet claimed, when the answer's 200 comes)."""
    call = h.open_call(conv, "dispatched")
    r = h.answer(call, BOARD)
    assert r.status_code == 200 and r.json() == {"state": "answered"}, r.text
    finishes(h, conv)
    assert len(results_of(h, conv, call["toolCallId"])) == 1


def finishes(h: Harness, conv: Conv, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while (status := h.snapshot(conv)["run"]["status"]) != "finished":
        assert status in ("waiting", "running") and time.monotonic() < deadline, status
        time.sleep(0.02)


def post(h: Harness, call: dict[str, Any], signed: str, output: Any = BOARD) -> Any:
    return h.http.post(
        f"/api/calls/{call['toolCallId']}/result", json={"token": signed, "output": output}
    )


def test_a_result_token_names_its_run_and_settles_the_call_once(h: Harness) -> None:
    conv, call = read_call(h)
    r = post(h, call, call["resultToken"])
    assert r.status_code == 200 and r.json() == {"state": "answered"}, r.text
    assert [d["outcome"] for d in results_of(h, conv, call["toolCallId"])] == [{"output": BOARD}]
    assert len(tool_messages(h, conv, call["toolCallId"])) == 1
    finishes(h, conv)
    before = state(h, conv)
    assert_error(post(h, call, call["resultToken"]), 409, "call_already_settled")
    assert state(h, conv) == before
    assert len(tool_messages(h, conv, call["toolCallId"])) == 1


def test_a_result_token_from_before_tokens_named_their_run_still_settles(h: Harness) -> None:
    conv, call = read_call(h)
    r = post(h, call, token(h, conv, call, run_id=None))
    assert r.status_code == 200 and r.json() == {"state": "answered"}, r.text
    assert len(results_of(h, conv, call["toolCallId"])) == 1
    finishes(h, conv)


@pytest.mark.parametrize(
    ("changed", "status", "code"),
    [
        ({"conversation_id": "c_0000000000000000"}, 403, "wrong_token"),
        ({"tool": "create_task"}, 403, "wrong_token"),
        ({"run_id": "r_0000000000000000"}, 403, "wrong_token"),
        ({"digest": input_digest({"boardId": "another"})}, 409, "input_changed"),
    ],
    ids=["conversation", "tool", "run", "input"],
)
def test_a_token_that_does_not_match_the_settled_call_rolls_it_back(
    h: Harness, changed: dict[str, Any], status: int, code: str
) -> None:
    conv, call = read_call(h)
    before = state(h, conv)
    assert_error(post(h, call, token(h, conv, call, **changed)), status, code, call["toolCallId"])
    assert state(h, conv) == before  # the call still open, no tool message, no event
    answers_correctly(h, conv)


def test_an_invalid_output_leaves_the_call_open(h: Harness) -> None:
    conv, call = read_call(h)
    before = state(h, conv)
    assert_error(post(h, call, call["resultToken"], {"tasks": "no"}), 422, "invalid_result")
    assert state(h, conv) == before
    answers_correctly(h, conv)


def test_a_result_past_the_deadline_is_rolled_back_and_the_call_expires(
    tmp_path: Path, database: dict[str, Any]
) -> None:
    # No sweeper in time: the answer itself finds the deadline passed.
    h = Harness(tmp_path, short_deadlines(tmp_path), sweep_seconds=3600, **database)
    try:
        conv, call = read_call(h)
        h.clock.advance(0.4)
        assert_error(post(h, call, call["resultToken"]), 410, "call_expired", call["toolCallId"])
        [result] = results_of(h, conv, call["toolCallId"])
        assert result["state"] == "expired"
        assert result["outcome"]["error"]["code"] == "timeout"
        [message] = tool_messages(h, conv, call["toolCallId"])
        assert message["error"]["code"] == "timeout"
    finally:
        h.stop()
