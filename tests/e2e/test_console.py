"""The operator console in real Chromium: the real ``hostcall`` command, accounts
made with ``hostcall users add``, a visitor's widget and an operator's console in two
browser contexts, and the agent designer writing a real agent directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, FrameLocator, Page, expect

from hostcall.settings import DEMO_AGENTS, ROOT
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.test_ui import audit

pytestmark = pytest.mark.e2e
PASSWORD = "correct horse battery"
SLOW = 15_000


@dataclass
class Site:
    demo: Demo
    agents: Path


def _users_add(db: Path, name: str, role: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hostcall", "users", "add", name, "--role", role, "--db", str(db)],
        input=PASSWORD + "\n", capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"ok: {name} ({role})" in done.stdout


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    db = tmp_path / "e2e.db"
    for name, role in (("olga", "operator"), ("dana", "designer"), ("ada", "admin")):
        _users_add(db, name, role)
    demo = start_demo(tmp_path, db=db, extra=["--agents", str(agents)])
    yield Site(demo, agents)
    demo.stop()


def person(browser: Browser, demo: Demo, name: str, *, lang: str = "en-US") -> Page:
    """A new browser (own cookies) signed in to the console as `name`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale=lang)
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.goto(f"{demo.hostcall}/console/login")
    page.locator("#login-name").fill(name)
    page.locator("#login-password").fill(PASSWORD)
    page.locator("#login-password").press("Enter")
    expect(page.locator("[data-part=who]")).to_contain_text(name)
    return page


