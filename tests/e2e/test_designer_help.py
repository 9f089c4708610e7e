"""The designer in real Chromium, beside its fields: the problems summary counts what the page
found itself (JSON that does not parse), and each kind of tool has a Help tab whose example
fills the "Add tool" form in one click; the MCP one waits for the first allowed server's
tools (the SDK's own server, on loopback) before it chooses the first."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import shot, start_demo
from tests.e2e.test_console import SLOW, Site, _users_add, person
from tests.e2e.test_console import site as site  # the fixture
from tests.support.mcp_server import http_server
from tests.support.processes import free_port

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


@pytest.fixture
def mcp_site(tmp_path: Path) -> Iterator[Site]:
    """The demo whose environment "demo" allows the SDK's server, "empty" none, and "gone" one
    whose port nothing listens on."""
    with http_server() as url:
        agents = tmp_path / "agents"
        shutil.copytree(DEMO_AGENTS, agents)
        platform = json.loads((agents / "_platform.json").read_text())
        hosts = platform["environments"]["demo"]["allowed_hosts"]
        platform["environments"]["demo"]["mcp_servers"] = ["crm"]
        platform["environments"]["empty"] = {"allowed_hosts": hosts, "mcp_servers": []}
        platform["environments"]["gone"] = {"allowed_hosts": hosts, "mcp_servers": ["gone"]}
        platform["mcp_servers"] = {
            "crm": {"url": url},
            "gone": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
        }
        (agents / "_platform.json").write_text(json.dumps(platform))
        db = tmp_path / "e2e.db"
        _users_add(db, "dana", "designer")
        demo = start_demo(tmp_path, db=db, extra=["--agents", str(agents)])
        yield Site(demo, agents)
        demo.stop()


def test_the_mcp_example_chooses_the_first_allowed_server_and_its_first_listed_tool(
    browser: Browser, mcp_site: Site
) -> None:
    designer = person(browser, mcp_site.demo, "dana")
    add_form(designer, mcp_site)
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Category").select_option("mcp")
    form.locator("[data-part=help-tab]").click()
    help_panel = form.locator("[data-part=help-panel][data-kind=mcp]")
    expect(help_panel.locator("[data-part=example]")).to_contain_text("first server")
    help_panel.locator("[data-part=use-example]").click()
    # The fields, while the server lists its tools, then once it has: the first one ticked.
    expect(form.locator("[data-part=fields-panel]")).to_be_visible()
    expect(form.get_by_label("MCP server")).to_have_value("crm")
    picker = form.locator("[data-part=mcp-picker]")
    expect(picker.locator("[data-part=mcp-status]")).to_contain_text("crm lists", timeout=SLOW)
    expect(picker).not_to_have_attribute("aria-busy", "true")
    boxes = picker.locator("[data-part=mcp-tool]")
    expect(boxes.first).to_be_checked()
    expect(boxes.first).to_have_attribute("data-tool-name", "lookup")
    expect(picker.locator("[data-part=mcp-tool]:checked")).to_have_count(1)
    expect(help_panel.locator("[data-part=example-problem]")).to_be_hidden()
    picker.scroll_into_view_if_needed()
    shot(designer, "console-designer-help-mcp-applied")
    form.locator("[data-part=create-tool]").click()
    props = designer.locator("[data-part=properties][data-mcp-server=crm]")
    expect(props.locator("[data-part=mcp-chosen]")).to_have_text("Chosen tools: lookup")


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ("empty", "No MCP server is allowed in environment empty"),
        ("gone", "MCP server 'gone' is unavailable"),
    ],
)
def test_the_mcp_example_says_in_the_help_tab_why_it_could_not_choose(
    browser: Browser, mcp_site: Site, environment: str, said: str
) -> None:
    designer = person(browser, mcp_site.demo, "dana")
    designer.goto(f"{mcp_site.demo.hostcall}/console/agents/planner")
    agent_fields = designer.locator("[data-part=agent-fields]")
    agent_fields.get_by_label("Environment").select_option(environment)
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Category").select_option("mcp")
    form.locator("[data-part=help-tab]").click()
    form.locator("[data-part=use-example]").click()
    problem = form.locator("[data-part=help-panel][data-kind=mcp] [data-part=example-problem]")
    expect(problem).to_be_visible(timeout=SLOW)
    expect(problem).to_contain_text(said)
    expect(form.locator("[data-part=help-tab]")).to_have_attribute("aria-selected", "true")
    expect(form.locator("[data-part=mcp-tool]:checked")).to_have_count(0)
    problem.evaluate("e => e.scrollIntoView({block: 'center'})")  # above the save bar
    shot(designer, f"console-designer-help-mcp-{environment}")
