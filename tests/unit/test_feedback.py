"""A visitor's thumbs up or down on the agent's replies: stored once per reply (the latest
stands), authorized by the conversation's session, shown and filtered in the console."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.protocol.limits import MAX_FEEDBACK_COMMENT_CHARS
from hostcall.quotas import DEFAULT_LIMITS
from tests.support.databases import fresh_schema
from tests.support.harness import Conv, Harness
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_metrics import parse, scrape_from, value

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        h = Harness(tmp_path, agents_dir, **({"database_url": url} if url else {}))
        stack.callback(h.stop)
        yield h


def _replied(h: Harness) -> tuple[Conv, dict[str, Any], dict[str, Any]]:
    """A conversation, the visitor's message and the agent's reply (from the snapshot)."""
    conv = h.conversation()
    h.say(conv, "hello")
    messages = h.settle(conv)["messages"]
    [mine] = [m for m in messages if m["role"] == "user"]
    [reply] = [m for m in messages if m["role"] == "assistant"]
    return conv, mine, reply


def _rate(h: Harness, conv: Conv, message_id: str, body: dict[str, Any]) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/messages/{message_id}/feedback",
        json=body,
        headers=conv.auth,
    )


def test_a_reply_is_rated_then_rated_again_and_the_console_shows_and_filters_it(
    both: Harness,
) -> None:
    h = both
    conv, _, reply = _replied(h)
    other, _, _ = _replied(h)
    before = parse(scrape_from(h, "127.0.0.1").text)
    r = _rate(h, conv, reply["id"], {"rating": "up"})
    assert r.status_code == 200, r.text
    assert r.json() == {"messageId": reply["id"], "rating": "up", "comment": ""}
    r = _rate(h, conv, reply["id"], {"rating": "down", "comment": "  Not what I asked.  "})
    assert r.json() == {"messageId": reply["id"], "rating": "down", "comment": "Not what I asked."}
    stored = h.call(h.runtime.store.feedback_of, conv.id)
    assert [(f.message_id, f.rating, f.comment) for f in stored] == [
        (reply["id"], "down", "Not what I asked.")
    ]
    [shown] = [m for m in h.snapshot(conv)["messages"] if m["id"] == reply["id"]]
    assert shown["feedback"] == "down"
    # Counted in /metrics, each rating given (read with the client's own parser).
    after = parse(scrape_from(h, "127.0.0.1").text)
    for rating in ("up", "down"):
        name, labels = "hostcall_feedback_total", {"agent": "planner", "rating": rating}
        assert value(after, name, **labels) - value(before, name, **labels) == 1, rating

    operator = ConsoleClient(h.app, h.runtime, "olga", "operator")
    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    [rated] = [m for m in detail["messages"] if m["id"] == reply["id"]]
    assert rated["feedback"]["rating"] == "down"
    assert rated["feedback"]["comment"] == "Not what I asked."

    def listed(query: str) -> list[str]:
        body = operator.http.get(f"/console/api/conversations?{query}").json()
        return [item["id"] for item in body["items"]]

    assert listed("feedback=down") == [conv.id]
    assert listed("feedback=up") == []
    assert set(listed("")) == {conv.id, other.id}
    [item] = [i for i in operator.http.get("/console/api/conversations").json()["items"]
              if i["id"] == conv.id]  # fmt: skip
    assert (item["feedbackUp"], item["feedbackDown"]) == (0, 1)
    page = operator.http.get("/console/conversations?feedback=down")
    assert page.status_code == 200 and conv.id in page.text
    bad = operator.http.get("/console/api/conversations?feedback=sideways")
    assert bad.status_code == 400 and bad.json()["error"]["details"]["field"] == "feedback"


def test_feedback_on_what_is_not_this_conversations_reply_is_refused_and_nothing_changes(
    both: Harness,
) -> None:
    h = both
    conv, mine, reply = _replied(h)
    other, _, others_reply = _replied(h)
    assert _rate(h, conv, reply["id"], {"rating": "up", "comment": "thanks"}).status_code == 200
    before = (h.snapshot(conv)["messages"], h.events(conv), h.events(other))
    counted = parse(scrape_from(h, "127.0.0.1").text)

    # The visitor's own message is not a reply of the agent's.
    r = _rate(h, conv, mine["id"], {"rating": "up"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "not_a_reply"
    # Another conversation's reply, with this conversation's token: not found here.
    r = _rate(h, conv, others_reply["id"], {"rating": "down"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_message"
    # ... and this conversation's token on the other conversation's path: refused.
    r = h.http.post(
        f"/api/conversations/{other.id}/messages/{others_reply['id']}/feedback",
        json={"rating": "down"}, headers=conv.auth,
    )  # fmt: skip
    assert r.status_code == 403
    r = _rate(h, conv, "m_nope", {"rating": "down"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_message"
    # A comment too long, a rating that is not one, a comment that is not text.
    long = "x" * (MAX_FEEDBACK_COMMENT_CHARS + 1)
    r = _rate(h, conv, reply["id"], {"rating": "down", "comment": long})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "comment"
    assert str(MAX_FEEDBACK_COMMENT_CHARS) in r.json()["error"]["message"]
    for body in ({"rating": "meh"}, {}, {"rating": "up", "comment": 5}):
        r = _rate(h, conv, reply["id"], body)
        assert r.status_code == 400, body
    # No token at all.
    r = h.http.post(f"/api/conversations/{conv.id}/messages/{reply['id']}/feedback",
                    json={"rating": "down"})  # fmt: skip
    assert r.status_code == 401

    stored = h.call(h.runtime.store.feedback_of, conv.id)
    assert [(f.message_id, f.rating, f.comment) for f in stored] == [(reply["id"], "up", "thanks")]
    # A refused rating is not counted.
    now = parse(scrape_from(h, "127.0.0.1").text)
    assert value(now, "hostcall_feedback_total") == value(counted, "hostcall_feedback_total")
    assert h.call(h.runtime.store.feedback_of, other.id) == []
    assert (h.snapshot(conv)["messages"], h.events(conv), h.events(other)) == before


def test_erasing_a_conversation_erases_its_ratings_and_its_handoff(both: Harness) -> None:
    h = both
    conv, _, reply = _replied(h)
    kept, _, kept_reply = _replied(h)
    for c, r in ((conv, reply), (kept, kept_reply)):
        assert _rate(h, c, r["id"], {"rating": "down", "comment": "mine"}).status_code == 200
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    assert olga.post(f"/console/api/conversations/{conv.id}/take-over", {}).status_code == 200

    async def erase() -> dict[str, int]:
        async with h.runtime.store.transaction():
            return await h.runtime.store.erase_conversation(conv.id)

    erased = h.call(erase)
    assert (erased["feedback"], erased["handoffs"]) == (1, 1)
    assert h.call(h.runtime.store.feedback_of, conv.id) == []
    assert h.call(h.runtime.store.get_handoff, conv.id) is None
    assert len(h.call(h.runtime.store.feedback_of, kept.id)) == 1  # another's stays


def test_a_reply_rated_over_and_over_counts_once_and_meets_a_limit(both: Harness) -> None:
    h = both
    conv, _, reply = _replied(h)
    before = parse(scrape_from(h, "127.0.0.1").text)
    # The limits count in fixed minutes: start at a minute's beginning, so the 300 ratings
    # fall in one window however slowly a loaded machine sends them.
    h.clock.advance(60 - h.clock() % 60)
    sent = [_rate(h, conv, reply["id"], {"rating": "up", "comment": f"Good {i}"})
            for i in range(300)]  # fmt: skip
    limit = DEFAULT_LIMITS.ratings_per_minute_per_conversation
    assert [r.status_code for r in sent] == [200] * limit + [429] * (300 - limit)
    refused = sent[-1]
    assert refused.json()["error"]["code"] == "rate_limited"
    assert "ratings in this conversation" in refused.json()["error"]["message"]
    wait = int(refused.headers["Retry-After"])
    assert 1 <= wait <= 60 and refused.json()["error"]["details"]["retryAfter"] == wait
    # Past the limit a changed rating is refused too: the one given stands, with the last
    # comment that was let through.
    assert _rate(h, conv, reply["id"], {"rating": "down"}).status_code == 429
    stored = h.call(h.runtime.store.feedback_of, conv.id)
    assert [(f.message_id, f.rating, f.comment) for f in stored] == [
        (reply["id"], "up", f"Good {limit - 1}")
    ]
    # The same rating sent again is no new rating: the counter moved once.
    after = parse(scrape_from(h, "127.0.0.1").text)
    name = "hostcall_feedback_total"
    assert (
        value(after, name, agent="planner", rating="up")
        - value(before, name, agent="planner", rating="up")
        == 1
    )
    assert value(after, name, rating="down") == value(before, name, rating="down")


def test_each_change_of_a_rating_is_counted_and_a_repeat_is_not(both: Harness) -> None:
    h = both
    conv, _, reply = _replied(h)
    before = parse(scrape_from(h, "127.0.0.1").text)
    for rating in ("up", "up", "down", "down", "down", "up"):
        assert _rate(h, conv, reply["id"], {"rating": rating}).status_code == 200
    after = parse(scrape_from(h, "127.0.0.1").text)
    name = "hostcall_feedback_total"
    grew = {r: value(after, name, agent="planner", rating=r)
            - value(before, name, agent="planner", rating=r) for r in ("up", "down")}  # fmt: skip
    assert grew == {"up": 2, "down": 1}
    assert [f.rating for f in h.call(h.runtime.store.feedback_of, conv.id)] == ["up"]
