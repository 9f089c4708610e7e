"""The designer in real Chromium with an installed node: the real ``hostcall demo`` with a
package of nodes on its path, a designer adding a node as a tool (config started from the
block's schema, its problems beside the field), trying it, and ``hostcall check`` agreeing;
and an HTTP tool to a host the environment does not allow refused at save, beside its URL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from hostcall.qa.servers import start_hostcall
from hostcall.settings import DEMO_AGENTS, ROOT
from tests.e2e.conftest import Demo, shot
from tests.e2e.test_console import _users_add, person
from tests.e2e.test_ui import audit
from tests.support.nodes import build_package

pytestmark = pytest.mark.e2e

MODEL = {
    "kind": "scripted",
    "rules": [
        {
            "match": "(?i)who is (?P<email>[^\\s?]+)",
            "tool": "crm_lookup",
            "arguments": {"email": "{{ email }}"},
            "reply": "{{ result.name }} is on the {{ result.plan }} plan.",
        }
    ],
    "fallback": "Ask me who someone is.",
}


class NodeSite:
    def __init__(self, demo: Demo, agents: Path, site: Path) -> None:
        self.demo, self.agents, self.site = demo, agents, site

    def check(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hostcall", "check", "--agents", str(self.agents)],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
            env={**os.environ, "PYTHONPATH": str(self.site)},
        )  # fmt: skip


@pytest.fixture
def site(tmp_path: Path) -> Iterator[NodeSite]:
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    packages = build_package(tmp_path / "site")
    db = tmp_path / "e2e.db"
    _users_add(db, "dana", "designer")
    demo = start_hostcall(
        tmp_path, command="demo", db=db, agents=agents, env={"PYTHONPATH": str(packages)}
    )
    yield NodeSite(demo, agents, packages)
    demo.stop()


def new_agent(designer: Page, demo: Demo, agent_id: str) -> None:
    designer.goto(f"{demo.hostcall}/console/agents")
    designer.locator("[data-part=new-id]").fill(agent_id)
    designer.locator("[data-part=create]").click()
    expect(designer.locator("h1")).to_contain_text(agent_id)


def test_designer_adds_an_installed_node_fills_its_config_tries_it_and_check_agrees(
    browser: Browser, site: NodeSite
) -> None:
    designer = person(browser, site.demo, "dana")
    new_agent(designer, site.demo, "crm")
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Category").select_option("block")
    form.get_by_label("Block").select_option("acme.crm_lookup")
    fields = form.locator("[data-part=config-field]")
    expect(fields).to_have_count(4)
    expect(form.locator("[data-part=config-field][data-key=region]")).to_have_text(
        'region ("eu" | "us", required) — Which CRM instance'
    )
    shot(designer, "console-designer-node-add")
    audit(designer, "designer: adding an installed node")
    form.get_by_label("Name").fill("crm_lookup")
    form.locator("[data-part=create-tool]").click()
    # No description of its own: the block's is used, and shown as the field's placeholder.
    expect(
        designer.locator("[data-part=properties][data-tool=crm_lookup]").get_by_label("Description")
    ).to_have_attribute("placeholder", "Look up a customer in the CRM by e-mail.")

    props = designer.locator("[data-part=properties][data-tool=crm_lookup]")
    config = props.get_by_label("Configuration (JSON; checked against the block's schema)")
    # Started from the schema: its defaults, and each required field (its first enum value).
    assert json.loads(config.input_value()) == {"email": "", "region": "eu", "limit": 1}
    props.get_by_label("AI parameters (JSON list)").fill(
        json.dumps([{"key": "email", "type": "string", "required": True}])
    )
    # A config the schema refuses: the server's line, beside the field.
    config.fill(json.dumps({"email": "{{ $fromAI.email }}", "region": "mars"}))
    inline = props.locator("[data-part=prop][data-key=config] [data-part=field-problem]")
    line = (
        "crm.json: tool 'crm_lookup': 'config' field 'config.region': 'mars' is not one of "
        "['eu', 'us']"
    )
    expect(inline).to_have_text(line)
    expect(designer.locator("[data-part=problems] [data-part=problem]")).to_have_text([line])
    inline.scroll_into_view_if_needed()
    shot(designer, "console-designer-node-invalid-config")
    audit(designer, "designer: a node's config refused")
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_contain_text("crm.json: tool")
    assert [t["name"] for t in json.loads((site.agents / "crm.json").read_text())["tools"]] == []

    config.fill(json.dumps({"email": "{{ $fromAI.email }}", "region": "eu"}))
    props.get_by_label("Effect").select_option("read")
    designer.locator("[data-part=agent-fields]").get_by_label("Model (JSON)").fill(
        json.dumps(MODEL)
    )
    expect(designer.locator("[data-part=no-problems]")).to_be_visible()
    props.scroll_into_view_if_needed()
    shot(designer, "console-designer-node")
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_contain_text("Saved as version")

    # Try it: the node runs on the server, in the saved agent's run.
    frame = designer.frame_locator("[data-part=try-frame]")
    expect(frame.locator("[data-part=send]")).to_be_enabled()
    box = frame.locator("[data-part=composer-input]")
    box.fill("Who is ada@example.com?")
    box.press("Enter")
    expect(
        frame.locator("[data-part=message][data-role=assistant] [data-part=message-text]").last
    ).to_have_text("Ada Lovelace is on the gold plan.")

    saved = json.loads((site.agents / "crm.json").read_text())
    assert saved["tools"] == [{
        "name": "crm_lookup", "kind": "block", "block": "acme.crm_lookup",
        "config": {"email": "{{ $fromAI.email }}", "region": "eu"},
        "ai_params": [{"key": "email", "type": "string", "required": True}], "effect": "read",
    }]  # fmt: skip
    checked = site.check()
    assert checked.returncode == 0, checked.stderr
    assert "ok: crm (1 tools: crm_lookup)" in checked.stdout


def test_an_http_tool_to_a_host_the_environment_does_not_allow_is_refused_beside_its_url(
    browser: Browser, site: NodeSite
) -> None:
    designer = person(browser, site.demo, "dana")
    new_agent(designer, site.demo, "weather")
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Category").select_option("http")
    form.get_by_label("Name").fill("forecast")
    form.get_by_label("Description").fill("Tomorrow's forecast.")
    form.get_by_label("URL template").fill("https://api.example.com/forecast")
    form.locator("[data-part=create-tool]").click()

    props = designer.locator("[data-part=properties][data-tool=forecast]")
    line = (
        "weather.json: tool 'forecast': 'url' goes to api.example.com:443, which environment "
        "'default' does not allow (its 'allowed_hosts' in _platform.json: none)"
    )
    inline = props.locator("[data-part=prop][data-key=url] [data-part=field-problem]")
    expect(inline).to_have_text(line)
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_have_text(line)
    inline.scroll_into_view_if_needed()
    shot(designer, "console-designer-http-host-refused")
    assert json.loads((site.agents / "weather.json").read_text())["tools"] == []


@pytest.mark.parametrize("lang", ["fr", "ja"])
def test_adding_a_node_reads_in_the_designers_language(
    browser: Browser, site: NodeSite, lang: str
) -> None:
    designer = person(browser, site.demo, "dana")
    designer.goto(f"{site.demo.hostcall}/console/agents/planner?lang={lang}")
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.locator("select[data-key=kind]").select_option("block")
    form.locator("select[data-key=block]").select_option("acme.crm_lookup")
    node_tool = {"fr": "Nœud installé", "ja": "インストール済みノード"}[lang]
    expect(form.locator("select[data-key=kind] option[value=block]")).to_have_text(node_tool)
    required = {"fr": "obligatoire", "ja": "必須"}[lang]
    expect(form.locator("[data-part=config-field][data-key=email]")).to_contain_text(required)
    form.locator("[data-part=config-fields]").scroll_into_view_if_needed()
    shot(designer, f"console-designer-node-add-{lang}")
    audit(designer, f"designer: adding an installed node ({lang})")
