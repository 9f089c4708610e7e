"""hostcall/history.py: a visitor lists, opens and deletes the conversations of their history,
with the session token of the conversation they hold; nobody lists, opens or deletes another
person's or another browser's, and a refusal changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.store.records import Conversation
from hostcall.tokens import Purpose
from tests.support.browsers import Browser, started
from tests.support.databases import store_url
from tests.support.harness import ORIGIN, Conv, Harness, write_agent
from tests.support.identity import AUDIENCE, ISSUER, SECRET, SECRET_ENV, hs_token
from tests.unit.test_bad_input import READ, assert_error, assert_nothing_to_resume, state
from tests.unit.test_neighbours import BOARD_ORIGIN, RESUME, cookie_value
from tests.unit.test_person_data import make_persons

KEY_A = "a" * 43  # one browser's resume key
KEY_B = "b" * 43  # another browser's


@pytest.fixture(params=["sqlite", "postgres"])
def h(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    with store_url(request.param) as url:
        harness = Harness(tmp_path, agents_dir, database_url=url)
        yield harness
        harness.stop()


def history(h: Harness, conv: Conv, **params: str) -> dict[str, Any]:
    r = h.http.get(f"/api/conversations/{conv.id}/history", params=params, headers=conv.auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


def ids(page: dict[str, Any]) -> list[str]:
    return [c["conversationId"] for c in page["conversations"]]


def set_person(h: Harness, conv: Conv, person: str) -> None:
    make_persons(h, conv, person)


def test_a_browser_lists_its_conversations_last_written_first_titled_by_the_first_message(
    h: Harness,
) -> None:
    a = Browser(KEY_A)
    first, second, third = started(h, a), started(h, a), started(h, a)
    h.say(first, READ)
    h.settle(first)
    h.clock.advance(5)
    h.say(second, "Hello there, planner")
    h.settle(second)
    page = history(h, third)
    assert ids(page) == [second.id, first.id, third.id]
    titles = {c["conversationId"]: c["title"] for c in page["conversations"]}
    assert titles == {first.id: READ, second.id: "Hello there, planner", third.id: ""}
    assert "next" not in page
    for entry in page["conversations"]:
        assert entry["createdAt"].endswith("Z") and entry["updatedAt"] >= entry["createdAt"]


def test_another_browser_or_a_page_without_storage_sees_none_of_them(h: Harness) -> None:
    a, b = Browser(KEY_A), Browser(KEY_B)
    mine = started(h, a)
    h.say(mine, READ)
    theirs = started(h, b)
    keyless = started(h, Browser(None))
    assert ids(history(h, theirs)) == [theirs.id]
    assert ids(history(h, keyless)) == []


def test_a_person_s_history_follows_them_and_leaves_out_the_anonymous_ones(h: Harness) -> None:
    a, b = Browser(KEY_A), Browser(KEY_B)
    anonymous = started(h, a)
    on_a = started(h, a)
    on_b = started(h, b)
    set_person(h, on_a, "user-42")
    set_person(h, on_b, "user-42")
    someone_else = started(h, a)
    set_person(h, someone_else, "user-7")
    assert set(ids(history(h, on_b))) == {on_a.id, on_b.id}
    assert ids(history(h, someone_else)) == [someone_else.id]
    # The browser's anonymous history no longer shows what became a person's.
    assert ids(history(h, anonymous)) == [anonymous.id]


def test_a_long_history_comes_in_pages(h: Harness) -> None:
    a = Browser(KEY_A)
    holder = started(h, a)
    # Stored directly: more than the per-address limit lets one address create in a minute.
    browser = h.runtime.tokens.verify(Purpose.SESSION, holder.session).browser
    made = [Conversation(f"c_page{n:03}", "planner", 1000.0 + n, browser=browser)
            for n in range(52)]  # fmt: skip
    for conversation in made:
        h.call(h.runtime.store.create_conversation, conversation)
    first = history(h, holder)
    assert len(first["conversations"]) == 50 and first["next"]
    rest = history(h, holder, before=first["next"])
    assert "next" not in rest
    everything = ids(first) + ids(rest)
    assert everything == [holder.id, *(c.id for c in reversed(made))]


def test_a_bad_page_cursor_is_refused_by_name(h: Harness) -> None:
    a = Browser(KEY_A)
    conv = started(h, a)
    for bad in ("nope", "inf~c_1", "1.5~c d", "nan~c_1"):
        r = h.http.get(
            f"/api/conversations/{conv.id}/history", params={"before": bad}, headers=conv.auth
        )
        assert_error(r, 400, "bad_request", "before")


def test_opening_one_s_own_conversation_hands_its_tokens_and_the_cookie_names_it(
    h: Harness,
) -> None:
    a = Browser(KEY_A)
    old = started(h, a)
    h.say(old, READ)
    h.settle(old)
    now = started(h, a)
    r = h.http.post(
        f"/api/conversations/{now.id}/history/{old.id}",
        json={"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY_A},
        headers={**now.auth, **ORIGIN},
    )
    assert r.status_code == 200, r.text
    opened = r.json()
    assert opened["conversationId"] == old.id
    token = {"Authorization": f"Bearer {opened['sessionToken']}"}
    snap = h.http.get(f"/api/conversations/{old.id}", headers=token).json()
    assert next(m["text"] for m in snap["messages"]) == READ
    # A reload resumes the conversation opened, with this browser's key.
    name, _, _ = r.headers["set-cookie"].partition("=")
    cookie = {"Cookie": f"{name}={cookie_value(r.headers['set-cookie'])}"}
    resumed = h.http.post(
        RESUME,
        json={"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY_A},
        headers={**ORIGIN, **cookie},
    )
    assert resumed.status_code == 200 and resumed.json()["conversationId"] == old.id
    # ... and with no other key.
    refused = h.http.post(
        RESUME,
        json={"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY_B},
        headers={**ORIGIN, **cookie},
    )
    assert_nothing_to_resume(refused)


def test_deleting_one_s_own_conversation_removes_it_from_the_history(h: Harness) -> None:
    a = Browser(KEY_A)
    old = started(h, a)
    h.say(old, READ)
    h.settle(old)
    now = started(h, a)
    r = h.http.delete(f"/api/conversations/{now.id}/history/{old.id}", headers=now.auth)
    assert r.status_code == 204, r.text
    assert ids(history(h, now)) == [now.id]
    assert h.call(h.runtime.store.get_conversation, old.id) is None
    audit = h.call(h.runtime.store.list_audit)
    assert next((a.actor, a.action, a.conversation_id) for a in audit) == (
        "visitor",
        "conversation.delete",
        None,
    )
    # Its token now opens nothing.
    assert h.http.get(f"/api/conversations/{old.id}", headers=old.auth).status_code == 404


def test_deleting_the_conversation_one_holds_is_allowed(h: Harness) -> None:
    a = Browser(KEY_A)
    now = started(h, a)
    r = h.http.delete(f"/api/conversations/{now.id}/history/{now.id}", headers=now.auth)
    assert r.status_code == 204, r.text
    assert h.call(h.runtime.store.get_conversation, now.id) is None


def test_every_history_endpoint_refuses_another_browser_s_conversation(h: Harness) -> None:
    a, b = Browser(KEY_A), Browser(KEY_B)
    victim = started(h, a)
    h.say(victim, READ)
    h.settle(victim)
    before = state(h, victim)
    intruder = started(h, b)
    keyless = started(h, Browser(None))
    person = started(h, a)  # same browser, but a person's now: not the anonymous history
    set_person(h, person, "user-42")
    for attacker in (intruder, keyless, person):
        base = f"/api/conversations/{attacker.id}/history/{victim.id}"
        opened = h.http.post(base, json={"parentOrigin": BOARD_ORIGIN}, headers=attacker.auth)
        assert_error(opened, 404, "unknown_conversation")
        assert "set-cookie" not in opened.headers
        assert_error(h.http.delete(base, headers=attacker.auth), 404, "unknown_conversation")
        assert victim.id not in ids(history(h, attacker))
    assert state(h, victim) == before


def test_every_history_endpoint_refuses_another_person_s_conversation(h: Harness) -> None:
    a = Browser(KEY_A)
    victim = started(h, a)
    set_person(h, victim, "user-42")
    h.say(victim, READ)
    h.settle(victim)
    before = state(h, victim)
    other = started(h, a)  # same browser, another person
    set_person(h, other, "user-7")
    anonymous = started(h, a)  # same browser, nobody signed in
    for attacker in (other, anonymous):
        base = f"/api/conversations/{attacker.id}/history/{victim.id}"
        opened = h.http.post(base, json={"parentOrigin": BOARD_ORIGIN}, headers=attacker.auth)
        assert_error(opened, 404, "unknown_conversation")
        assert_error(h.http.delete(base, headers=attacker.auth), 404, "unknown_conversation")
        assert victim.id not in ids(history(h, attacker))
    assert state(h, victim) == before


def test_the_path_s_conversation_must_be_the_token_s(h: Harness) -> None:
    a = Browser(KEY_A)
    mine = started(h, a)
    other = started(h, a)
    r = h.http.get(f"/api/conversations/{other.id}/history", headers=mine.auth)
    assert_error(r, 403, "wrong_token")
    r = h.http.delete(f"/api/conversations/{other.id}/history/{mine.id}", headers=mine.auth)
    assert_error(r, 403, "wrong_token")
    r = h.http.get(f"/api/conversations/{mine.id}/history")
    assert r.status_code == 401
    assert h.call(h.runtime.store.get_conversation, mine.id) is not None


def test_an_unknown_conversation_and_a_foreign_parent_are_refused(h: Harness) -> None:
    a = Browser(KEY_A)
    mine = started(h, a)
    other = started(h, a)
    base = f"/api/conversations/{mine.id}/history"
    assert_error(h.http.delete(f"{base}/c_nothing", headers=mine.auth), 404,
                 "unknown_conversation")  # fmt: skip
    r = h.http.post(
        f"{base}/{other.id}", json={"parentOrigin": "https://evil.example"}, headers=mine.auth
    )
    assert_error(r, 400, "bad_request", "parentOrigin")
    assert "set-cookie" not in r.headers


# ---- a person's history, on an agent whose visitors sign in ---------------------------------


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Harness]:
    directory = tmp_path / "agents"
    write_agent(directory, {"allowed_env": [SECRET_ENV]}, name="_platform.json")
    write_agent(directory, {
        "id": "shop", "allowed_origins": [BOARD_ORIGIN],
        "model": {"kind": "scripted", "rules": []},
        "identity": {"issuer": ISSUER, "audience": AUDIENCE, "secret_env": SECRET_ENV},
    })  # fmt: skip
    harness = Harness(tmp_path, directory, environ={SECRET_ENV: SECRET})
    yield harness
    harness.stop()


def signed_in(h: Harness, sub: str, key: str) -> tuple[Conv, dict[str, str]]:
    who = {"Hostcall-Identity": hs_token(sub)}
    body = {"parentOrigin": BOARD_ORIGIN, "resumeKey": key}
    r = h.http.post("/api/agents/shop/conversations", json=body, headers=ORIGIN | who)
    assert r.status_code == 201, r.text
    b = r.json()
    return Conv(b["conversationId"], b["sessionToken"], b["streamToken"]), who


def test_a_person_s_history_spans_browsers_and_needs_their_identity_token(shop: Harness) -> None:
    on_a, who = signed_in(shop, "user-42", KEY_A)
    on_b, _ = signed_in(shop, "user-42", KEY_B)
    theirs, mallory = signed_in(shop, "user-7", KEY_A)
    url = f"/api/conversations/{on_b.id}/history"
    r = shop.http.get(url, headers=on_b.auth | who)
    assert r.status_code == 200, r.text
    assert {c["conversationId"] for c in r.json()["conversations"]} == {on_a.id, on_b.id}
    # The session token alone, or with another person's identity, lists nothing.
    assert_error(shop.http.get(url, headers=on_b.auth), 401, "identity_required")
    assert_error(shop.http.get(url, headers=on_b.auth | mallory), 403, "wrong_person")
    other = f"/api/conversations/{theirs.id}/history/{on_a.id}"
    assert_error(shop.http.delete(other, headers=theirs.auth | mallory), 404,
                 "unknown_conversation")  # fmt: skip
    assert shop.call(shop.runtime.store.get_conversation, on_a.id) is not None
