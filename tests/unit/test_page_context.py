"""The page's context sent with a message: admitted only by an agent whose file has a
``page_context`` block, checked against its caps (a refusal is a 422 and nothing is stored),
kept with the message on both stores, and read by the model as data."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hostcall.agui import thread_conversation_id
from hostcall.store import Store, open_store
from hostcall.store.records import Conversation, StoredMessage
from hostcall.tracing import CAPTURE_CONTENT
from hostcall.visitors.personal_data import erase_person, export_person
from tests.support.databases import fresh_schema
from tests.support.harness import Conv, Harness, planner_definition, write_agent
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_bad_input import assert_error
from tests.unit.test_embedding import widget_config
from tests.unit.test_person_data import every_row, make_persons
from tests.unit.test_tracing import attribute_values, by_name, traced

SHOP = {
    "id": "shop",
    "name": "Shop",
    "page_context": {"max_entry_bytes": 64, "max_total_bytes": 100, "max_entries": 3},
    "tools": [
        {
            "name": "sizes",
            "description": "The sizes in stock on the page the visitor is on.",
            "input_schema": {"type": "object", "properties": {"page": {"type": "string"}}},
            "output_schema": {
                "type": "object",
                "properties": {"sizes": {"type": "array", "items": {"type": "integer"}}},
            },
            "effect": "read",
        }
    ],
    "model": {
        "kind": "scripted",
        "rules": [
            {
                "match": "where am I",
                "reply": "You are on {{ context.page }}, looking at "
                "{{ context.selected.title if context.selected }}.",
            },
            {
                "match": "which size",
                "tool": "sizes",
                "arguments": {"page": "{{ context.page }}"},
                "reply": "On {{ context.page }}, size {{ context.size }} is in stock: "
                "{{ result.sizes | join(', ') }}.",
            },
        ],
        "fallback": "Ask me where you are.",
    },
}


def closed() -> dict[str, Any]:
    """The demo's planner without its page_context block: an agent that admits none."""
    data = planner_definition()
    del data["page_context"]
    return {**data, "id": "closed"}


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, SHOP)
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        h = Harness(tmp_path, agents_dir, **({"database_url": url} if url else {}))
        stack.callback(h.stop)
        yield h


@pytest.fixture
def shop(tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, SHOP)
    write_agent(agents_dir, closed())
    h = Harness(tmp_path, agents_dir)
    yield h
    h.stop()


def _send(h: Harness, conv: Conv, text: str, context: Any) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/messages",
        json={"text": text, "context": context},
        headers=conv.auth,
    )


def _nothing_stored(h: Harness, conv: Conv) -> None:
    assert h.events(conv) == []
    assert h.call(h.runtime.store.list_messages, conv.id) == []
    assert h.snapshot(conv)["run"] is None


def test_context_reaches_the_model_and_is_kept_with_the_message(both: Harness) -> None:
    h = both
    conv = h.conversation("shop")
    context = {"page": "/shoes", "selected": {"title": "Red boots", "price": 89.5}}
    r = _send(h, conv, "where am I?", context)
    assert r.status_code == 202, r.text
    assert h.settle(conv)["run"]["status"] == "finished"
    assert h.assistant_texts(conv) == ["You are on /shoes, looking at Red boots."]
    [mine] = [m for m in h.call(h.runtime.store.list_messages, conv.id) if m.role == "user"]
    assert mine.context == context
    # Read back by a new process on the same database, as recovery reads it.
    h.restart()
    [again] = [m for m in h.call(h.runtime.store.list_messages, conv.id) if m.role == "user"]
    assert again.context == context


def test_a_message_without_context_stores_none_and_the_model_reads_it_empty(
    both: Harness,
) -> None:
    h = both
    conv = h.conversation("shop")
    h.say(conv, "where am I?")
    h.settle(conv)
    assert h.assistant_texts(conv) == ["You are on , looking at ."]
    [mine] = [m for m in h.call(h.runtime.store.list_messages, conv.id) if m.role == "user"]
    assert mine.context is None


