"""Known visitors through the widget's API: conversations belong to the person who had
them, follow them to another browser, are adopted when they began anonymously, and are
never shown to, opened, resumed or continued by anyone else; every refusal changes
nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.store.console_records import ConversationQuery
from tests.support.databases import store_url
from tests.support.harness import ORIGIN, Conv, Harness, allow_hosts
from tests.support.identity import SECRET, SECRET_ENV, hs_token
from tests.unit.test_bad_input import assert_error, assert_nothing_to_resume, state
from tests.unit.test_neighbours import BOARD_ORIGIN, KEY, conversations, cookie_value

AGENT = "planner"
IDENTIFY = f"/api/agents/{AGENT}/session/identify"
CREATE = f"/api/agents/{AGENT}/conversations"
RESUME = f"/api/agents/{AGENT}/session"
BODY = {"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY}


def identity_block(**extra: Any) -> dict[str, Any]:
    return {
        "issuer": "https://shop.example",
        "audience": "hostcall",
        "secret_env": SECRET_ENV,
    } | extra


def known_visitors(agents_dir: Path, **extra: Any) -> None:
    path = agents_dir / f"{AGENT}.json"
    data = json.loads(path.read_text())
    data["identity"] = identity_block(**extra)
    path.write_text(json.dumps(data))
    allow_hosts(agents_dir, env=(SECRET_ENV,))


@pytest.fixture(params=["sqlite", "postgres"])
def h(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    """The app on SQLite, and on PostgreSQL: the store's new statements run on both."""
    known_visitors(agents_dir)
    with store_url(request.param) as url:
        harness = Harness(tmp_path, agents_dir, environ={SECRET_ENV: SECRET}, database_url=url)
        yield harness
        harness.stop()


def count(h: Harness) -> int:
    return len(h.call(h.runtime.store.list_conversations, ConversationQuery(limit=1000)))


def who(sub: str, **claims: Any) -> dict[str, str]:
    return {"Hostcall-Identity": hs_token(sub, **claims)}


