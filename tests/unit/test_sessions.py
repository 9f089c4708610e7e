"""hostcall/visitors/sessions.py with several tabs: tabs of one browser share the session cookie,
so one tab's resume replaces the others' session; a replaced tab resumes with the cookie and
the token it held and keeps the conversation, without replacing anyone in turn. The
guarantee stands: once the visitor has resumed, no older cookie resumes, token or not, and
every refusal leaves the store as it was."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support.harness import ORIGIN, Conv, Harness
from tests.unit.test_bad_input import assert_error, state
from tests.unit.test_neighbours import BOARD_ORIGIN, KEY, RESUME, conversations, cookie_value

CREATE = "/api/agents/planner/conversations"


class Browser:
    """One browser's cookie jar for the widget, as Chromium keeps it: the last Set-Cookie wins."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        body = {"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY}
        r = h.http.post(CREATE, json=body, headers=ORIGIN)
        assert r.status_code == 201, r.text
        self.name, _, _ = r.headers["set-cookie"].partition("=")
        self.cookie = cookie_value(r.headers["set-cookie"])
        body = r.json()
        self.first = Conv(body["conversationId"], body["sessionToken"], body["streamToken"])

    def send_resume(self, cookie: str, held: Conv | None = None) -> Any:
        """``POST …/session`` as a tab sends it: the cookie, and the token it held if any."""
        headers = {"Origin": "http://testserver", "Cookie": f"{self.name}={cookie}"}
        if held is not None:
            headers |= held.auth
        body = {"parentOrigin": BOARD_ORIGIN, "resumeKey": KEY}
        return self.h.http.post(RESUME, json=body, headers=headers)

    def resume(self, held: Conv | None = None) -> Conv:
        r = self.send_resume(self.cookie, held)
        assert r.status_code == 200, r.text
        return self.land(r)

    def land(self, r: Any) -> Conv:
        """The response reaches the browser: its cookie replaces the jar's, the tab holds it."""
        self.cookie = cookie_value(r.headers["set-cookie"])
        body = r.json()
        return Conv(body["conversationId"], body["sessionToken"], body["streamToken"])

    def generation(self) -> int:
        found = self.h.call(self.h.runtime.store.get_conversation, self.first.id)
        assert found is not None
        return int(found.session_generation)


def at_once(*requests: Any) -> list[Any]:
    """Send the requests together, from threads, on the app's one event loop."""
    start = threading.Barrier(len(requests))

    def send(request: Any) -> Any:
        start.wait()
        return request()

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(send, requests))


def posts(h: Harness, tab: Conv, text: str) -> None:
    h.say(tab, text)
    h.settle(tab)


def is_replaced(h: Harness, tab: Conv) -> bool:
    r = h.http.get(f"/api/conversations/{tab.id}", headers=tab.auth)
    return r.status_code == 401 and r.json()["error"]["code"] == "session_replaced"


# ---- tabs keep the conversation ---------------------------------------------------------------


def test_two_replaced_tabs_resuming_at_once_with_one_cookie_both_keep_the_conversation(
    harness: Harness,
) -> None:
    browser = Browser(harness)
    tab_a = browser.first
    tab_b = browser.resume()  # a second tab opens: the first one's session is replaced
    tab_c = browser.resume()  # a third (or a reload): now A and B are both replaced
    assert is_replaced(harness, tab_a) and is_replaced(harness, tab_b)
    generation = browser.generation()
    # A and B each get session_replaced on their next request and resume at the same moment,
    # with the same cookie, each with the token it held.
    cookie = browser.cookie
    got = at_once(
        lambda: browser.send_resume(cookie, tab_a), lambda: browser.send_resume(cookie, tab_b)
    )
    assert [r.status_code for r in got] == [200, 200], [r.text for r in got]
    tab_a, tab_b = (browser.land(r) for r in got)
    assert tab_a.id == tab_b.id == tab_c.id
    # Neither resume replaced anyone: no tab is left out, and no further resume is needed.
    assert browser.generation() == generation
    for n, tab in enumerate((tab_a, tab_b, tab_c)):
        posts(harness, tab, f"Message {n} from one of three tabs")
    texts = [m["text"] for m in harness.snapshot(tab_c)["messages"] if m["role"] == "user"]
    assert texts == [f"Message {n} from one of three tabs" for n in range(3)]