def visitor(browser: Browser, demo: Demo) -> Page:
    """The visitor: the standalone widget (no page handlers, so calls wait for a person)."""
    context = browser.new_context(viewport={"width": 900, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.goto(f"{demo.hostcall}/widget/planner")
    expect(page.locator("[data-part=send]")).to_be_enabled()
    return page


def ask(widget: Page | FrameLocator, text: str) -> None:
    box = widget.locator("[data-part=composer-input]")
    box.fill(text)
    box.press("Enter")


def open_conversation(console: Page, demo: Demo) -> None:
    """The newest conversation with a call waiting for a person, from the filtered list."""
    console.goto(f"{demo.hostcall}/console/conversations?waiting=1")
    row = console.locator("[data-part=conversation][data-waiting=yes]").first
    expect(row).to_be_visible()
    row.locator("[data-part=open]").click()
    expect(console.locator("[data-part=call]").first).to_be_visible()


def save_shot(page: Page, name: str) -> None:
    shot(page, name, readme=name)  # the README's copy only with HOSTCALL_REFRESH_DOCS=1


# ---------------------------------------------------------------------------- instances


def test_operator_answers_a_waiting_call_and_the_visitors_late_answer_is_already_answered(
    browser: Browser, site: Site
) -> None:
    demo = site.demo
    page = widget = visitor(browser, demo)
    ask(widget, "What should I work on next?")
    card = widget.locator("[data-part=tool-call][data-tool=read_board_tasks]")
    form = card.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible()
    # The visitor's network stalls (no events, no snapshots): the widget will not hear of the
    # operator's answer, and its person answers too, late.
    # The stream only: the widget's own events.js module must still load.
    page.route("**/api/conversations/*/events*", lambda route: route.abort())
    page.reload()
    expect(form).to_be_visible(timeout=SLOW)
    page.route(
        "**/api/conversations/**",
        lambda route: route.abort() if route.request.method == "GET" else route.continue_(),
    )

    console = person(browser, demo, "olga")
    open_conversation(console, demo)
    call = console.locator(
        "[data-part=call][data-state=delivered], [data-part=call][data-state=dispatched]"
    )
    answer = call.locator("[data-part=form][data-purpose=answer]")
    expect(answer).to_be_visible()
    save_shot(console, "console-conversation")
    answer.locator("[data-part=submit]").click()  # an empty board is a valid answer
    expect(console.locator("[data-part=call][data-state=answered]")).to_be_visible()
    expect(console.locator("[data-part=answered-by]")).to_have_text("olga (call.answer)")
    expect(console.locator("[data-part=run][data-status=finished]")).to_be_visible()

    # The visitor answers too, late: the widget shows "already answered", not an error.
    form.locator("[data-part=submit]").click()
    expect(card.locator("[data-part=tool-call-note]")).to_have_text(
        "This action was already answered."
    )
    page.unroute("**/api/conversations/*/events*")
    page.unroute("**/api/conversations/**")
    page.reload()
    expect(widget.locator("[data-part=message][data-role=assistant]").last).to_contain_text(
        "Your board is clear", timeout=SLOW
    )
    expect(widget.locator("[data-part=tool-call][data-tool=read_board_tasks]")).to_have_attribute(
        "data-state", "done"
    )
    console.goto(f"{demo.hostcall}/console/conversations")
    save_shot(console, "console-conversations")


def test_operator_approves_a_confirmation_with_edits(browser: Browser, site: Site) -> None:
    demo = site.demo
    widget = visitor(browser, demo)
    ask(widget, "Add a task to review the Q3 report before Friday")
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card.locator("[data-part=approve]")).to_be_visible()

    console = person(browser, demo, "olga")
    open_conversation(console, demo)
    call = console.locator("[data-part=call][data-state=awaiting_confirmation]")
    call.locator("[data-part=edit]").click()
    edit = call.locator("[data-part=form][data-purpose=edit]")
    title = edit.locator('[data-path="/title"]')
    expect(title).to_have_value("Review the Q3 report")
    title.fill("Review the Q4 report")
    save_shot(console, "console-approve-with-edits")
    edit.locator("[data-part=submit]").click()
    moved = console.locator(
        "[data-part=call][data-state=dispatched], [data-part=call][data-state=delivered]"
    )
    expect(moved).to_be_visible()
    expect(moved.locator("[data-part=answered-by]")).to_have_text("olga (call.approve)")
    # The operator's answer form starts from the input, as the visitor's does.
    answer = moved.locator("[data-part=form][data-purpose=answer]")
    expect(answer.locator('[data-path="/title"]')).to_have_value("Review the Q4 report")
    shot(console, "console-answer-prefilled")
    # The visitor's widget follows: the approved, edited call now waits for its result.
    expect(card.locator("[data-part=form][data-purpose=answer]")).to_be_visible()
    expect(card.locator("[data-part=tool-call-input]")).to_contain_text("Review the Q4 report")


# ---------------------------------------------------------------------------- designer

HELPDESK_MODEL = {
    "kind": "scripted",
    "rules": [
        {
            "match": "(?i)order (?P<id>\\w+)",
            "tool": "lookup_order",
            "arguments": {"orderId": "{{ id }}"},
            "reply": "Order {{ result.orderId }} is {{ result.status }}.",
        }
    ],
    "fallback": "Ask me about an order.",
}
INPUT = {"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}
OUTPUT = {
    "type": "object",
    "properties": {
        "orderId": {"type": "string"},
        "status": {"type": "string", "enum": ["open", "shipped"]},
    },
    "required": ["orderId", "status"],
}  # fmt: skip


def add_tool(designer: Page, name: str, description: str) -> None:
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Description").fill(description)
    form.get_by_label("Input schema (JSON Schema)").fill(json.dumps(INPUT))
    form.get_by_label("Output schema (JSON Schema)").fill(json.dumps(OUTPUT))
    form.locator("[data-part=create-tool]").click()
    expect(designer.locator(f"[data-part=properties][data-tool='{name}']")).to_be_visible()


def hostcall_check(agents: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostcall", "check", "--agents", str(agents)],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip


def test_designer_creates_an_agent_with_two_tools_tries_it_and_check_passes(
    browser: Browser, site: Site
) -> None:
    demo = site.demo
    designer = person(browser, demo, "dana")
    designer.goto(f"{demo.hostcall}/console/agents")
    designer.locator("[data-part=new-id]").fill("helpdesk")
    designer.locator("[data-part=new-name]").fill("Help desk")
    designer.locator("[data-part=create]").click()
    expect(designer.locator("h1")).to_contain_text("helpdesk")

    add_tool(designer, "lookup_order", "Looks up an order in the shop's back office.")
    props = designer.locator("[data-part=properties][data-tool=lookup_order]")
    # The live preview of the form the output schema generates (the widget's form).
    preview = props.locator("[data-part=preview][data-schema=output_schema]")
    expect(preview.locator('[data-path="/status"]')).to_be_visible()
    props.get_by_label("Simulation result (JSON)").fill('{"orderId": "A1", "status": "shipped"}')
    props.get_by_label("Effect").select_option("read")
    props.get_by_label("Display title (what people see)").fill("Look up an order")

    add_tool(designer, "refund_order", "Refunds an order.")
    refund = designer.locator("[data-part=properties][data-tool=refund_order]")
    refund.get_by_label("Require confirmation").check()
    expect(refund.get_by_label("Approval policy")).to_have_value("always")

    designer.locator("[data-part=agent-fields]").get_by_label("Model (JSON)").fill(
        json.dumps(HELPDESK_MODEL)
    )
    expect(designer.locator("[data-part=no-problems]")).to_be_visible()
    designer.locator("[data-part=tool-tab]").first.click()
    props.locator("[data-part=preview][data-schema=input_schema]").scroll_into_view_if_needed()
    save_shot(designer, "console-designer")
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_contain_text("Saved as version")

    # Try it: the widget, standalone, on the saved agent; no handler, so the form answers.
    frame = designer.frame_locator("[data-part=try-frame]")
    expect(frame.locator("[data-part=send]")).to_be_enabled()
    ask(frame, "Where is order A1?")
    form = frame.locator("[data-part=tool-call][data-tool=lookup_order] [data-part=form]")
    form.locator('[data-path="/orderId"]').fill("A1")
    form.locator('[data-path="/status"]').select_option("open")
    form.locator("[data-part=submit]").click()
    expect(
        frame.locator("[data-part=message][data-role=assistant] [data-part=message-text]").last
    ).to_have_text("Order A1 is open.")
    # Simulated runs: the tool's simulation result, nothing asked of anyone.
    designer.locator("[data-part=simulate]").check()
    expect(frame.locator("[data-part=send]")).to_be_enabled()
    ask(frame, "Where is order B2?")
    expect(
        frame.locator("[data-part=message][data-role=assistant] [data-part=message-text]").last
    ).to_have_text("(Simulated) Order A1 is shipped.")

    saved = json.loads((site.agents / "helpdesk.json").read_text())
    tools = {t["name"]: t for t in saved["tools"]}
    assert tools["refund_order"]["approval"] == "always"
    assert tools["lookup_order"]["title"] == "Look up an order"
    assert tools["lookup_order"]["simulation_result"] == {"orderId": "A1", "status": "shipped"}
    checked = hostcall_check(site.agents)
    assert checked.returncode == 0, checked.stderr
    assert "ok: helpdesk (2 tools: lookup_order, refund_order)" in checked.stdout


def test_an_invalid_schema_names_the_field_and_save_is_refused_with_the_check_message(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    demo = site.demo
    before = (site.agents / "planner.json").read_bytes()
    designer = person(browser, demo, "dana")
    designer.goto(f"{demo.hostcall}/console/agents/planner")
    props = designer.locator("[data-part=properties][data-tool=read_board_tasks]")
    bad = {"type": "object", "properties": {"boardId": {"type": "strng"}}}
    props.get_by_label("Input schema (JSON Schema)", exact=True).fill(json.dumps(bad))
    inline = props.locator("[data-part=prop][data-key=input_schema] [data-part=field-problem]")
    expect(inline).to_contain_text("'input_schema' is not valid JSON Schema")
    designer.locator("[data-part=save]").click()

    # hostcall check on the same file says exactly the same.
    staged = tmp_path / "staged"
    shutil.copytree(site.agents, staged)
    planner = json.loads(before)
    planner["tools"][0]["input_schema"] = bad
    (staged / "planner.json").write_text(json.dumps(planner))
    printed = hostcall_check(staged)
    assert printed.returncode == 1
    line = printed.stderr.strip().splitlines()[0]
    assert "planner.json: tool 'read_board_tasks': 'input_schema'" in line
    expect(designer.locator("[data-part=save-status]")).to_have_text(line)
    expect(designer.locator("[data-part=problems] [data-part=problem]").first).to_have_text(line)
    expect(inline).to_have_text(line)
    inline.scroll_into_view_if_needed()
    save_shot(designer, "console-designer-invalid-schema")
    assert (site.agents / "planner.json").read_bytes() == before


def test_a_model_key_naming_a_server_secret_is_shown_by_the_model_and_not_saved(
    browser: Browser, site: Site
) -> None:
    demo = site.demo
    before = (site.agents / "planner.json").read_bytes()
    designer = person(browser, demo, "dana")
    designer.goto(f"{demo.hostcall}/console/agents/planner")
    model = {"kind": "openai", "base_url": "http://127.0.0.1:8002/v1", "model": "m",
             "api_key_env": "HOSTCALL_SECRET_KEYS"}  # fmt: skip
    designer.locator("[data-part=agent-fields]").get_by_label("Model (JSON)").fill(
        json.dumps(model)
    )
    line = (
        "planner.json: model: 'api_key_env': environment variable 'HOSTCALL_SECRET_KEYS' is "
        "one of the server's own settings (HOSTCALL_*), never given to an agent"
    )
    inline = designer.locator(
        "[data-part=agent-fields] [data-part=prop][data-key=model] [data-part=field-problem]"
    )
    expect(inline).to_have_text(line)
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_have_text(line)
    assert (site.agents / "planner.json").read_bytes() == before


def test_every_save_is_a_version_with_a_diff_and_a_roll_back(browser: Browser, site: Site) -> None:
    demo = site.demo
    original = (site.agents / "planner.json").read_text()
    designer = person(browser, demo, "dana")
    designer.goto(f"{demo.hostcall}/console/agents/planner")
    greeting = designer.locator("[data-part=agent-fields]").get_by_label("Greeting")
    greeting.fill("Hello from version two.")
    designer.locator("[data-part=save]").click()
    expect(designer.locator("[data-part=save-status]")).to_have_text(
        "Saved as version 2 and reloaded."
    )
    designer.locator("[data-part=versions-link]").click()
    diff = designer.locator("[data-part=diff]")
    expect(diff.locator("[data-kind='+']")).to_contain_text('"greeting": "Hello from version two."')
    expect(diff.locator("[data-kind='-']")).to_contain_text('"greeting": "Hi!')
    save_shot(designer, "console-versions")
    designer.locator("[data-part=version][data-version='1'] [data-part=rollback]").click()
    expect(designer.locator("[data-part=version]")).to_have_count(3)
    assert (site.agents / "planner.json").read_text() == original

    # Each step is in the audit log, which an admin reads (after the three accounts that
    # ``hostcall users add`` made for the test).
    admin = person(browser, demo, "ada")
    admin.goto(f"{demo.hostcall}/console/audit")
    actions = admin.locator("[data-part=audit-entry]")
    expect(actions).to_have_count(7)
    assert [a.get_attribute("data-action") for a in actions.all()] == [
        "login", "agent.rollback", "agent.save", "login", "user.add", "user.add", "user.add",
    ]  # fmt: skip
    save_shot(admin, "console-audit")


# ---------------------------------------------------------------------------- pages


def _pages(demo: Demo) -> dict[str, str]:
    return {
        "login": "/console/login",
        "conversations": "/console/conversations",
        "agents": "/console/agents",
        "designer": "/console/agents/planner",
        "versions": "/console/agents/planner/versions",
        "audit": "/console/audit",
    }


@pytest.mark.parametrize(
    ("lang", "theme"), [("en", "light"), ("fr", "dark"), ("es", "light"), ("ja", "dark")]
)
def test_console_pages_are_axe_clean_in_every_language_and_theme(
    browser: Browser, site: Site, lang: str, theme: str
) -> None:
    demo = site.demo
    admin = person(browser, demo, "ada")
    widget = visitor(browser, demo)
    ask(widget, "Add a task to review the Q3 report before Friday")
    expect(widget.locator("[data-part=approve]")).to_be_visible()
    admin.goto(f"{demo.hostcall}/console/conversations?lang={lang}&theme={theme}")
    expect(admin.locator("html")).to_have_attribute("lang", lang)
    targets = {**_pages(demo), "conversation": ""}
    for name, path in targets.items():
        if name == "conversation":
            open_conversation(admin, demo)
        else:
            admin.goto(f"{demo.hostcall}{path}")
        if name == "designer":
            expect(admin.locator("[data-part=properties]")).to_be_visible()
        expect(admin.locator("html")).to_have_attribute("data-theme", theme)
        audit(admin, f"console {name} ({lang}, {theme})")
        if (lang, theme) == ("en", "light") and name in ("login", "agents"):
            save_shot(admin, f"console-{name}")
        if lang == "ja" and name == "conversation":
            save_shot(admin, "console-conversation-ja-dark")


def test_the_console_is_usable_with_the_keyboard_alone(browser: Browser, site: Site) -> None:
    demo = site.demo
    widget = visitor(browser, demo)
    ask(widget, "Add a task to plan the offsite")
    expect(widget.locator("[data-part=approve]")).to_be_visible()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    console = context.new_page()
    console.goto(f"{demo.hostcall}/console/conversations")
    # Redirected to sign in; the name field has the focus (wait for it: typed too early, the
    # first key was lost on a loaded machine).
    expect(console.get_by_role("textbox", name="Name")).to_be_focused()
    console.keyboard.type("olga")
    console.keyboard.press("Tab")
    console.keyboard.type(PASSWORD)
    console.keyboard.press("Enter")
    expect(console.locator("[data-part=conversation]").first).to_be_visible()
    link = console.locator("[data-part=open]").first
    link.focus()
    console.keyboard.press("Enter")
    approve = console.locator("[data-part=call] [data-part=approve]")
    approve.focus()
    expect(approve).to_be_focused()
    console.keyboard.press("Enter")
    expect(console.locator("[data-part=call]").first).to_have_attribute("data-state", "dispatched")
