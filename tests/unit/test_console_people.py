"""hostcall/console/people.py and ``hostcall person``: the console lists conversations by
person and shows a person's page; an admin exports (JSON) and erases all of a person's data,
from the console or the command line, audited; a wrong confirmation, a missing role or a
missing CSRF token erases nothing."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostcall.cli import main
from hostcall.store.records import Conversation
from tests.support.harness import ORIGIN, Conv, Harness, write_agent
from tests.support.identity import AUDIENCE, ISSUER, SECRET, SECRET_ENV, hs_token
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_bad_input import READ
from tests.unit.test_person_data import busy_conversation, make_persons, rows_naming, traces

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)


@pytest.fixture
def admin(harness: Harness) -> ConsoleClient:
    return ConsoleClient(harness.app, harness.runtime, "ada", "admin")


@pytest.fixture
def operator(harness: Harness) -> ConsoleClient:
    return ConsoleClient(harness.app, harness.runtime, "olga", "operator")


def persons_conversation(h: Harness, person: str, text: str = READ) -> Conv:
    conv = h.conversation()
    make_persons(h, conv, person)
    h.say(conv, text)
    h.settle(conv)
    return conv


def test_the_list_filters_by_person_and_links_their_page(
    harness: Harness, operator: ConsoleClient
) -> None:
    mine = persons_conversation(harness, "user-42")
    persons_conversation(harness, "user-7")
    anonymous = harness.conversation()
    r = operator.http.get("/console/api/conversations", params={"person": "user-42"})
    assert r.status_code == 200, r.text
    assert [(c["id"], c["person"]) for c in r.json()["items"]] == [(mine.id, "user-42")]
    everyone = operator.http.get("/console/api/conversations").json()["items"]
    assert {c["id"]: c["person"] for c in everyone}[anonymous.id] is None
    page = operator.http.get("/console/conversations", params={"person": "user-42"})
    assert 'data-part="filter-person"' in page.text and 'value="user-42"' in page.text


def test_a_person_s_page_lists_their_conversations_with_titles(
    harness: Harness, operator: ConsoleClient
) -> None:
    first = persons_conversation(harness, "user-42")
    harness.clock.advance(1)
    second = persons_conversation(harness, "user-42", "Hello from the second")
    other = persons_conversation(harness, "user-7")
    r = operator.http.get("/console/people", params={"agent": "planner", "person": "user-42"})
    assert r.status_code == 200, r.text
    assert r.text.index(second.id) < r.text.index(first.id)
    assert READ in r.text and "Hello from the second" in r.text and other.id not in r.text
    # An operator sees the list, not the export or erase forms.
    assert 'data-part="erase-person"' not in r.text and 'data-part="admins-only"' in r.text


def test_a_title_s_bidi_override_is_removed_so_it_reads_as_written(
    harness: Harness, operator: ConsoleClient
) -> None:
    # U+202E shows what follows right to left: "\u202elive" would read "evil" in the list.
    persons_conversation(harness, "user-42", "pay \u202elive\u202c now")
    r = operator.http.get("/console/people", params={"agent": "planner", "person": "user-42"})
    assert r.status_code == 200, r.text
    assert "pay live now" in r.text
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", r.text)


def test_a_person_s_page_comes_in_pages_of_fifty_newest_first(
    harness: Harness, operator: ConsoleClient
) -> None:
    store = harness.runtime.store
    ids = [f"c_paged{n:03d}" for n in range(120)]  # c_paged119 the most recent
    for n, cid in enumerate(ids):
        conversation = Conversation(cid, "planner", 1000.0 + n, "en", person="user-42")
        harness.call(store.create_conversation, conversation)
        harness.call(store.touch_conversation, cid, 1000.0 + n)
    newest_first = ids[::-1]
    seen: list[str] = []
    url = "/console/people?agent=planner&person=user-42"
    pages = 0
    while True:
        r = operator.http.get(url)
        assert r.status_code == 200, r.text
        pages += 1
        shown = re.findall(r'data-part="person-conversation" data-id="([^"]+)"', r.text)
        assert len(shown) == (50 if pages < 3 else 20)
        seen += shown
        assert ('data-part="newest"' in r.text) == (pages > 1)
        older = re.search(r'href="([^"]+)" data-part="older"', r.text)
        if older is None:
            break
        url = html.unescape(older.group(1))
    assert pages == 3 and seen == newest_first  # each once, in order
    # A cursor the page did not make is refused in words, showing nothing.
    bad = {"agent": "planner", "person": "user-42", "before": "yesterday"}
    r = operator.http.get("/console/people", params=bad)
    assert r.status_code == 400 and "before" in r.text
    assert 'data-part="person-conversation"' not in r.text


def test_an_unknown_agent_or_an_empty_person_is_refused_in_the_reader_s_words(
    harness: Harness, operator: ConsoleClient
) -> None:
    r = operator.http.get("/console/people", params={"agent": "nope", "person": "user-42"})
    assert r.status_code == 404 and "There is no such agent." in r.text
    r = operator.http.get("/console/people", params={"agent": "planner", "person": "x" * 256})
    assert r.status_code == 400 and "person" in r.text
    lookup = operator.http.get("/console/people")
    assert lookup.status_code == 200 and 'data-part="person-lookup"' in lookup.text


def test_an_admin_exports_a_person_s_data_as_json_audited(
    harness: Harness, admin: ConsoleClient
) -> None:
    conv = persons_conversation(harness, "user-42")
    persons_conversation(harness, "user-7")
    r = admin.form("/console/people/export", {"agent": "planner", "person": "user-42"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["content-disposition"].startswith("attachment")
    document = r.json()
    assert [c["id"] for c in document["conversations"]] == [conv.id]
    entry = harness.call(harness.runtime.store.list_audit)[0]
    assert (entry.actor, entry.action, entry.details["person"]) == ("ada", "person.export",
                                                                   "user-42")  # fmt: skip


def test_an_admin_erases_a_person_s_data_after_typing_their_id_again(
    harness: Harness, admin: ConsoleClient
) -> None:
    conv = busy_conversation(harness, "user-42")
    kept = persons_conversation(harness, "user-7")
    ids = traces(harness, conv)
    fields = {"agent": "planner", "person": "user-42"}
    wrong = admin.form("/console/people/erase", {**fields, "confirm": "user-4"})
    # Back on the person's page, the mistake said beside the field, not an error page.
    assert wrong.status_code == 400 and "nothing was erased" in wrong.text
    assert 'data-part="erase-error"' in wrong.text and 'aria-invalid="true"' in wrong.text
    assert 'data-part="erase-person"' in wrong.text and conv.id in wrong.text
    assert 'data-part="error-message"' not in wrong.text
    assert harness.call(harness.runtime.store.get_conversation, conv.id) is not None
    r = admin.form("/console/people/erase", {**fields, "confirm": "user-42"})
    assert r.status_code == 303, r.text
    assert r.headers["location"].endswith("erased=1")
    assert rows_naming(harness, ids) == {}
    assert harness.call(harness.runtime.store.get_conversation, kept.id) is not None
    shown = admin.http.get(r.headers["location"])
    assert 'data-part="erased"' in shown.text and 'data-part="empty"' in shown.text
    entry = harness.call(harness.runtime.store.list_audit)[0]
    assert (entry.actor, entry.action, entry.details["conversations"]) == ("ada", "person.erase", 1)


def test_an_operator_or_a_forged_form_erases_nothing(
    harness: Harness, admin: ConsoleClient, operator: ConsoleClient
) -> None:
    conv = persons_conversation(harness, "user-42")
    before = rows_naming(harness, traces(harness, conv))
    fields = {"agent": "planner", "person": "user-42", "confirm": "user-42"}
    assert operator.form("/console/people/erase", fields).status_code == 403
    assert operator.form("/console/people/export", fields).status_code == 403
    assert admin.form("/console/people/erase", fields, csrf="forged").status_code == 403
    assert admin.form("/console/people/erase", fields, csrf="").status_code == 403
    assert rows_naming(harness, traces(harness, conv)) == before


# ---- the command line -------------------------------------------------------------------------


def test_the_command_line_exports_and_erases_a_person_s_data(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = busy_conversation(harness, "user-42")
    kept = persons_conversation(harness, "user-7")
    ids = traces(harness, conv)
    harness.stop()  # the command runs beside no server here; beside one works too (SQLite)
    db = str(harness.settings.db_path)
    out = tmp_path / "export.json"
    assert main(["person", "export", "user-42", "--agent", "planner", "--db", db,
                 "--out", str(out)]) == 0  # fmt: skip
    document = json.loads(out.read_text())
    assert [c["id"] for c in document["conversations"]] == [conv.id]
    # Without --yes, nothing is erased.
    assert main(["person", "erase", "user-42", "--agent", "planner", "--db", db]) == 2
    assert "--yes" in capsys.readouterr().err
    harness.start()
    assert rows_naming(harness, ids) != {}
    harness.stop()
    assert main(["person", "erase", "user-42", "--agent", "planner", "--db", db, "--yes"]) == 0
    assert "1 conversations of 'user-42'" in capsys.readouterr().out
    harness.start()
    assert rows_naming(harness, ids) == {}
    assert harness.call(harness.runtime.store.get_conversation, kept.id) is not None
    actions = [(e.actor, e.action) for e in harness.call(harness.runtime.store.list_audit)]
    assert actions[:2] == [("command line", "person.erase"), ("command line", "person.export")]


# ---- counters outside the store ---------------------------------------------------------------


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Harness]:
    """An agent whose visitors sign in, a person allowed 2 messages a day; on SQLite the
    limits count in the server's memory, not in the store."""
    directory = tmp_path / "agents"
    write_agent(directory, {"allowed_env": [SECRET_ENV]}, name="_platform.json")
    write_agent(directory, {
        "id": "shop", "allowed_origins": ["http://localhost:8001"],
        "model": {"kind": "scripted", "rules": []},
        "identity": {"issuer": ISSUER, "audience": AUDIENCE, "secret_env": SECRET_ENV},
        "limits": {"messages_per_day_per_person": 2},
    })  # fmt: skip
    harness = Harness(tmp_path, directory, environ={SECRET_ENV: SECRET})
    yield harness
    harness.stop()