class Browser:
    """One browser: its cookie jar for the widget (the last Set-Cookie wins) and its tab."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.cookie = ""
        self.tab: Conv | None = None

    def headers(self, extra: dict[str, str] | None = None, *, held: bool = True) -> dict[str, str]:
        headers = dict(ORIGIN) | (extra or {})
        if self.cookie:
            headers["Cookie"] = self.cookie
        if held and self.tab is not None:
            headers |= self.tab.auth
        return headers

    def land(self, r: Any) -> dict[str, Any]:
        assert r.status_code in (200, 201), r.text
        if "set-cookie" in r.headers:
            header = r.headers["set-cookie"]
            self.cookie = f"{header.partition('=')[0]}={cookie_value(header)}"
        body: dict[str, Any] = r.json()
        self.tab = Conv(body["conversationId"], body["sessionToken"], body["streamToken"])
        return body

    def create(self, **extra: str) -> dict[str, Any]:
        return self.land(self.h.http.post(CREATE, json=BODY, headers=self.headers(extra)))

    def identify(self, sub: str, **claims: Any) -> dict[str, Any]:
        """Sign in as the widget does: the conversation the server chooses, or, when the
        person has none yet, the one their first message makes (with their token)."""
        r = self.h.http.post(IDENTIFY, json=BODY, headers=self.headers(who(sub, **claims)))
        if r.status_code == 404 and r.json()["error"]["code"] == "no_session":
            return self.create(**who(sub, **claims))
        return self.land(r)

    def say(self, text: str, sub: str | None = None) -> Any:
        assert self.tab is not None
        headers = self.tab.auth | (who(sub) if sub else {})
        return self.h.http.post(
            f"/api/conversations/{self.tab.id}/messages", json={"text": text}, headers=headers
        )


def said(h: Harness, conversation_id: str) -> list[str]:
    messages = h.call(h.runtime.store.list_messages, conversation_id)
    return [m.text for m in messages if m.role == "user"]


# ---- conversations belong to the person ----------------------------------------------------


def test_an_identified_visitor_s_new_conversation_is_theirs(h: Harness) -> None:
    ann = Browser(h)
    body = ann.create(**who("ann"))
    assert body["person"] == "ann"
    found = h.call(h.runtime.store.get_conversation, body["conversationId"])
    assert found is not None and found.person == "ann"
    anonymous = Browser(h).create()
    assert "person" not in anonymous


def test_signing_in_makes_no_conversation_until_the_person_writes(h: Harness) -> None:
    browser = Browser(h)
    r = h.http.post(IDENTIFY, json=BODY, headers=browser.headers(who("ann")))
    assert_error(r, 404, "no_session")
    assert "set-cookie" not in r.headers
    assert count(h) == 0
    # Again, as a refreshed token does: still nothing made.
    r = h.http.post(IDENTIFY, json=BODY, headers=browser.headers(who("ann")))
    assert_error(r, 404, "no_session")
    assert count(h) == 0
    # The first message: the widget creates the conversation with the person's token.
    body = browser.create(**who("ann"))
    assert body["person"] == "ann" and count(h) == 1
    assert browser.say("hello", sub="ann").status_code == 202
    # Signing in again, from here or elsewhere, goes on with it.
    again = Browser(h).land(h.http.post(IDENTIFY, json=BODY, headers={**ORIGIN, **who("ann")}))
    assert again["conversationId"] == body["conversationId"]
    assert count(h) == 1


def test_an_anonymous_conversation_in_progress_is_adopted_on_identify(h: Harness) -> None:
    browser = Browser(h)
    browser.create()
    before = browser.tab
    assert before is not None
    assert browser.say("hello").status_code == 202
    h.settle(before)
    body = browser.identify("ann")
    assert (body["conversationId"], body["person"], body["adopted"]) == (before.id, "ann", True)
    # Tokens from before the adoption (any copy of them) are refused from now on.
    r = h.http.get(f"/api/conversations/{before.id}", headers=before.auth)
    assert_error(r, 401, "session_replaced")
    assert browser.say("again", sub="ann").status_code == 202
    assert said(h, before.id) == ["hello", "again"]


def test_an_empty_anonymous_conversation_gives_way_to_the_person_s_latest(h: Harness) -> None:
    first = Browser(h)
    first.identify("ann")
    assert first.tab is not None
    assert first.say("remember the milk", sub="ann").status_code == 202
    h.settle(first.tab)
    # A second browser: an anonymous, empty conversation, then the person signs in.
    other = Browser(h)
    other.create()
    empty = other.tab
    body = other.identify("ann")
    assert (body["conversationId"], body["adopted"]) == (first.tab.id, False)
    assert empty is not None
    left = h.call(h.runtime.store.get_conversation, empty.id)
    assert left is not None and left.person is None


def test_the_same_person_on_another_browser_sees_and_continues_their_conversation(
    h: Harness,
) -> None:
    laptop, phone = Browser(h), Browser(h)
    laptop.identify("ann")
    assert laptop.tab is not None
    assert laptop.say("plan my week", sub="ann").status_code == 202
    h.settle(laptop.tab)
    body = phone.identify("ann")
    assert body["conversationId"] == laptop.tab.id
    assert phone.tab is not None
    snap = h.snapshot(phone.tab)
    assert [m["text"] for m in snap["messages"] if m["role"] == "user"] == ["plan my week"]
    assert phone.say("and next week", sub="ann").status_code == 202
    h.settle(laptop.tab)
    assert said(h, laptop.tab.id) == ["plan my week", "and next week"]
    # The laptop's tab still works: opening elsewhere replaced nobody.
    assert h.http.get(f"/api/conversations/{laptop.tab.id}", headers=laptop.tab.auth).is_success


def test_another_person_in_the_same_browser_never_gets_the_previous_one_s(h: Harness) -> None:
    browser = Browser(h)
    browser.identify("ann")
    ann_tab = browser.tab
    assert ann_tab is not None
    assert browser.say("my secret plans", sub="ann").status_code == 202
    h.settle(ann_tab)
    # Bob signs in in the same browser, the tab still holding Ann's token, her cookie set.
    body = browser.identify("bob")
    assert body["conversationId"] != ann_tab.id and body["person"] == "bob"
    assert browser.tab is not None and h.snapshot(browser.tab)["messages"] == []
    # Bob's cookie now; Ann's would not resume for him anyway.
    r = h.http.post(RESUME, json=BODY, headers=browser.headers(who("bob"), held=False))
    assert r.json()["conversationId"] == body["conversationId"]


def test_a_cookie_never_resumes_a_person_s_conversation_for_anyone_else(h: Harness) -> None:
    browser = Browser(h)
    browser.identify("ann")
    ann_tab = browser.tab
    assert ann_tab is not None
    before = state(h, ann_tab)
    for headers in ({}, who("bob")):  # logged out, or someone else
        r = h.http.post(RESUME, json=BODY, headers=browser.headers(headers, held=False))
        assert_nothing_to_resume(r)
    assert state(h, ann_tab) == before
    r = h.http.post(RESUME, json=BODY, headers=browser.headers(who("ann"), held=False))
    assert r.status_code == 200 and r.json()["conversationId"] == ann_tab.id


def test_logout_ends_this_browser_s_session(h: Harness) -> None:
    browser = Browser(h)
    browser.identify("ann")
    tab = browser.tab
    assert tab is not None
    r = h.http.post(f"/api/conversations/{tab.id}/logout", headers=tab.auth | ORIGIN)
    assert r.status_code == 204, r.text
    r = h.http.get(f"/api/conversations/{tab.id}", headers=tab.auth)
    assert_error(r, 401, "session_replaced")
    r = h.http.post(f"/api/conversations/{tab.id}/stream-token", headers=tab.auth)
    assert_error(r, 401, "session_replaced")


# ---- another person's conversation, at every door ------------------------------------------


def test_every_endpoint_refuses_another_person_s_conversation(h: Harness) -> None:
    ann, bob = Browser(h), Browser(h)
    ann.identify("ann")
    bob.identify("bob")
    assert ann.tab is not None and bob.tab is not None
    assert ann.say("read my board", sub="ann").status_code == 202
    h.settle(ann.tab)
    before = state(h, ann.tab)
    cid, auth = ann.tab.id, bob.tab.auth
    conv = f"/api/conversations/{cid}"
    attempts: list[tuple[str, str, Any]] = [
        ("GET", conv, None),
        ("POST", f"{conv}/stream-token", {}),
        ("POST", f"{conv}/capabilities", {"tools": []}),
        ("POST", f"{conv}/messages", {"text": "hi"}),
        ("POST", f"{conv}/surfaces/s_1/activity", {}),
        ("POST", f"{conv}/surfaces/s_1/leave", {}),
        ("POST", f"{conv}/logout", {}),
    ]
    for method, path, body in attempts:
        r = h.http.request(method, path, json=body, headers=auth | who("bob") | ORIGIN)
        assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_token", (path, r.text)
    r = h.http.get(f"{conv}/events", params={"token": bob.tab.stream})
    assert r.status_code == 403, r.text
    r = h.http.post(
        f"/api/agents/{AGENT}/conversations/{cid}/open", json=BODY, headers=ORIGIN | who("bob")
    )
    assert_error(r, 404, "unknown_conversation")
    # Bob's own token with his identity cannot post in his name to Ann's either way round.
    r = h.http.post(f"{conv}/messages", json={"text": "hi"}, headers=ann.tab.auth | who("bob"))
    assert_error(r, 403, "wrong_person")
    assert state(h, ann.tab) == before


def test_a_person_s_conversation_takes_messages_only_with_their_live_identity(h: Harness) -> None:
    ann = Browser(h)
    ann.identify("ann")
    assert ann.tab is not None
    before = state(h, ann.tab)
    assert_error(ann.say("no token"), 401, "identity_required")
    expired = {"Hostcall-Identity": hs_token("ann", exp=int(time.time()) - 600)}
    r = h.http.post(
        f"/api/conversations/{ann.tab.id}/messages", json={"text": "x"},
        headers=ann.tab.auth | expired,
    )  # fmt: skip
    assert_error(r, 401, "expired_identity")
    forged = {"Hostcall-Identity": hs_token("ann", secret="not-the-site-secret-at-all-000000")}
    r = h.http.post(
        f"/api/conversations/{ann.tab.id}/messages", json={"text": "x"},
        headers=ann.tab.auth | forged,
    )  # fmt: skip
    assert_error(r, 401, "bad_identity")
    assert state(h, ann.tab) == before


def test_a_person_opens_only_their_own_conversations(h: Harness) -> None:
    ann = Browser(h)
    ann.identify("ann")
    assert ann.tab is not None
    path = f"/api/agents/{AGENT}/conversations/{ann.tab.id}/open"
    r = h.http.post(path, json=BODY, headers=ORIGIN | who("ann"))
    assert r.status_code == 200 and r.json()["conversationId"] == ann.tab.id
    assert_error(h.http.post(path, json=BODY, headers=ORIGIN), 401, "identity_required")
    anonymous = Browser(h)
    anonymous.create()
    assert anonymous.tab is not None
    r = h.http.post(
        f"/api/agents/{AGENT}/conversations/{anonymous.tab.id}/open", json=BODY,
        headers=ORIGIN | who("ann"),
    )  # fmt: skip
    assert_error(r, 404, "unknown_conversation")


def test_a_bad_identity_creates_nothing(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    before = count(h)
    tokens = ("garbage", hs_token("ann", aud="elsewhere"), hs_token("ann", exp=1))
    for token in tokens:
        r = h.http.post(CREATE, json=BODY, headers=ORIGIN | {"Hostcall-Identity": token})
        assert r.status_code == 401, r.text
        r = h.http.post(IDENTIFY, json=BODY, headers=ORIGIN | {"Hostcall-Identity": token})
        assert r.status_code == 401, r.text
    # The operator's log says why, for the site's owner; it never holds a token.
    logged = [r.getMessage() for r in caplog.records if r.name == "hostcall.identity"]
    assert any("agent=planner: the identity token is not for audience" in m for m in logged)
    assert not any(token in m for token in tokens[1:] for m in logged)
    assert_error(h.http.post(IDENTIFY, json=BODY, headers=ORIGIN), 401, "identity_required")
    assert count(h) == before


def test_an_agent_that_requires_identity_refuses_anonymous_visitors(
    tmp_path: Path, agents_dir: Path
) -> None:
    known_visitors(agents_dir, required=True)
    h = Harness(tmp_path, agents_dir, environ={SECRET_ENV: SECRET})
    try:
        r = h.http.post(CREATE, json=BODY, headers=ORIGIN)
        assert_error(r, 401, "identity_required", AGENT)
        assert conversations(h) == 0
        assert Browser(h).create(**who("ann"))["person"] == "ann"
    finally:
        h.stop()


def test_an_agent_without_identity_says_so_to_a_page_that_identifies(harness: Harness) -> None:
    r = harness.http.post(IDENTIFY, json=BODY, headers=ORIGIN | who("ann"))
    assert_error(r, 400, "bad_request", "takes no identity")


# ---- limits per person ---------------------------------------------------------------------


def test_a_person_s_daily_message_limit_spans_their_conversations(
    tmp_path: Path, agents_dir: Path
) -> None:
    known_visitors(agents_dir)
    path = agents_dir / f"{AGENT}.json"
    data = json.loads(path.read_text())
    data["limits"] = {"messages_per_day_per_person": 2}
    path.write_text(json.dumps(data))
    h = Harness(tmp_path, agents_dir, environ={SECRET_ENV: SECRET})
    try:
        laptop, phone = Browser(h), Browser(h)
        laptop.create(**who("ann"))
        phone.create(**who("ann"))
        assert laptop.tab is not None and phone.tab is not None
        assert laptop.say("one", sub="ann").status_code == 202
        h.settle(laptop.tab)
        assert phone.say("two", sub="ann").status_code == 202
        h.settle(phone.tab)
        before = state(h, phone.tab)
        r = phone.say("three", sub="ann")
        assert_error(r, 429, "rate_limited", "per day")
        assert state(h, phone.tab) == before
        # Someone else, and an anonymous visitor, are not held back by Ann's count.
        bob, stranger = Browser(h), Browser(h)
        bob.create(**who("bob"))
        stranger.create()
        assert bob.say("hi", sub="bob").status_code == 202
        assert stranger.say("hi").status_code == 202
    finally:
        h.stop()


def test_a_person_s_conversation_streams_with_the_tickets_it_hands_out(h: Harness) -> None:
    ann = Browser(h)
    ann.identify("ann")
    assert ann.tab is not None
    r = h.http.post(f"/api/conversations/{ann.tab.id}/stream-token", headers=ann.tab.auth)
    for ticket in (ann.tab.stream, r.json()["streamToken"]):
        claims = h.runtime.check_stream_ticket(ticket, ann.tab.id)
        assert claims.person == "ann"
        h.call(h.runtime.open_stream, ann.tab.id, claims)  # raises if refused


def test_a_person_s_daily_token_budget_spans_their_conversations(
    tmp_path: Path, agents_dir: Path
) -> None:
    known_visitors(agents_dir)
    path = agents_dir / f"{AGENT}.json"
    data = json.loads(path.read_text())
    data["limits"] = {"model_tokens_per_day_per_person": 1}
    path.write_text(json.dumps(data))
    h = Harness(tmp_path, agents_dir, environ={SECRET_ENV: SECRET})
    try:
        laptop, phone = Browser(h), Browser(h)
        laptop.create(**who("ann"))
        phone.create(**who("ann"))
        assert laptop.tab is not None and phone.tab is not None
        assert laptop.say("spend it", sub="ann").status_code == 202
        h.settle(laptop.tab)
        before = state(h, phone.tab)
        assert_error(phone.say("more", sub="ann"), 429, "token_budget_exhausted", "your")
        assert state(h, phone.tab) == before
        bob = Browser(h)
        bob.create(**who("bob"))
        assert bob.say("hi", sub="bob").status_code == 202
    finally:
        h.stop()


def test_another_person_s_call_refuses_this_person_s_call_tokens(h: Harness) -> None:
    ann, bob = Browser(h), Browser(h)
    ann.identify("ann")
    bob.identify("bob")
    assert ann.tab is not None and bob.tab is not None
    for browser, sub in ((ann, "ann"), (bob, "bob")):
        assert browser.say("What should I work on next?", sub=sub).status_code == 202
    ann_call = h.open_call(ann.tab, "dispatched")
    bob_call = h.open_call(bob.tab, "dispatched")
    before = state(h, ann.tab)
    path = f"/api/calls/{ann_call['toolCallId']}"
    token = bob_call["resultToken"]
    for tail, body in (
        ("delivered", {"token": token}),
        ("result", {"token": token, "output": {"tasks": []}}),
        ("decision", {"token": token, "decision": "approve"}),
    ):
        r = h.http.post(f"{path}/{tail}", json=body, headers=ORIGIN)
        assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_token", (tail, r.text)
    assert state(h, ann.tab) == before
