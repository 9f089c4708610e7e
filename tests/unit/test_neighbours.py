"""Who may create and drive conversations, how often, and sessions
no neighbour can read or plant. Each refusal is checked with nothing stored changing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import BOARD, ORIGIN, Conv, Harness, planner_definition, write_agent
from tests.unit.test_bad_input import CREATE as APPROVE
from tests.unit.test_bad_input import assert_error, assert_nothing_to_resume, read_call, state

CREATE = "/api/agents/planner/conversations"
RESUME = "/api/agents/planner/session"
BOARD_ORIGIN = "http://localhost:8001"  # in the demo agent's allowed_origins
KEY = "k" * 43  # the page's resume key (widget/api.js `resumeKey`): a neighbour never has it


def conversations(h: Harness) -> int:
    db = sqlite3.connect(h.settings.db_path)
    try:
        return int(db.execute("SELECT count(*) FROM conversations").fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", "null", "http://localhost:8001.evil.example",
     "http://localhost:80010", "http://LOCALHOST:8001", None],
)  # fmt: skip
def test_creating_a_conversation_from_a_foreign_or_missing_origin_is_refused(
    harness: Harness, origin: str | None
) -> None:
    headers = {} if origin is None else {"Origin": origin}
    r = harness.http.post(CREATE, headers=headers)
    assert_error(r, 403, "origin_not_allowed")
    assert conversations(harness) == 0


@pytest.mark.parametrize("origin", ["http://testserver", BOARD_ORIGIN])
def test_the_widget_and_allowed_pages_may_create(harness: Harness, origin: str) -> None:
    assert harness.http.post(CREATE, headers={"Origin": origin}).status_code == 201


def test_foreign_origin_cannot_drive_a_conversation_even_with_its_tokens(
    harness: Harness,
) -> None:
    conv, call = read_call(harness)
    before = state(harness, conv)
    evil = {"Origin": "https://evil.example"}
    r = harness.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": "hi"}, headers={**conv.auth, **evil}
    )
    assert_error(r, 403, "origin_not_allowed")
    r = harness.http.post(
        f"/api/calls/{call['toolCallId']}/result",
        json={"token": call["resultToken"], "output": BOARD},
        headers=evil,
    )
    assert_error(r, 403, "origin_not_allowed")
    r = harness.http.get(f"/api/conversations/{conv.id}", headers={**conv.auth, **evil})
    assert_error(r, 403, "origin_not_allowed")
    assert state(harness, conv) == before


# ---- rate and cost limits --------------------------------------------------------------------


def limited(tmp_path: Path, **limits: int) -> Harness:
    directory = tmp_path / "limited"
    data = planner_definition()
    data["limits"] = limits
    write_agent(directory, data, name="planner.json")
    return Harness(tmp_path, directory)


def assert_429(r: Any, code: str, *mentions: str) -> None:
    assert_error(r, 429, code, *mentions)
    assert 1 <= int(r.headers["retry-after"]) <= 60 * 60 * 24 * 30, r.headers
    assert r.json()["error"]["details"]["retryAfter"] == int(r.headers["retry-after"])


def test_conversations_per_minute_per_client_gives_429_with_retry_after(tmp_path: Path) -> None:
    h = limited(tmp_path, conversations_per_minute_per_client=2)
    try:
        for _ in range(2):
            assert h.http.post(CREATE, headers=ORIGIN).status_code == 201
        assert_429(h.http.post(CREATE, headers=ORIGIN), "rate_limited", "per minute")
        assert conversations(h) == 2
    finally:
        h.stop()


def test_messages_per_minute_per_conversation_gives_429(tmp_path: Path) -> None:
    h = limited(tmp_path, messages_per_minute_per_conversation=1)
    try:
        conv = h.conversation()
        h.say(conv, "Hello")
        h.settle(conv)
        before = (h.events(conv), h.snapshot(conv))
        r = h.http.post(
            f"/api/conversations/{conv.id}/messages", json={"text": "again"}, headers=conv.auth
        )
        assert_429(r, "rate_limited", "messages in this conversation")
        assert (h.events(conv), h.snapshot(conv)) == before
    finally:
        h.stop()


def test_a_conversation_s_spent_token_budget_ends_it_with_a_sentence_not_a_30_day_wait(
    tmp_path: Path,
) -> None:
    # It was 429 with a Retry-After of the window's 30 days: a visitor told to come back
    # in a month, to a conversation that could never go on.
    h = limited(tmp_path, model_tokens_per_conversation=5)
    try:
        conv = h.conversation()
        h.say(conv, "Hello there, what can you do for me today?")  # the first is let through
        h.settle(conv)
        before = (h.events(conv), h.snapshot(conv))
        r = h.http.post(
            f"/api/conversations/{conv.id}/messages", json={"text": "again"}, headers=conv.auth
        )
        error = assert_error(r, 409, "conversation_limit_reached")
        assert error["message"] == (
            "This conversation has reached its limit. Please start a new conversation."
        )
        assert error["details"] == {"limit": 5}
        assert "retry-after" not in r.headers
        assert (h.events(conv), h.snapshot(conv)) == before
        other = h.conversation()  # another conversation has its own budget
        h.say(other, "Hello")
    finally:
        h.stop()


def test_the_agent_s_spent_daily_budget_asks_to_come_back_later(tmp_path: Path) -> None:
    h = limited(tmp_path, model_tokens_per_day=5)
    try:
        conv = h.conversation()
        h.say(conv, "Hello there, what can you do for me today?")
        h.settle(conv)
        before = (h.events(conv), h.snapshot(conv))
        r = h.http.post(
            f"/api/conversations/{conv.id}/messages", json={"text": "again"}, headers=conv.auth
        )
        assert_429(r, "token_budget_exhausted", "this agent today")
        assert int(r.headers["retry-after"]) <= 60 * 60 * 24
        assert (h.events(conv), h.snapshot(conv)) == before
    finally:
        h.stop()


def test_bad_limits_in_an_agent_file_are_reported(tmp_path: Path) -> None:
    from hostcall.agents import load_agents
    from hostcall.errors import AgentConfigError

    data = planner_definition()
    data["limits"] = {"messages_per_minute": 5, "model_tokens_per_day": -1}
    write_agent(tmp_path / "a", data, name="planner.json")
    with pytest.raises(AgentConfigError) as caught:
        load_agents(tmp_path / "a", {})
    assert len(caught.value.problems) == 2
    assert (
        "unknown key 'messages_per_minute'" in caught.value.problems[1] + caught.value.problems[0]
    )


# ---- the session cookie ------------------------------------------------------------------------


def created_with_cookie(h: Harness, parent: str = BOARD_ORIGIN) -> tuple[Conv, str, str]:
    r = h.http.post(CREATE, json={"parentOrigin": parent, "resumeKey": KEY}, headers=ORIGIN)
    assert r.status_code == 201, r.text
    body = r.json()
    header = r.headers["set-cookie"]
    name = header.partition("=")[0]
    return Conv(body["conversationId"], body["sessionToken"], body["streamToken"]), name, header


def resume(h: Harness, name: str, cookie: str, origin: str = "http://testserver") -> Any:
    return h.http.post(
        RESUME,
        json={"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY},
        headers={"Origin": origin, "Cookie": f"{name}={cookie}"},
    )


def cookie_value(header: str) -> str:
    return header.partition("=")[2].partition(";")[0]


def test_session_cookie_is_set_by_the_server_where_no_script_can_read_it(harness: Harness) -> None:
    _, name, header = created_with_cookie(harness)
    attributes = {a.strip().partition("=")[0].lower() for a in header.split(";")[1:]}
    assert {"httponly", "secure", "samesite", "partitioned", "path", "max-age"} <= attributes
    assert "Path=/api/agents/planner;" in header and "SameSite=None" in header
    # Named for the embedding page: another page embedding the agent gets another cookie.
    assert created_with_cookie(harness, "")[1] != name


def test_resuming_rotates_the_session_and_refuses_every_older_token(harness: Harness) -> None:
    conv, name, header = created_with_cookie(harness)
    harness.say(conv, "What should I work on next?")
    r = resume(harness, name, cookie_value(header))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["conversationId"] == conv.id and body["sessionToken"] != conv.session
    fresh = Conv(conv.id, body["sessionToken"], body["streamToken"])
    assert harness.snapshot(fresh)["messages"][0]["text"] == "What should I work on next?"
    # The token from before, and the cookie from before, are both dead now.
    old = harness.http.get(f"/api/conversations/{conv.id}", headers=conv.auth)
    assert_error(old, 401, "session_replaced")
    assert_error(resume(harness, name, cookie_value(header)), 404, "no_session")
    # The rotated cookie resumes (once more).
    assert resume(harness, name, cookie_value(r.headers["set-cookie"])).status_code == 200


def test_a_planted_session_gives_its_planter_nothing(harness: Harness) -> None:
    # The neighbour creates a conversation of its own and plants its cookie in the
    # visitor's browser (a Set-Cookie from another port of the same host).
    planted, name, header = created_with_cookie(harness)
    visitor = resume(harness, name, cookie_value(header)).json()
    mine = Conv(visitor["conversationId"], visitor["sessionToken"], visitor["streamToken"])
    harness.say(mine, "What should I work on next?")
    # Everything the planter kept is refused: its bearer token, its cookie, its stream ticket.
    assert_error(
        harness.http.get(f"/api/conversations/{planted.id}", headers=planted.auth),
        401, "session_replaced",
    )  # fmt: skip
    r = harness.http.post(f"/api/conversations/{planted.id}/stream-token", headers=planted.auth)
    assert_error(r, 401, "session_replaced")
    assert_error(resume(harness, name, cookie_value(header)), 404, "no_session")


@pytest.mark.parametrize("origin", ["http://localhost:8001", "http://testserver:8311", "null"])
def test_only_the_widget_page_itself_may_resume(harness: Harness, origin: str) -> None:
    conv, name, header = created_with_cookie(harness)
    before = state(harness, conv)
    assert_error(resume(harness, name, cookie_value(header), origin), 403, "origin_not_allowed")
    assert state(harness, conv) == before  # still generation 0: the token works
    assert harness.snapshot(conv)["conversationId"] == conv.id


@pytest.mark.parametrize("cookie", ["", "garbage", "a.b.c"])
def test_resume_without_a_good_cookie_resumes_nothing(harness: Harness, cookie: str) -> None:
    assert_nothing_to_resume(resume(harness, "hc_session_x", cookie))


# ---- a cookie that reached a neighbour ---------------------------------------------------------


def test_a_cookie_copied_to_a_neighbour_without_the_pages_key_gets_nothing(
    harness: Harness,
) -> None:
    # The visitor's widget creates its conversation, with its page's key, and the agent asks
    # the visitor to approve a call. A server on another port of the same host gets the
    # cookie (cookies ignore ports) and replays it from outside the browser, forging the
    # widget's Origin: as a session token, and to resume, with the key it does not have.
    r = harness.http.post(
        CREATE, json={"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY}, headers=ORIGIN
    )
    assert r.status_code == 201, r.text
    body = r.json()
    visitor = Conv(body["conversationId"], body["sessionToken"], body["streamToken"])
    name, stolen = r.headers["set-cookie"].partition("=")[0], cookie_value(r.headers["set-cookie"])
    harness.say(visitor, APPROVE)
    call = harness.open_call(visitor, "awaiting_confirmation")
    before, generation = state(harness, visitor), generation_of(harness, visitor)
    as_bearer = {"Authorization": f"Bearer {stolen}", **ORIGIN}
    for r in (
        harness.http.get(f"/api/conversations/{visitor.id}", headers=as_bearer),
        harness.http.post(f"/api/conversations/{visitor.id}/stream-token", headers=as_bearer),
    ):
        assert_error(r, 403, "wrong_token")  # not a session token: its own purpose
        assert "decisionToken" not in r.text
    for key in (None, "", "x" * 43, KEY[:-1] + "x"):
        replay: dict[str, Any] = {"parentOrigin": BOARD_ORIGIN}
        if key is not None:
            replay["resumeKey"] = key
        r = harness.http.post(RESUME, json=replay, headers={**ORIGIN, "Cookie": f"{name}={stolen}"})
        assert r.status_code in (400, 204), r.text
        assert "sessionToken" not in r.text and not r.headers.get("set-cookie")
    # Nothing moved: the visitor's call still awaits the visitor, whose session still works.
    assert state(harness, visitor) == before and generation_of(harness, visitor) == generation
    assert harness.open_call(visitor, "awaiting_confirmation")["toolCallId"] == call["toolCallId"]
    # The page itself, with its key, finds the conversation again (a reload).
    r = harness.http.post(
        RESUME,
        json={"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY},
        headers={**ORIGIN, "Cookie": f"{name}={stolen}"},
    )
    assert r.status_code == 200 and r.json()["conversationId"] == visitor.id, r.text


def generation_of(h: Harness, conv: Conv) -> int:
    found = h.call(h.runtime.store.get_conversation, conv.id)
    assert found is not None
    return int(found.session_generation)


def test_a_cookie_planted_with_the_neighbours_key_does_not_resume_with_the_visitors(
    harness: Harness,
) -> None:
    # The neighbour creates a conversation with a key of its own and plants the cookie; the
    # visitor's page resumes with the visitor's key: refused, and the planted one unmoved.
    r = harness.http.post(
        CREATE, json={"parentOrigin": BOARD_ORIGIN, "resumeKey": "n" * 48}, headers=ORIGIN
    )
    assert r.status_code == 201, r.text
    planted = Conv(r.json()["conversationId"], r.json()["sessionToken"], r.json()["streamToken"])
    name, cookie = r.headers["set-cookie"].partition("=")[0], cookie_value(r.headers["set-cookie"])
    refused = resume(harness, name, cookie)  # with KEY, the visitor's
    assert_nothing_to_resume(refused)
    assert not refused.headers.get("set-cookie") and "sessionToken" not in refused.text
    assert generation_of(harness, planted) == 0 and harness.snapshot(planted)["messages"] == []


@pytest.mark.parametrize("key", ["short", "k" * 129, "k" * 40 + "/=", 42])
def test_a_malformed_resume_key_is_refused_naming_the_field(harness: Harness, key: Any) -> None:
    for path in (CREATE, RESUME):
        r = harness.http.post(path, json={"parentOrigin": "", "resumeKey": key}, headers=ORIGIN)
        assert_error(r, 400, "bad_request", "resumeKey")
    assert conversations(harness) == 0