def test_context_to_an_agent_that_admits_none_is_refused_and_nothing_is_stored(
    shop: Harness,
) -> None:
    conv = shop.conversation("closed")
    r = _send(shop, conv, "hello", {"page": "/board"})
    assert_error(r, 422, "page_context_not_admitted", "page_context")
    _nothing_stored(shop, conv)
    # An empty map is no context: the message goes through.
    r = _send(shop, conv, "hello", {})
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    ("context", "reason", "mentions"),
    [
        ({"note": "x" * 63}, "entry_too_large", ("'note'", "65 bytes", "64 per entry")),
        (
            {"a": "x" * 40, "b": "y" * 40, "c": "z" * 20},
            "total_too_large",
            ("106 bytes", "100 in total"),
        ),
        ({"a": 1, "b": 2, "c": 3, "d": 4}, "too_many_entries", ("4 entries", "limit is 3")),
        ({"bad key!": 1}, "bad_key", ("'bad key!'",)),
        ({"": 1}, "bad_key", ("''",)),
        ({"k" * 65: 1}, "bad_key", ("k" * 65,)),
        ({"id": 2**53}, "not_json", ("'id'", "2^53")),
        ({"ids": [1, {"n": -(2**60)}]}, "not_json", ("'ids'", "2^53")),
    ],
)
def test_a_refused_context_is_a_422_naming_the_key_and_the_cap_and_nothing_is_stored(
    shop: Harness, context: dict[str, Any], reason: str, mentions: tuple[str, ...]
) -> None:
    h = shop
    conv = h.conversation("shop")
    error = assert_error(_send(h, conv, "where am I?", context), 422, "page_context_refused")
    assert error["details"]["reason"] == reason, error
    for mention in mentions:
        assert mention in error["message"], (mention, error["message"])
    _nothing_stored(h, conv)
    # Nothing else was lost: the same conversation takes the next message.
    assert _send(h, conv, "where am I?", {"page": "/cart"}).status_code == 202
    assert h.settle(conv)["run"]["status"] == "finished"
    assert h.assistant_texts(conv) == ["You are on /cart, looking at ."]


def test_multibyte_text_is_counted_in_utf8_bytes(shop: Harness) -> None:
    conv = shop.conversation("shop")
    # 21 three-byte characters and two quotes: 65 bytes, 23 characters.
    error = assert_error(_send(shop, conv, "hi", {"t": "€" * 21}), 422, "page_context_refused")
    assert "65 bytes" in error["message"]
    assert _send(shop, conv, "hi", {"t": "€" * 20}).status_code == 202


@pytest.mark.parametrize("body", ['{"text": "hi", "context": {"x": NaN}}',
                                  '{"text": "hi", "context": {"x": Infinity}}'])  # fmt: skip
def test_a_non_json_value_is_refused_with_the_body_and_nothing_is_stored(
    shop: Harness, body: str
) -> None:
    conv = shop.conversation("shop")
    r = shop.http.post(
        f"/api/conversations/{conv.id}/messages",
        content=body,
        headers={**conv.auth, "Content-Type": "application/json"},
    )
    assert_error(r, 400, "malformed_json", "not a JSON number")
    _nothing_stored(shop, conv)


@pytest.mark.parametrize("context", [[1, 2], "page", 5])
def test_a_context_that_is_not_an_object_is_a_400(shop: Harness, context: Any) -> None:
    conv = shop.conversation("shop")
    r = _send(shop, conv, "hi", context)
    assert_error(r, 400, "bad_request", "'context'")
    _nothing_stored(shop, conv)


def test_a_run_resumed_by_another_process_reads_the_context_its_message_brought(
    both: Harness,
) -> None:
    h = both
    conv = h.conversation("shop")
    assert _send(h, conv, "which size?", {"page": "/boots", "size": 42}).status_code == 202
    call = h.open_call(conv)
    # A new process on the same database answers the call: the resumed step's model reads
    # the history from the store, and with it the page's context of that message.
    h.restart()
    assert h.answer(call, {"sizes": [41, 42, 43]}).status_code == 200
    assert h.finish(conv)["run"]["status"] == "finished"
    assert h.assistant_texts(conv)[-1] == "On /boots, size 42 is in stock: 41, 42, 43."


