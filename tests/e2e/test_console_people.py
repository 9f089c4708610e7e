"""A person's data in the console, in real Chromium: the list filtered by person leads to
their page; an admin downloads the export and erases everything after typing the id again.
Screenshots: test-results/screenshots/console-person*.png."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.conftest import shot
from tests.e2e.test_console import Site, ask, person, visitor
from tests.e2e.test_console import site as site  # the fixture

pytestmark = pytest.mark.e2e

SUB = "user-42@shop.example"


def signed_in_conversation(browser: Browser, s: Site) -> str:
    """A visitor's conversation, then made a signed-in person's in the database (as the
    widget's identify does; what is under test here is the console)."""
    page = visitor(browser, s.demo)
    ask(page, "hello")
    expect(page.locator("[data-part=message][data-role=assistant]").nth(1)).to_be_visible()
    page.context.close()
    db = sqlite3.connect(s.demo.db)
    try:
        with db:
            db.execute("UPDATE conversations SET person = ?", (SUB,))
        [(cid,)] = db.execute("SELECT id FROM conversations").fetchall()
    finally:
        db.close()
    return str(cid)


def test_an_admin_finds_a_person_exports_and_erases_their_data(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    cid = signed_in_conversation(browser, site)
    admin = person(browser, site.demo, "ada")
    admin.goto(f"{site.demo.hostcall}/console/conversations")
    admin.locator("[data-part=filter-person]").fill(SUB)
    admin.locator("[data-part=apply]").click()
    row = admin.locator("[data-part=conversation]", has_text=cid)
    expect(row).to_be_visible()
    shot(admin, "console-person-filter")
    row.locator("[data-part=person]").click()
    expect(admin.locator("[data-part=person-heading]")).to_contain_text(SUB)
    expect(admin.locator("[data-part=person-conversation]")).to_have_count(1)
    shot(admin, "console-person")

    with admin.expect_download() as download:
        admin.locator("[data-part=export-json]").click()
    saved = tmp_path / "export.json"
    download.value.save_as(saved)
    document = json.loads(saved.read_text())
    assert document["subject"] == SUB and [c["id"] for c in document["conversations"]] == [cid]

    # A mistyped id: back on the form, said beside the field, nothing erased.
    admin.locator("[data-part=erase-confirm]").fill(SUB[:-1])
    admin.locator("[data-part=erase-person]").click()
    expect(admin.locator("[data-part=erase-error]")).to_be_visible()
    expect(admin.locator("[data-part=person-conversation]")).to_have_count(1)
    admin.locator("[data-part=erase-confirm]").scroll_into_view_if_needed()
    shot(admin, "console-person-erase-mistyped")
    admin.locator("[data-part=erase-confirm]").fill(SUB)
    admin.locator("[data-part=erase-person]").click()
    expect(admin.locator("[data-part=erased]")).to_contain_text("Conversations erased: 1")
    expect(admin.locator("[data-part=empty]")).to_be_visible()
    shot(admin, "console-person-erased")
    db = sqlite3.connect(site.demo.db)
    try:
        assert db.execute("SELECT COUNT(*) FROM conversations").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)
    finally:
        db.close()
    admin.context.close()


def test_an_operator_sees_the_person_but_cannot_export_or_erase(
    browser: Browser, site: Site
) -> None:
    signed_in_conversation(browser, site)
    operator = person(browser, site.demo, "olga")
    # The list of people, from the console's menu, leads to the person's page.
    operator.get_by_role("link", name="People").click()
    row = operator.locator("[data-part=known-person]")
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-person", SUB)
    shot(operator, "console-people")
    row.locator("[data-part=open-person]").click()
    expect(operator.locator("[data-part=person-conversation]")).to_have_count(1)
    expect(operator.locator("[data-part=admins-only]")).to_be_visible()
    # Its times in the reader's local time, as the conversation list shows its own.
    started = operator.locator("[data-part=person-conversation] time").first
    local = started.evaluate("t => new Date(t.dateTime).toLocaleString('en')")
    expect(started).to_have_text(local)
    expect(operator.locator("[data-part=erase-person]")).to_have_count(0)
    shot(operator, "console-person-operator")
    operator.context.close()


def test_a_person_with_many_conversations_is_shown_in_pages(browser: Browser, site: Site) -> None:
    cid = signed_in_conversation(browser, site)
    db = sqlite3.connect(site.demo.db)
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(conversations)")]
        copied = ", ".join(
            {"id": "? || id", "updated_at": "updated_at - ?"}.get(c, c) for c in columns
        )
        with db:  # 59 older copies of it: 60 in all, a page of 50 and one of 10
            for n in range(1, 60):
                db.execute(
                    f"INSERT INTO conversations ({', '.join(columns)}) SELECT {copied}"
                    " FROM conversations WHERE id = ?",
                    (f"old{n:02d}_", n, cid),
                )
    finally:
        db.close()
    operator = person(browser, site.demo, "olga")
    operator.goto(f"{site.demo.hostcall}/console/people?agent=planner&person={SUB}")
    rows = operator.locator("[data-part=person-conversation]")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-id", cid)
    expect(operator.locator("[data-part=newest]")).to_have_count(0)
    operator.locator("[data-part=older]").click()
    expect(rows).to_have_count(10)
    expect(rows.last).to_have_attribute("data-id", f"old59_{cid}")
    expect(operator.locator("[data-part=older]")).to_have_count(0)
    shot(operator, "console-person-older")
    operator.locator("[data-part=newest]").click()
    expect(rows).to_have_count(50)
    operator.context.close()
