# ruff: noqa: RUF001  (the console's sentences, typographic apostrophes included)
"""The console's designer and operator, as people use them, in real Chromium: a tool name
the designer refuses says why where the person is looking; an operator approves with the
same scopes the widget offers, and the server holds the scope."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Route, expect

from tests.e2e.conftest import shot
from tests.e2e.test_console import (  # noqa: F401  (site: the fixture)
    Site,
    ask,
    open_conversation,
    person,
    site,
    visitor,
)

ADD = "Add a task to review the Q3 report before Friday"

pytestmark = pytest.mark.e2e


def test_an_invalid_tool_name_is_said_inline_focused_and_announced(
    browser: Browser,
    site: Site,  # noqa: F811
) -> None:
    designer = person(browser, site.demo, "dana")
    designer.goto(f"{site.demo.hostcall}/console/agents/planner")
    # The editor is drawn by its script, after the page's load: count its tools once it is.
    expect(designer.locator("[data-part=add-tool]")).to_be_visible()
    tools_before = designer.locator("[data-part=tool-tab]").count()
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    name = form.get_by_label("Name")
    name.fill("1 bad-name!")
    form.locator("[data-part=create-tool]").click()
    problem = form.locator("[data-part=prop][data-key=name] [data-part=field-problem]")
    expect(problem).to_have_text(
        "“1 bad-name!” cannot be a client-side tool’s name: start with a letter or _, then use "
        "only letters, digits, spaces and _."
    )
    expect(problem).to_have_attribute("role", "alert")  # announced at once
    # Drawn as an error, not as one more line of help.
    colour = "el => getComputedStyle(el).color"
    help_text = form.locator("[data-part=prop][data-key=name] [data-part=help]")
    assert problem.evaluate(colour) != help_text.evaluate(colour)
    expect(name).to_be_focused()
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_have_accessible_description(
        "Starts with a letter or _; then letters, digits, spaces and _ (server-side: letters, "
        "digits, _ and -). “1 bad-name!” cannot be a client-side tool’s name: start with a "
        "letter or _, then use only letters, digits, spaces and _."
    )
    shot(designer, "designer-invalid-tool-name")
    # Nothing was added, nothing saved; an empty name is said too, and a good one goes in.
    expect(designer.locator("[data-part=tool-tab]")).to_have_count(tools_before)
    name.fill("")
    expect(problem).to_be_hidden()
    expect(name).not_to_have_attribute("aria-invalid", "true")
    form.locator("[data-part=create-tool]").click()
    expect(problem).to_have_text("Give the tool a name: start with a letter or _.")
    name.fill("estimate task")
    form.locator("[data-part=create-tool]").click()
    expect(designer.locator("[data-part=properties][data-tool='estimate task']")).to_be_visible()
    expect(designer.locator("[data-part=tool-tab]")).to_have_count(tools_before + 1)


def test_a_refused_tool_name_stays_said_when_the_check_answers_after_create(
    browser: Browser,
    site: Site,  # noqa: F811
) -> None:
    """A slow device: the server's check of the draft (asked for as the person typed) answers
    after they pressed Create. The reason Create was refused stays shown and announced."""
    designer = person(browser, site.demo, "dana")
    held: list[Route] = []
    designer.route("**/console/api/agents/planner/check", lambda route: held.append(route))
    designer.goto(f"{site.demo.hostcall}/console/agents/planner")
    problems = designer.locator("[data-part=problems]")
    expect(problems).to_have_attribute("aria-busy", "true")  # the first check, held
    designer.locator("[data-part=add-tool]").click()
    form = designer.locator("form[data-part=add-tool]")
    name = form.get_by_label("Name")
    with designer.expect_request("**/check"):  # typing asks for a check too: held
        name.fill("1 bad-name!")
    form.locator("[data-part=create-tool]").click()
    problem = form.locator("[data-part=prop][data-key=name] [data-part=field-problem]")
    said = (
        "“1 bad-name!” cannot be a client-side tool’s name: start with a letter or _, then use "
        "only letters, digits, spaces and _."
    )
    expect(problem).to_have_text(said)
    expect(problem).to_be_visible()

    # The checks answer now, in order; the last one's answer is drawn.
    assert len(held) == 2, [r.request.url for r in held]
    for route in held:
        route.continue_()
    expect(problems).not_to_have_attribute("aria-busy", "true")
    # The server sees no problem in the draft; the summary still counts the refused name.
    expect(problems.locator("[data-part=problem][data-from=page]")).to_have_text(f"Name: {said}")
    expect(problem).to_be_visible()
    expect(problem).to_have_text(said)
    expect(problem).to_have_attribute("role", "alert")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_be_focused()


def test_an_operator_approves_for_the_whole_conversation(
    browser: Browser,
    site: Site,  # noqa: F811
) -> None:
    widget = visitor(browser, site.demo)
    ask(widget, ADD)
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card.locator("[data-part=approve]")).to_be_visible()

    console = person(browser, site.demo, "olga")
    open_conversation(console, site.demo)
    call = console.locator("[data-part=call][data-state=awaiting_confirmation]")
    scope = call.locator("[data-part=scope]")
    expect(scope).to_be_visible()
    expect(scope.get_by_role("radio", name="Just this once")).to_be_checked()
    scope.get_by_role("radio", name="For this conversation").check()
    shot(console, "console-approve-scope")
    call.locator("[data-part=approve]").click()
    expect(
        console.locator(
            "[data-part=call][data-state=dispatched], [data-part=call][data-state=delivered]"
        )
    ).to_be_visible()

    # The visitor answers the approved call (no page handler: the form), then asks again:
    # the second call is not asked about.
    form = card.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible()
    form.locator('[data-path="/id"]').fill("T-9")
    form.locator('[data-path="/title"]').fill("Review the Q3 report")
    form.locator('[data-path="/status"]').select_option('"todo"')
    form.locator("[data-part=submit]").click()
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    ask(widget, "Add a task to write the release notes")
    second = widget.locator("[data-part=tool-call][data-tool=create_task]").nth(1)
    expect(second.locator("[data-part=form][data-purpose=answer]")).to_be_visible()
    expect(second.locator("[data-part=approve]")).to_have_count(0)


def test_the_japanese_console_says_the_role_error_in_japanese(
    browser: Browser,
    site: Site,  # noqa: F811
) -> None:
    olga = person(browser, site.demo, "olga", lang="ja-JP")
    olga.goto(f"{site.demo.hostcall}/console/agents")
    message = olga.locator("[data-part=error-message]")
    expect(message).to_have_text(
        "この操作にはデザイナーの役割が必要です。olga はオペレーターです。"
    )
    shot(olga, "console-role-error-ja")
