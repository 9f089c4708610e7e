"""The resume key alone opens nothing: the loader keeps it in the host page's
``localStorage``, where every script of the page, a browser extension or the next person at
the computer reads it. A browser's anonymous history needs what only that browser holds, its
HttpOnly cookie (hostcall/visitors/sessions.py); every history route, resuming and identifying are
tried here with the key and without the cookie, and nothing of the visitor's opens or
changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.store.records import Conversation
from hostcall.tokens import Claims, Purpose
from tests.support.browsers import PARENT, Browser, opened, started
from tests.support.databases import store_url
from tests.support.harness import ORIGIN, Conv, Harness, write_agent
from tests.support.identity import AUDIENCE, ISSUER, SECRET, SECRET_ENV
from tests.unit.test_bad_input import CREATE as WRITE
from tests.unit.test_bad_input import READ, assert_error, assert_nothing_to_resume, state
from tests.unit.test_history import KEY_A, KEY_B, history, ids
from tests.unit.test_known_visitors import who

RESUME = "/api/agents/planner/session"


@pytest.fixture(params=["sqlite", "postgres"])
def h(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    with store_url(request.param) as url:
        harness = Harness(tmp_path, agents_dir, database_url=url)
        yield harness
        harness.stop()


def test_the_resume_key_alone_opens_nothing_of_the_visitor_s(h: Harness) -> None:
    """The key sits in the host page's storage, where any script of the page, an extension
    or the next person at the computer reads it. With it and without the browser's HttpOnly
    cookie (another machine), none of the visitor's conversations opens, and nothing of
    theirs changes: not their messages, not the write waiting for their approval."""
    home = Browser(KEY_A)
    victim = started(h, home)
    h.say(victim, WRITE)
    pending = h.open_call(victim, "awaiting_confirmation")
    before = state(h, victim)
    thief = Browser(KEY_A)  # the same key, no cookie
    mine = started(h, thief)
    assert ids(history(h, mine)) == [mine.id]
    base = f"/api/conversations/{mine.id}/history"
    headers = mine.auth | ORIGIN | thief.cookies()
    for other in (victim.id, "c_0000000000000000"):  # answered as for an id nobody has
        r = h.http.post(f"{base}/{other}", json=thief.body(), headers=headers)
        assert_error(r, 404, "unknown_conversation")
        assert "set-cookie" not in r.headers
        assert_error(h.http.delete(f"{base}/{other}", headers=headers), 404,
                     "unknown_conversation")  # fmt: skip
    # Nor does the key resume anything, with the cookie its own conversation got.
    resumed = h.http.post(RESUME, json=thief.body(), headers=ORIGIN | thief.cookies())
    assert resumed.status_code == 200 and resumed.json()["conversationId"] == mine.id
    assert_nothing_to_resume(h.http.post(RESUME, json=thief.body(), headers=ORIGIN))
    assert state(h, victim) == before
    assert h.open_call(victim, "awaiting_confirmation")["toolCallId"] == pending["toolCallId"]
    assert h.call(h.runtime.store.get_conversation, victim.id) is not None


def test_the_visitor_s_own_browser_keeps_its_history_across_reloads(h: Harness) -> None:
    home = Browser(KEY_A)
    first = started(h, home)
    h.say(first, READ)
    h.settle(first)
    # A reload resumes with the cookie and the key; its token lists the browser's history.
    r = h.http.post(RESUME, json=home.body(), headers=ORIGIN | home.cookies())
    assert r.status_code == 200, r.text
    home.keep(r)
    resumed = opened(r.json())
    second = started(h, home)  # "New conversation", with the cookie the resume set
    assert set(ids(history(h, resumed))) == set(ids(history(h, second))) == {first.id, second.id}
    # Opening the first from the second points the cookie at it, in the same browser.
    url = f"/api/conversations/{second.id}/history/{first.id}"
    switched = h.http.post(url, json=home.body(), headers=second.auth | ORIGIN)
    assert switched.status_code == 200, switched.text
    home.keep(switched)
    third = started(h, home)
    assert set(ids(history(h, third))) == {first.id, second.id, third.id}


def test_a_cookie_with_another_key_starts_a_new_empty_history(h: Harness) -> None:
    """A neighbour on another port of the host catches the cookie (cookies ignore ports)
    but not the key: with its own key, the cookie names no browser of the visitor's."""
    home = Browser(KEY_A)
    victim = started(h, home)
    neighbour = Browser(KEY_B, jar=dict(home.jar))
    mine = started(h, neighbour)
    assert ids(history(h, mine)) == [mine.id]
    assert_error(
        h.http.post(
            f"/api/conversations/{mine.id}/history/{victim.id}",
            json=neighbour.body(),
            headers=mine.auth | ORIGIN,
        ),
        404,
        "unknown_conversation",
    )