def test_two_new_pages_resuming_at_once_lose_nothing_when_the_second_asks_again(
    harness: Harness,
) -> None:
    browser = Browser(harness)
    posts(harness, browser.first, "Before the browser restored two tabs")
    cookie = browser.cookie
    first, second = at_once(
        lambda: browser.send_resume(cookie), lambda: browser.send_resume(cookie)
    )
    won, lost = (first, second) if first.status_code == 200 else (second, first)
    assert won.status_code == 200, won.text
    # The loser sent the very cookie a planter would replay: refused, saying so.
    error = assert_error(lost, 404, "no_session", "resumed since this cookie was set")
    assert error["details"] == {"superseded": True}
    winner = browser.land(won)
    # The widget asks again once the winner's cookie has landed (widget/api.js), and the
    # winner, replaced by that, resumes with the token it held: both are in, nothing lost.
    loser = browser.resume()
    assert is_replaced(harness, winner)
    winner = browser.resume(held=winner)
    assert winner.id == loser.id == browser.first.id
    posts(harness, winner, "From the first tab")
    posts(harness, loser, "From the second tab")
    texts = [m["text"] for m in harness.snapshot(loser)["messages"] if m["role"] == "user"]
    assert texts == ["Before the browser restored two tabs", "From the first tab",
                     "From the second tab"]  # fmt: skip
    assert conversations(harness) == 1


def test_a_page_with_only_the_cookie_still_moves_the_session_on(harness: Harness) -> None:
    browser = Browser(harness)
    tab = browser.resume()
    generation = browser.generation()
    browser.resume()  # a reload: nothing held
    assert browser.generation() == generation + 1 and is_replaced(harness, tab)


# ---- what stays refused ------------------------------------------------------------------------


def test_an_older_cookie_is_refused_even_with_a_token_and_nothing_changes(
    harness: Harness,
) -> None:
    browser = Browser(harness)
    one_back = browser.cookie
    tab = browser.resume()
    two_back = one_back
    one_back = browser.cookie
    tab = browser.resume(held=tab)  # keeps the generation
    live = browser.resume()  # a reload moves it on: one_back is now one generation old
    posts(harness, live, "What should I work on next?")
    before, generation = state(harness, live), browser.generation()
    for cookie in (one_back, two_back):
        for held in (None, tab, browser.first, live):
            error = assert_error(browser.send_resume(cookie, held), 404, "no_session")
            assert error["details"] == {"superseded": True}
    assert state(harness, live) == before and browser.generation() == generation
    assert conversations(harness) == 1


def test_a_planter_replaying_its_cookie_with_its_token_gets_nothing(harness: Harness) -> None:
    # The neighbour creates a conversation of its own and plants the cookie; the visitor's
    # page resumes with it. The planter then sends its cookie with its own session token,
    # as a replaced tab would.
    planted = Browser(harness)
    planter_cookie = planted.cookie
    visitor = planted.resume()
    posts(harness, visitor, "What should I work on next?")
    before, generation = state(harness, visitor), planted.generation()
    refused = planted.send_resume(planter_cookie, planted.first)
    assert_error(refused, 404, "no_session")
    assert not refused.headers.get("set-cookie")
    assert is_replaced(harness, planted.first)
    assert state(harness, visitor) == before and planted.generation() == generation


def test_a_token_that_proves_nothing_does_not_keep_the_generation(harness: Harness) -> None:
    browser = Browser(harness)
    other = harness.conversation()  # another conversation's token, valid for that one
    for held in (other, Conv(browser.first.id, "garbage", ""),
                 Conv(browser.first.id, browser.first.stream, "")):  # fmt: skip
        generation = browser.generation()
        tab = browser.resume(held=held)
        assert browser.generation() == generation + 1, held
        assert tab.id == browser.first.id
    assert conversations(harness) == 2