def say_as(h: Harness, who: dict[str, str], conv: Conv | None = None) -> tuple[Conv, int]:
    if conv is None:
        r = h.http.post("/api/agents/shop/conversations", json={}, headers=ORIGIN | who)
        assert r.status_code == 201, r.text
        b = r.json()
        conv = Conv(b["conversationId"], b["sessionToken"], b["streamToken"])
    r = h.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": "hi"}, headers=conv.auth | who
    )
    if r.status_code == 202:
        h.finish(conv)
    return conv, r.status_code


def test_erasing_a_person_forgets_their_counters_kept_in_memory(shop: Harness) -> None:
    admin = ConsoleClient(shop.app, shop.runtime, "ada", "admin")
    who = {"Hostcall-Identity": hs_token("user-42")}
    conv, first = say_as(shop, who)
    _, second = say_as(shop, who, conv)
    _, third = say_as(shop, who, conv)
    assert (first, second, third) == (202, 202, 429)
    fields = {"agent": "shop", "person": "user-42", "confirm": "user-42"}
    assert admin.form("/console/people/erase", fields).status_code == 303
    # Erased is erased: the person starts again as someone with no history at all.
    _, again = say_as(shop, who)
    assert again == 202


# ---- a run still running ----------------------------------------------------------------------


def test_erasing_waits_until_the_agent_has_finished_answering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run still running would go on writing to the conversation after its erasure: the
    console and the command line refuse, in words, and erase nothing until it ends."""
    agents = tmp_path / "agents"
    story = {"match": "(?i)story", "reply": "Once upon a time " * 12, "pace_seconds": 0.1}
    write_agent(agents, {
        "id": "teller", "allowed_origins": ["http://testserver"],
        "model": {"kind": "scripted", "rules": [story]},
    })  # fmt: skip
    h = Harness(tmp_path, agents)
    try:
        admin = ConsoleClient(h.app, h.runtime, "ada", "admin")
        conv = h.conversation("teller")
        make_persons(h, conv, "user-42")
        h.say(conv, "tell me a story")
        before = rows_naming(h, traces(h, conv))
        fields = {"agent": "teller", "person": "user-42", "confirm": "user-42"}
        r = admin.form("/console/people/erase", fields)
        assert r.status_code == 409, r.text
        assert "still answering in this conversation" in r.text
        db = str(h.settings.db_path)  # beside the running server, as SQLite allows
        assert main(["person", "erase", "user-42", "--agent", "teller", "--db", db, "--yes"]) == 1
        assert "still running" in capsys.readouterr().err
        assert h.call(h.runtime.store.get_conversation, conv.id) is not None
        assert "person.erase" not in [e.action for e in h.call(h.runtime.store.list_audit)]
        assert rows_naming(h, traces(h, conv)).keys() >= before.keys()  # nothing erased
        h.settle(conv, timeout=10)
        # Once the agent has finished, the same erasure goes through.
        assert admin.form("/console/people/erase", fields).status_code == 303
        assert rows_naming(h, traces(h, conv)) == {}
    finally:
        h.stop()


def test_a_person_s_page_shows_its_times_in_local_time_as_the_lists_do(
    harness: Harness, operator: ConsoleClient
) -> None:
    """Its times are drawn by the server (ISO, the same in every time zone): the script the
    lists use turns each ``<time data-part="when">`` into the reader's local time."""
    persons_conversation(harness, "user-42")
    r = operator.http.get("/console/people", params={"agent": "planner", "person": "user-42"})
    times = re.findall(r"<time [^>]*>", r.text)
    assert len(times) == 2 and all('data-part="when"' in t for t in times), times
    assert 'src="/console/static/times.js"' in r.text
    script = operator.http.get("/console/static/times.js")
    assert script.status_code == 200 and "when(" in script.text