def test_the_widget_config_carries_the_caps_or_says_none_are_admitted(shop: Harness) -> None:
    config = widget_config(shop.http.get("/widget/shop").text)
    assert config["pageContext"] == {"maxEntryBytes": 64, "maxTotalBytes": 100, "maxEntries": 3}
    assert widget_config(shop.http.get("/widget/closed").text)["pageContext"] is None


def _agui(h: Harness, agent: str, thread: str, context: Any) -> Any:
    body = {"threadId": thread, "runId": "r1", "tools": [], "context": context,
            "messages": [{"id": "m1", "role": "user", "content": "where am I?"}]}  # fmt: skip
    return h.http.post(f"/agui/{agent}", json=body)


def test_an_agui_clients_context_reaches_the_model_keyed_by_description(shop: Harness) -> None:
    context = [{"description": "page", "value": "/socks"}, {"description": "the cart", "value": 2}]
    r = _agui(shop, "shop", "t-1", context)
    assert r.status_code == 200 and "RUN_FINISHED" in r.text, r.text
    cid = thread_conversation_id("shop", "t-1")
    mine, reply = shop.call(shop.runtime.store.list_messages, cid)
    assert mine.context == {"page": "/socks", "the cart": 2}
    assert reply.text == "You are on /socks, looking at ."


@pytest.mark.parametrize(
    ("agent", "context", "code", "mention"),
    [
        ("closed", [{"description": "page", "value": "/b"}], "page_context_not_admitted",
         "page_context"),
        ("shop", [{"description": "page", "value": "x" * 70}], "page_context_refused",
         "64 per entry"),
        ("shop", [{"description": f"d{i}", "value": i} for i in range(4)], "page_context_refused",
         "limit is 3"),
        ("shop", [{"description": "page", "value": 1}, {"description": "page", "value": 2}],
         "page_context_refused", "given once"),
        ("shop", [{"description": "d" * 201, "value": 1}], "page_context_refused", "200"),
    ],
)  # fmt: skip
def test_an_agui_clients_refused_context_is_a_422_and_no_thread_is_made(
    shop: Harness, agent: str, context: Any, code: str, mention: str
) -> None:
    assert_error(_agui(shop, agent, "t-2", context), 422, code, mention)
    cid = thread_conversation_id(agent, "t-2")
    assert shop.call(shop.runtime.store.get_conversation, cid) is None
    assert shop.call(shop.runtime.store.list_messages, cid) == []
    # Nothing else was lost: the thread starts with an admitted context.
    if agent == "shop":
        ok = _agui(shop, agent, "t-2", [{"description": "page", "value": "/a"}])
        assert ok.status_code == 200 and "RUN_FINISHED" in ok.text
        [mine] = [m for m in shop.call(shop.runtime.store.list_messages, cid) if m.role == "user"]
        assert mine.context == {"page": "/a"}


