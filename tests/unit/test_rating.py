"""A visitor's rating of a whole conversation (five points and a remark), asked at its end:
stored once on both stores (the same one again is answered as stored; another is refused),
authorized by the conversation's session, rate limited like the ratings of replies, counted
in /metrics, shown in the console, exported and erased with the conversation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.protocol.limits import MAX_FEEDBACK_COMMENT_CHARS
from hostcall.quotas import DEFAULT_LIMITS
from hostcall.visitors.personal_data import export
from tests.support.databases import fresh_schema
from tests.support.harness import Conv, Harness, planner_definition, write_agent
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_metrics import parse, scrape_from, value

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

METRIC = "hostcall_conversation_ratings_total"


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, {**planner_definition(), "rating": {"when": ["goodbye"]}})
    write_agent(agents_dir, {**planner_definition(), "id": "quiet"})  # asks for no rating
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        h = Harness(tmp_path, agents_dir, **({"database_url": url} if url else {}))
        stack.callback(h.stop)
        yield h


def _rate(h: Harness, conv: Conv, body: Any, auth: dict[str, str] | None = None) -> Any:
    headers = conv.auth if auth is None else auth
    return h.http.post(f"/api/conversations/{conv.id}/rating", json=body, headers=headers)


def _talked(h: Harness) -> Conv:
    conv = h.conversation()
    h.say(conv, "hello")
    h.settle(conv)
    return conv


def test_a_conversation_is_rated_once_and_counted_shown_and_exported(both: Harness) -> None:
    h = both
    conv, other = _talked(h), _talked(h)
    before = parse(scrape_from(h, "127.0.0.1").text)
    r = _rate(h, conv, {"score": 4, "remark": "  Quick and right.  "})
    assert r.status_code == 200, r.text
    assert r.json() == {"conversationId": conv.id, "score": 4, "remark": "Quick and right."}
    # The same again (a retry whose answer was lost): answered as stored, counted once.
    again = _rate(h, conv, {"score": 4, "remark": "Quick and right."})
    assert again.status_code == 200 and again.json() == r.json()
    # Another rating: refused, the first stands.
    for body in ({"score": 1}, {"score": 4, "remark": "changed my mind"}):
        refused = _rate(h, conv, body)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "already_rated"
        assert "rated 4 already" in refused.json()["error"]["message"]
    stored = h.call(h.runtime.store.rating_of, conv.id)
    assert stored is not None and (stored.score, stored.remark) == (4, "Quick and right.")
    assert h.call(h.runtime.store.rating_of, other.id) is None

    after = parse(scrape_from(h, "127.0.0.1").text)
    assert (
        value(after, METRIC, agent="planner", score="4")
        - value(before, METRIC, agent="planner", score="4")
        == 1
    )
    assert value(after, METRIC) - value(before, METRIC) == 1

    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    detail = olga.http.get(f"/console/api/conversations/{conv.id}").json()
    assert detail["rating"]["score"] == 4 and detail["rating"]["remark"] == "Quick and right."
    assert olga.http.get(f"/console/api/conversations/{other.id}").json()["rating"] is None
    page = olga.http.get(f"/console/conversations/{conv.id}")
    assert page.status_code == 200 and 'data-part="conversation-rating"' in page.text
    assert "Quick and right." in page.text

    # The export carries it, with the ratings of replies (the thumbs) beside it.
    [reply] = [m for m in h.snapshot(conv)["messages"] if m["role"] == "assistant"]
    thumbs = h.http.post(
        f"/api/conversations/{conv.id}/messages/{reply['id']}/feedback",
        json={"rating": "up"},
        headers=conv.auth,
    )
    assert thumbs.status_code == 200, thumbs.text
    document = h.call(export, h.runtime.store, [conv.id, other.id], subject="test")
    rated, unrated = document["conversations"]
    assert rated["rating"] == {"score": 4, "remark": "Quick and right.", "at": stored.at}
    assert [(f["messageId"], f["rating"]) for f in rated["feedback"]] == [(reply["id"], "up")]
    assert (unrated["rating"], unrated["feedback"]) == (None, [])


def test_bad_ratings_and_wrong_conversations_are_refused_and_nothing_is_stored(
    both: Harness,
) -> None:
    h = both
    conv, other = _talked(h), _talked(h)
    before = parse(scrape_from(h, "127.0.0.1").text)
    for body in ({}, {"score": 0}, {"score": 6}, {"score": "5"}, {"score": True},
                 {"score": 4.5}, {"score": 3, "remark": 5}):  # fmt: skip
        r = _rate(h, conv, body)
        assert r.status_code == 400, body
        assert r.json()["error"]["details"]["field"] in ("score", "remark"), body
    long = _rate(h, conv, {"score": 3, "remark": "x" * (MAX_FEEDBACK_COMMENT_CHARS + 1)})
    assert long.status_code == 400 and str(MAX_FEEDBACK_COMMENT_CHARS) in long.text
    # This conversation's session on the other's path; no session at all.
    assert _rate(h, other, {"score": 5}, auth=conv.auth).status_code == 403
    assert _rate(h, conv, {"score": 5}, auth={}).status_code == 401
    # An agent whose file asks for no rating takes none.
    quiet = h.conversation("quiet")
    r = _rate(h, quiet, {"score": 5})
    assert r.status_code == 422 and r.json()["error"]["code"] == "rating_not_asked"
    for c in (conv, other, quiet):
        assert h.call(h.runtime.store.rating_of, c.id) is None
    after = parse(scrape_from(h, "127.0.0.1").text)
    assert value(after, METRIC) == value(before, METRIC)


def test_ratings_meet_the_ratings_limit(both: Harness) -> None:
    h = both
    conv = _talked(h)
    h.clock.advance(60 - h.clock() % 60)  # one fixed window for all of them
    limit = DEFAULT_LIMITS.ratings_per_minute_per_conversation
    sent = [_rate(h, conv, {"score": 5}) for _ in range(limit + 3)]
    assert [r.status_code for r in sent] == [200] * limit + [429] * 3
    assert sent[-1].json()["error"]["code"] == "rate_limited"


def test_erasing_a_conversation_erases_its_rating(both: Harness) -> None:
    h = both
    conv, kept = _talked(h), _talked(h)
    for c in (conv, kept):
        assert _rate(h, c, {"score": 2, "remark": "mine"}).status_code == 200

    async def erase() -> dict[str, int]:
        async with h.runtime.store.transaction():
            return await h.runtime.store.erase_conversation(conv.id)

    assert h.call(erase)["ratings"] == 1
    assert h.call(h.runtime.store.rating_of, conv.id) is None
    assert h.call(h.runtime.store.rating_of, kept.id) is not None


def test_the_snapshot_carries_the_rating_once_given_so_a_reload_never_asks_again(
    both: Harness,
) -> None:
    h = both
    conv, other = _talked(h), _talked(h)
    # Not rated yet: the documented shape says so, null.
    assert h.snapshot(conv)["rating"] is None
    assert _rate(h, conv, {"score": 3, "remark": "  Slow, but right. "}).status_code == 200
    assert h.snapshot(conv)["rating"] == {"score": 3, "remark": "Slow, but right."}
    # A refused second rating changes nothing the widget reloads; another stays unrated.
    assert _rate(h, conv, {"score": 5}).status_code == 409
    assert h.snapshot(conv)["rating"] == {"score": 3, "remark": "Slow, but right."}
    assert h.snapshot(other)["rating"] is None
    # Without a remark: an empty one, as stored.
    assert _rate(h, other, {"score": 5}).status_code == 200
    assert h.snapshot(other)["rating"] == {"score": 5, "remark": ""}
