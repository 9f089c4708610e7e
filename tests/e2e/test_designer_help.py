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


def test_the_http_help_tab_fills_the_add_form_with_its_meteo_example_in_one_click(
    browser: Browser, site: Site
) -> None:
    designer = person(browser, site.demo, "dana")
    add_form(designer, site)
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Category").select_option("http")
    form.locator("[data-part=help-tab]").click()
    help_panel = form.locator("[data-part=help-panel][data-kind=http]")
    expect(help_panel).to_contain_text("$fromAI")
    expect(help_panel.locator("[data-part=example]")).to_contain_text('"ville"')
    shot(designer, "console-designer-help-http")
    help_panel.locator("[data-part=use-example]").click()
    # The fields again, filled: the model provides the city.
    expect(form.get_by_label("Name")).to_have_value("meteo")
    expect(form.get_by_label("URL template")).to_have_value(
        "https://wttr.in/{{ $fromAI.ville }}?format=j1"
    )
    params = json.loads(form.get_by_label("AI parameters (JSON list)").input_value())
    assert params == [{"key": "ville", "type": "string", "description": "Ville", "required": True}]
    form.locator("[data-part=create-tool]").click()
    props = designer.locator("[data-part=properties][data-tool=meteo]")
    expect(props).to_be_visible()
    created = json.loads(props.get_by_label("AI parameters (JSON list)").input_value())
    assert created == params
    shot(designer, "console-designer-help-http-applied")


@pytest.mark.parametrize(("kind", "name"), [("client", "create_task"), ("block", None)])
def test_each_kind_has_its_help_and_example(
    browser: Browser, site: Site, kind: str, name: str | None
) -> None:
    designer = person(browser, site.demo, "dana", lang="fr-FR")
    add_form(designer, site)
    form = designer.locator("form[data-part=add-tool]")
    form.locator("[data-part=prop][data-key=kind] select").select_option(kind)
    form.locator("[data-part=help-tab]").click()
    expect(form.locator("[data-part=help-tab]")).to_have_text("Aide")
    expect(
        form.locator(f"[data-part=help-panel][data-kind={kind}] [data-part=kind-help]")
    ).to_be_visible()
    form.locator("[data-part=use-example]").click()
    expect(form.locator("[data-part=fields-panel]")).to_be_visible()
    expected = name or "lookup"
    expect(form.locator("[data-part=prop][data-key=name] input")).to_have_value(expected)
    shot(designer, f"console-designer-help-{kind}-fr")
