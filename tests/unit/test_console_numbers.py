"""Every whole number the console reads from a URL or a form (hostcall/protocol/numbers.py):
a value no store can hold, or no number at all, is a 400 page quoting it, never a 500 (which
also closed the connection) — and nothing changes."""

from __future__ import annotations

import html
from typing import Any

import pytest

from hostcall.protocol.numbers import LARGEST
from tests.support.harness import Harness, planner_definition
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

HUGE = "9" * 25  # past 64 bits: SQLite raised OverflowError, PostgreSQL its own
BAD = [
    HUGE,
    "9" * 35,
    str(LARGEST + 1),
    "9" * 5000,  # past int()'s 4,300 digits: a ValueError
    "abc",
    "",
    "²",  # str.isdigit() says yes, int() says no
    " 1",
    "+1",
    "1_0",
    "-1",
]


@pytest.fixture
def admin(harness: Harness) -> ConsoleClient:
    return ConsoleClient(harness.app, harness.runtime, "ada", "admin")


def assert_refused(r: Any, name: str, value: str) -> None:
    text = html.unescape(r.text)
    assert r.status_code == 400, text[:2000]
    assert r.headers["content-type"].startswith("text/html")
    assert 'data-part="error-message"' in text
    shown = repr(value[:40]) + ("…" if len(value) > 40 else "")
    assert f"{name} must be a whole number from " in text and f", not {shown}" in text, text


def versions(h: Harness) -> list[tuple[int, str]]:
    return [(v.version, v.note) for v in h.call(h.runtime.store.list_agent_versions, "planner")]


def audit(h: Harness) -> list[tuple[str, str]]:
    return [(e.actor, e.action) for e in h.call(h.runtime.store.list_audit, limit=10_000)]


@pytest.mark.parametrize("value", BAD)
def test_a_bad_version_to_compare_or_roll_back_to_is_refused(
    harness: Harness, admin: ConsoleClient, value: str
) -> None:
    agent = planner_definition()
    agent["greeting"] = "Version two"
    assert admin.post("/console/api/agents/planner", {"agent": agent}).status_code == 200
    before, logged = versions(harness), audit(harness)
    file = (harness.agents_dir / "planner.json").read_text()
    r = admin.http.get("/console/agents/planner/versions", params={"from": value or "x", "to": "1"})
    assert_refused(r, "from", value or "x")
    r = admin.http.get("/console/agents/planner/versions", params={"from": "1", "to": value or "x"})
    assert_refused(r, "to", value or "x")
    assert_refused(admin.form("/console/agents/planner/rollback", {"version": value}),
                   "version", value)  # fmt: skip
    assert versions(harness) == before and audit(harness) == logged
    assert (harness.agents_dir / "planner.json").read_text() == file
    # The same connection goes on: a good rollback still works.
    assert admin.form("/console/agents/planner/rollback", {"version": "1"}).status_code == 303
    assert versions(harness)[0] == (3, "roll back to version 1")


@pytest.mark.parametrize("value", BAD)
def test_a_bad_number_in_a_console_page_s_query_is_refused(
    harness: Harness, admin: ConsoleClient, value: str
) -> None:
    logged = audit(harness)
    pages = [("/console/audit", "before"), ("/console/conversations", "page"),
             ("/console/usage", "days"), ("/console/people", "erased")]  # fmt: skip
    extra = {"/console/people": {"agent": "planner", "person": "user-42"}}
    for path, name in pages:
        r = admin.http.get(path, params={**extra.get(path, {}), name: value})
        assert_refused(r, name, value)
        assert admin.http.get(path, params=extra.get(path, {})).status_code == 200
    assert audit(harness) == logged


@pytest.mark.parametrize(("path", "name", "value"), [
    ("/console/audit", "before", "1"), ("/console/audit", "before", str(LARGEST)),
    ("/console/conversations", "page", "100000"), ("/console/usage", "days", "366"),
])  # fmt: skip
def test_numbers_in_range_are_taken(admin: ConsoleClient, path: str, name: str, value: str) -> None:
    assert admin.http.get(path, params={name: value}).status_code == 200
