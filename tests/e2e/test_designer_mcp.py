"""The designer adds an MCP server's tools in real Chromium: pick a server the environment
allows, see the tools it lists (the SDK's own server, on loopback), choose, set the policies;
a server the environment does not allow is an error beside the server, and is not saved."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from hostcall.console.text import TEXT
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import shot, start_demo
from tests.e2e.test_console import SLOW, Site, _users_add, hostcall_check, person
from tests.e2e.test_ui import audit
from tests.support.mcp_server import Seen, build, http_server

pytestmark = pytest.mark.e2e


#: A copy of the planner for the picker's test: the first test saves the planner, and the
#: two share one site (a demo, an MCP server and a designer take half a minute to set up on a
#: loaded machine), so neither sees what the other did, in either order.
PICKER = "picker"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, Seen]]:
    tmp_path = tmp_path_factory.mktemp("designer-mcp")
    seen = Seen()
    with http_server(seen) as url:
        agents = tmp_path / "agents"
        shutil.copytree(DEMO_AGENTS, agents)
        picker = json.loads((agents / "planner.json").read_text())
        picker["id"] = PICKER
        (agents / f"{PICKER}.json").write_text(json.dumps(picker))
        platform = json.loads((agents / "_platform.json").read_text())
        platform["environments"]["demo"]["mcp_servers"] = ["crm"]
        # The demo's hosts, so that the MCP server is the one thing it refuses.
        demo_hosts = platform["environments"]["demo"]["allowed_hosts"]
        platform["environments"]["locked"] = {"allowed_hosts": demo_hosts, "mcp_servers": []}
        platform["mcp_servers"] = {"crm": {"url": url}}
        (agents / "_platform.json").write_text(json.dumps(platform))
        db = tmp_path / "e2e.db"
        _users_add(db, "dana", "designer")
        demo = start_demo(tmp_path, db=db, extra=["--agents", str(agents)])
        yield Site(demo, agents), seen
        demo.stop()


def test_designer_adds_chosen_tools_of_an_allowed_server_and_sees_a_refused_one(
    browser: Browser, site: tuple[Site, Seen]
) -> None:
    (where, seen) = site
    designer = person(browser, where.demo, "dana")
    designer.goto(f"{where.demo.hostcall}/console/agents/planner")
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Category").select_option("mcp")
    expect(form.get_by_label("Name")).to_be_hidden()
    # Create before choosing: said, nothing added.
    form.locator("[data-part=create-tool]").click()
    expect(form.locator("[data-part=mcp-status]")).to_have_text(
        "Show the server's tools and choose at least one (or all of them)."
    )
    expect(form.get_by_label("MCP server")).to_have_value("crm")
    form.locator("[data-part=mcp-show-tools]").click()
    expect(form.locator("[data-part=mcp-status]")).to_contain_text("crm lists", timeout=SLOW)
    form.get_by_label("lookup — Look up a contact (Read-only)").check()
    form.get_by_label("note_text — note_text (Write)").check()
    form.locator("[data-part=create-tool]").scroll_into_view_if_needed()
    shot(designer, "designer-mcp-pick")
    audit(designer, "designer, MCP tools listed")
    form.locator("[data-part=create-tool]").click()
    props = designer.locator("[data-part=properties][data-mcp-server=crm]")
    expect(props).to_be_visible()
    expect(props.locator("[data-part=mcp-chosen]")).to_have_text("Chosen tools: lookup, note_text")
    # Changed in the panel: the summary follows.
    props.locator("[data-part=mcp-show-tools]").click()
    props.get_by_label("note_text — note_text (Write)").uncheck()
    expect(props.locator("[data-part=mcp-chosen]")).to_have_text("Chosen tools: lookup")
    props.get_by_label("note_text — note_text (Write)").check()
    props.get_by_label("Approval policy").select_option("always")
    expect(designer.locator("[data-part=no-problems]")).to_be_visible()
    props.scroll_into_view_if_needed()
    shot(designer, "designer-mcp-properties")
    audit(designer, "designer, MCP server's panel")

    # The environment does not allow the server: the line is beside the server, not saved.
    agent_fields = designer.locator("[data-part=agent-fields]")
    agent_fields.get_by_label("Environment").select_option("locked")
    line = ("planner.json: MCP server 'crm' is not allowed in environment 'locked' "
            "(its 'mcp_servers' in _platform.json: none)")  # fmt: skip
    server_prop = props.locator("[data-part=prop][data-key=server]")
    expect(server_prop.locator("[data-part=field-problem]")).to_have_text(line)
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_have_text(line)
    server_prop.scroll_into_view_if_needed()
    shot(designer, "designer-mcp-not-allowed")
    audit(designer, "designer, MCP server not allowed")
    on_disk = json.loads((where.agents / "planner.json").read_text())
    assert not [t for t in on_disk["tools"] if t.get("kind") == "mcp"]

    agent_fields.get_by_label("Environment").select_option("demo")
    expect(designer.locator("[data-part=no-problems]")).to_be_visible()
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_contain_text("Saved as version")
    saved = json.loads((where.agents / "planner.json").read_text())
    [binding] = [t for t in saved["tools"] if t.get("kind") == "mcp"]
    assert binding == {"kind": "mcp", "server": "crm", "tools": ["lookup", "note_text"],
                       "approval": "always"}  # fmt: skip
    done = hostcall_check(where.agents)
    assert done.returncode == 0, done.stderr
    assert "MCP server crm: lookup, note_text" in done.stdout
    # Listing the tools is the only thing asked of the server: nothing was called.
    assert seen.calls == []


def test_the_server_picker_reads_in_japanese_and_works_from_the_keyboard(
    browser: Browser, site: tuple[Site, Seen]
) -> None:
    (where, _) = site
    designer = person(browser, where.demo, "dana", lang="ja-JP")
    designer.goto(f"{where.demo.hostcall}/console/agents/{PICKER}")
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.locator("select[data-key=kind]").select_option("mcp")
    show = form.locator("[data-part=mcp-show-tools]")
    expect(show).to_have_text("ツールを表示")
    show.focus()
    designer.keyboard.press("Enter")
    expect(form.locator("[data-part=mcp-status]")).to_have_text(
        f"crm のツールは {len(build()._tool_manager.list_tools())} 個です。", timeout=SLOW
    )
    designer.keyboard.press("Tab")  # to "all its tools"
    designer.keyboard.press("Space")
    expect(form.locator("[data-part=mcp-all]")).to_be_checked()
    expect(form.locator("[data-part=mcp-tool]").first).to_be_disabled()
    form.locator("[data-part=mcp-choice]").scroll_into_view_if_needed()
    shot(designer, "designer-mcp-pick-ja")
    audit(designer, "designer, MCP tools listed (ja)")
    form.locator("[data-part=create-tool]").click()
    props = designer.locator("[data-part=properties][data-mcp-server=crm]")
    expect(props.locator("[data-part=mcp-chosen]")).to_contain_text(TEXT["ja"]["mcp_all_tools"])