def test_a_session_token_from_before_browsers_had_ids_lists_no_history(h: Harness) -> None:
    """Conversations stored before kept a digest of the key as their browser, which anyone
    with the key could compute: no token or cookie made now names them."""
    legacy = Conversation(
        "c_legacy00000001", "planner", 1000.0, browser=h.runtime.sessions.binding(KEY_A)
    )
    h.call(h.runtime.store.create_conversation, legacy)
    old_token = h.runtime.tokens.sign(Purpose.SESSION, Claims(legacy.id))
    holder = Conv(legacy.id, old_token, "")
    assert ids(history(h, holder)) == []
    thief = started(h, Browser(KEY_A))
    assert ids(history(h, thief)) == [thief.id]


def test_a_cookie_from_before_browsers_had_ids_still_resumes_into_a_new_browser(
    h: Harness,
) -> None:
    """A cookie set before carries no browser: with its key it still resumes its own
    conversation, and the cookie handed back names a browser made now."""
    home = Browser(KEY_A)
    conv = started(h, home)
    legacy = Claims(conv.id, binding=h.runtime.sessions.binding(KEY_A))
    name = next(iter(home.jar))
    home.jar[name] = h.runtime.tokens.sign(Purpose.RESUME, legacy)
    r = h.http.post(RESUME, json=home.body(), headers=ORIGIN | home.cookies())
    assert r.status_code == 200 and r.json()["conversationId"] == conv.id, r.text
    home.keep(r)
    browser = h.runtime.tokens.verify(Purpose.RESUME, home.jar[name]).browser
    assert browser is not None
    assert h.runtime.tokens.verify(Purpose.SESSION, r.json()["sessionToken"]).browser == browser
    assert_nothing_to_resume(h.http.post(RESUME, json=home.body(), headers=ORIGIN))


# ---- identifying, on an agent whose visitors sign in ----------------------------------------


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Harness]:
    """An agent whose visitors may sign in (``identity``), anonymous ones too."""
    directory = tmp_path / "agents"
    write_agent(directory, {"allowed_env": [SECRET_ENV]}, name="_platform.json")
    write_agent(directory, {
        "id": "shop", "allowed_origins": [PARENT],
        "model": {"kind": "scripted", "rules": []},
        "identity": {"issuer": ISSUER, "audience": AUDIENCE, "secret_env": SECRET_ENV},
    })  # fmt: skip
    harness = Harness(tmp_path, directory, environ={SECRET_ENV: SECRET})
    yield harness
    harness.stop()


def identify(h: Harness, browser: Browser, sub: str, held: Conv | None = None) -> Any:
    headers = ORIGIN | browser.cookies() | who(sub) | (held.auth if held else {})
    r = h.http.post("/api/agents/shop/session/identify", json=browser.body(), headers=headers)
    browser.keep(r)
    return r


def test_identifying_with_the_key_alone_adopts_nothing_of_the_browser_s(site: Harness) -> None:
    home = Browser(KEY_A)
    victim = started(site, home, "shop")
    site.say(victim, READ)
    site.settle(victim)
    before = state(site, victim)
    thief = Browser(KEY_A)  # the key, not the cookie: signed in as themselves
    assert_error(identify(site, thief, "mallory"), 404, "no_session")
    theirs = started(site, thief, "shop", **who("mallory"))
    r = site.http.get(
        f"/api/conversations/{theirs.id}/history", headers=theirs.auth | who("mallory")
    )
    assert [c["conversationId"] for c in r.json()["conversations"]] == [theirs.id]
    stored = site.call(site.runtime.store.get_conversation, victim.id)
    assert stored is not None and stored.person is None
    assert state(site, victim) == before


def test_a_person_s_conversation_opened_here_keeps_this_browser_s_own_history(
    site: Harness,
) -> None:
    """A person's conversation started on another browser, opened on this one, hands this
    browser's cookie this browser's id, never that other browser's: once the person signs
    out here, the next visitor at this computer sees none of the other browser's."""
    elsewhere = Browser(KEY_B)
    theirs_anonymous = started(site, elsewhere, "shop")
    site.say(theirs_anonymous, READ)
    site.settle(theirs_anonymous)
    started(site, elsewhere, "shop", **who("user-42"))
    here = Browser(KEY_A)
    r = identify(site, here, "user-42")
    assert r.status_code == 200, r.text
    person = opened(r.json())
    logout = site.http.post(f"/api/conversations/{person.id}/logout", headers=person.auth)
    assert logout.status_code == 204, logout.text
    next_visitor = started(site, here, "shop")
    assert ids(history(site, next_visitor)) == [next_visitor.id]