def test_the_people_page_lists_the_signed_in_people_last_active_first(
    harness: Harness, operator: ConsoleClient
) -> None:
    persons_conversation(harness, "user-42")
    harness.clock.advance(1)
    persons_conversation(harness, "user-7")
    harness.clock.advance(1)
    persons_conversation(harness, "user-42", "Hello again")
    harness.conversation()  # anonymous: nobody to list
    r = operator.http.get("/console/people")
    assert r.status_code == 200, r.text
    listed = re.findall(r'data-part="known-person" data-person="([^"]+)" data-agent="([^"]+)"',
                        r.text)  # fmt: skip
    assert listed == [("user-42", "planner"), ("user-7", "planner")]
    # Each links to the person's page, which links back to the list.
    link = re.search(r'href="([^"]+)" data-part="open-person">user-42<', r.text)
    assert link is not None
    page = operator.http.get(html.unescape(link.group(1)))
    assert page.status_code == 200 and 'data-part="person-heading"' in page.text
    assert page.text.count('data-part="person-conversation"') == 2
    assert 'href="/console/people" data-part="all-people"' in page.text
    # Of one agent: an unknown agent is refused in words.
    assert operator.http.get("/console/people", params={"agent": "nope"}).status_code == 404
    known = harness.call(harness.runtime.store.known_people, "planner")
    assert [(p.person, p.conversations) for p in known] == [("user-42", 2), ("user-7", 1)]
