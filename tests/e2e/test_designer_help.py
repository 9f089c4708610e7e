"""The designer in real Chromium, beside its fields: the problems summary counts what the page
found itself (JSON that does not parse), and each kind of tool has a Help tab whose example
fills the "Add tool" form in one click."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import shot
from tests.e2e.test_console import Site, person
from tests.e2e.test_console import site as site  # the fixture

pytestmark = pytest.mark.e2e


def add_form(designer: Page, site: Site) -> None:
    designer.goto(f"{site.demo.hostcall}/console/agents/planner")
    expect(designer.locator("[data-part=no-problems]")).to_be_visible()
    designer.locator("[data-part=add-tool]").click()


def test_json_that_does_not_parse_is_counted_in_the_problems_summary(
    browser: Browser, site: Site
) -> None:
    designer = person(browser, site.demo, "dana")
    add_form(designer, site)
    form = designer.locator("form[data-part=add-tool]")
    schema = form.get_by_label("Input schema (JSON Schema)")
    schema.fill('{"type": ')
    inline = form.locator("[data-part=prop][data-key=input_schema] [data-part=field-problem]")
    expect(inline).to_contain_text("Not valid JSON")
    said = designer.locator("[data-part=problems] [data-part=problem][data-from=page]")
    expect(said).to_have_count(1)
    expect(said).to_contain_text("Input schema (JSON Schema): Not valid JSON")
    expect(designer.locator("[data-part=no-problems]")).to_have_count(0)
    shot(designer, "console-designer-json-problem")
    # Fixed, the line goes: the summary says what the field says.
    schema.fill(json.dumps({"type": "object", "properties": {}}))
    expect(inline).to_be_hidden()
    expect(designer.locator("[data-part=no-problems]")).to_be_visible()