@pytest.mark.parametrize("context", [{"page": "/a"}, [{"value": 1}], ["page"]])
def test_an_agui_context_of_the_wrong_shape_is_a_400(shop: Harness, context: Any) -> None:
    assert_error(_agui(shop, "shop", "t-3", context), 400, "bad_request", "context")


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_the_console_shows_the_context_as_text_never_as_html(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    hostile = {"page": "<img src=x onerror=alert(1)>", "selected": {"title": "<b>Boots</b>"}}
    assert _send(h, conv, "where am I?", hostile).status_code == 202
    h.settle(conv)
    operator = ConsoleClient(h.app, h.runtime, "olga", "operator")
    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    [mine] = [m for m in detail["messages"] if m["role"] == "user"]
    assert mine["context"] == hostile
    html = operator.http.get(f"/console/conversations/{conv.id}").text
    section = html[html.index('data-part="page-context"') :]
    assert "Context from the page" in section
    assert "<dt>page</dt><dd><code>&#34;&lt;img src=x onerror=alert(1)&gt;&#34;</code></dd>" in (
        section
    )
    assert "&lt;b&gt;Boots&lt;/b&gt;" in section
    assert "<img" not in html and "<b>Boots" not in html


def test_the_context_is_in_the_persons_export_and_gone_with_their_erasure(both: Harness) -> None:
    h = both
    conv = h.conversation("shop")
    make_persons(h, conv, "user-42")
    marker = "cart-of-user-42-7f3a"
    assert _send(h, conv, "where am I?", {"page": "/cart", "cart": marker}).status_code == 202
    h.settle(conv)
    document = h.call(export_person, h.runtime.store, "shop", "user-42", actor="admin")
    [conversation] = document["conversations"]
    [mine] = [m for m in conversation["messages"] if m["role"] == "user"]
    assert mine["context"] == {"page": "/cart", "cart": marker}
    assert [t for t, rows in every_row(h).items() if any(marker in r for r in rows)] == ["messages"]
    h.call(erase_person, h.runtime.store, "shop", "user-42", actor="admin")
    assert not [t for t, rows in every_row(h).items() if any(marker in r for r in rows)]


@pytest.mark.parametrize("opted_in", [False, True])
def test_the_context_is_traced_only_when_the_operator_opts_in_to_content(
    tmp_path: Path, agents_dir: Path, opted_in: bool
) -> None:
    write_agent(agents_dir, SHOP)
    h, exporter = traced(tmp_path, agents_dir, **({CAPTURE_CONTENT: "true"} if opted_in else {}))
    try:
        conv = h.conversation("shop")
        assert _send(h, conv, "where am I?", {"page": "/secret-page"}).status_code == 202
        assert h.finish(conv)["run"]["status"] == "finished"
    finally:
        h.stop()
    spans = exporter.get_finished_spans()
    [step] = by_name(spans)["hostcall.step"]
    if opted_in:
        assert dict(step.attributes or {})["hostcall.page_context"] == '{"page":"/secret-page"}'
    else:
        assert "/secret-page" not in attribute_values(spans)
        assert "hostcall.page_context" not in dict(step.attributes or {})


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_a_message_kept_for_the_team_member_keeps_its_context(shop: Harness) -> None:
    h = shop
    conv = h.conversation("shop")
    h.say(conv, "hello")
    h.settle(conv)
    olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
    assert olga.post(f"/console/api/conversations/{conv.id}/take-over", {}).status_code == 200
    r = _send(h, conv, "are you there?", {"page": "/help"})
    assert r.status_code == 202 and r.json()["person"] == "olga", r.text
    held = h.call(h.runtime.store.list_messages, conv.id)[-1]
    assert (held.text, held.context) == ("are you there?", {"page": "/help"})
    # A refused context is refused while a member holds the conversation too.
    assert_error(_send(h, conv, "hi", {"bad key": 1}), 422, "page_context_refused")
    assert h.call(h.runtime.store.list_messages, conv.id)[-1] == held


async def test_a_store_from_before_page_context_is_migrated_and_keeps_its_messages(
    store: Store, store_target: str | Path
) -> None:
    await store.create_conversation(Conversation("c1", "shop", 1.0))
    await store.add_message(StoredMessage("m1", "c1", "r1", "user", "before"))
    await store.close()
    # Back to the schema before the column: as a database of the previous release is.
    undo = ["ALTER TABLE messages DROP COLUMN context",
            "DELETE FROM schema_migrations WHERE version = 17"]  # fmt: skip
    if isinstance(store_target, Path):
        with contextlib.closing(sqlite3.connect(store_target)) as db, db:
            for statement in undo:
                db.execute(statement)
    else:
        with psycopg.connect(store_target, autocommit=True) as pg:
            for statement in undo:
                pg.execute(statement)
    again = open_store(store_target)
    try:
        page = {"page": "/a", "n": [1, 2.5, None, True], "é": "ü"}
        await again.add_message(StoredMessage("m2", "c1", "r2", "user", "after", context=page))
        before, after = await again.list_messages("c1")
        assert (before.text, before.context) == ("before", None)
        assert (after.text, after.context) == ("after", page)
    finally:
        await again.close()
