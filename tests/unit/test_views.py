"""Result views (hostcall/views/): a tool's ``view`` is checked when the agent file loads,
every bad one refused with a line naming the tool and the field; the view's data is built
from the result, bounded, as text, with images only from the hosts it allows; it travels in
the call's outcome (the result event, the snapshot) and the console draws it escaped."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import parse_agent
from hostcall.settings import DEMO_AGENTS
from hostcall.tools import parse_tool
from hostcall.views.drawn import MAX_ITEMS, MAX_MESSAGE_CHARS, MAX_TEXT_CHARS, draw, image_address
from hostcall.views.paths import MAX_STEPS, PathError, parse_path, parse_template
from hostcall.views.spec import ViewSpec, parse_view
from tests.support.harness import BOARD, Harness
from tests.support.loopback import Live
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_server_tools import target

__all__ = ["target"]  # a loopback HTTP server, for a server-side tool

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
LIST = {
    "type": "list",
    "items": "$.tasks",
    "item": {
        "title": "@.title",
        "subtitle": "@.status",
        "buttons": [{"label": "Done", "message": "Mark {@.title} as done", "tool": "done"}],
    },
}


def tool(view: Any, **schema: Any) -> dict[str, Any]:
    output = {"type": "object", **schema}
    raw = {"name": "board", "description": "Reads the board.", "input_schema": {"type": "object"},
           "output_schema": output}  # fmt: skip
    return raw | ({"view": view} if view is not None else {})


def problems_of(view: Any) -> list[str]:
    parsed, problems = parse_tool(tool(view), "agent.json: tool #1")
    assert (parsed is None) == bool(problems)
    return problems


def spec(view: dict[str, Any]) -> ViewSpec:
    parsed, problems = parse_view(view, "t")
    assert parsed is not None, problems
    return parsed


# ---- the path language ------------------------------------------------------------------


def test_a_path_reads_names_and_indexes_and_finds_nothing_quietly() -> None:
    data = {"rows": [{"name": "a"}, {"name": "b"}]}
    assert parse_path("$.rows[1].name").read(data) == "b"
    assert parse_path("$.rows[7].name").read(data) is None
    assert parse_path("$.rows.name").read(data) is None
    assert parse_path("$").read(data) == data
    assert parse_path("@.name", item=True).read(data, {"name": "c"}) == "c"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tasks", "must start with $"),
        ("$..tasks", "only .name and [index]"),
        ("$.tasks[*]", "only .name and [index]"),
        ("$.tasks[?(@.x)]", "only .name and [index]"),
        ("$['a']", "only .name and [index]"),
        ("$" + ".a" * (MAX_STEPS + 1), f"more than {MAX_STEPS} steps"),
        ("$." + "a" * 300, "longer than"),
        ("@.title", "only an item's fields"),
        ("", "must be a path"),
    ],
)
def test_a_path_outside_the_language_is_refused_with_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(PathError, match=says.replace("[", r"\[").replace("$", r"\$")):
        parse_path(text)


def test_a_template_fills_its_placeholders_and_refuses_a_stray_brace() -> None:
    template = parse_template("Mark {@.title} as done", item=True)
    assert [p if isinstance(p, str) else "PATH" for p in template.parts] == [
        "Mark ", "PATH", " as done"
    ]  # fmt: skip
    with pytest.raises(PathError, match="unmatched brace"):
        parse_template("Mark {@.title as done", item=True)
    with pytest.raises(PathError, match="only an item's fields"):
        parse_template("Mark {@.title}")


# ---- checked at load ----------------------------------------------------------------------


def test_a_good_view_loads_with_its_tool() -> None:
    parsed, problems = parse_tool(tool(LIST), "agent.json: tool #1")
    assert problems == [] and parsed is not None and parsed.view is not None
    assert parsed.view.type == "list" and parsed.view.tools == {"done"}


@pytest.mark.parametrize(
    ("view", "problem"),
    [
        ("list", "'view' must be an object with a 'type'"),
        ({"type": "chart"}, "'view.type' must be one of card, list, table, keyvalue, image"),
        ({"type": "list", "item": {"title": "@.t"}}, "'view.items' is required in a list view"),
        ({**LIST, "html": "<b>"}, "'view.html' is not a key of a list view"),
        ({**LIST, "items": "tasks"}, "'view.items' 'tasks' must start with $"),
        ({**LIST, "item": {"subtitle": "@.s"}}, "'view.item.title' is required"),
        ({**LIST, "item": {"title": "$.x", "colour": "red"}}, "'view.item.colour' is not a key"),
        (
            {**LIST, "item": {"title": "@.t", "buttons": [{"label": "Go"}]}},
            "'view.item.buttons[0]' must be an object with 'label' and 'message'",
        ),
        (
            {**LIST, "item": {"title": "@.t", "buttons": [{"label": "", "message": "x"}]}},
            "'view.item.buttons[0].label' must be text of 1 to 40 characters",
        ),
        (
            {**LIST, "item": {"title": "@.t", "buttons": [{"label": "Go", "message": "{$.a"}]}},
            "'view.item.buttons[0].message' '{$.a' has an unmatched brace",
        ),
        (
            {**LIST, "buttons": [{"label": "Go", "message": "{@.t}"}]},
            "'view.buttons[0].message' '@.t' starts with @",
        ),
        (
            {**LIST, "buttons": [{"label": "Go", "message": "x"}] * 4},
            "'view.buttons' must be a list of 1 to 3 entries",
        ),
        (
            {"type": "table", "items": "$.rows", "columns": []},
            "'view.columns' must be a list of 1 to 6 entries",
        ),
        (
            {"type": "table", "items": "$.rows", "columns": [{"label": "A"}]},
            "'view.columns[0]' must be an object with exactly 'label' and 'value'",
        ),
        (
            {
                "type": "table",
                "items": "$.r",
                "columns": [{"label": "A", "value": "@.a"}],
                "item": {"title": "@.a"},
            },
            "'view.item.title' is not a key of an item of a table",
        ),
        (
            {"type": "keyvalue", "fields": [{"label": "A", "value": "@.a"}]},
            "'view.fields[0].value' '@.a' starts with @",
        ),
        (
            {"type": "image", "image": {"src": "$.u", "alt": "$.a"}},
            "'view.image_hosts' is required in a image view",
        ),
        (
            {"type": "image", "image": {"src": "$.u"}, "image_hosts": ["self"]},
            "'view.image.alt' is required",
        ),
        (
            {"type": "card", "image": {"src": "$.u", "alt": "$.a"}},
            "'view.image_hosts' is required with an image",
        ),
        (
            {
                "type": "image",
                "image": {"src": "$.u", "alt": "$.a"},
                "image_hosts": ["https://*.x"],
            },
            "'view.image_hosts[0]' 'https://*.x' is not an origin: wildcards",
        ),
        (
            {"type": "image", "image": {"src": "$.u", "alt": "$.a"}, "image_hosts": []},
            "'view.image_hosts' must list 1 to 8 origins",
        ),
    ],
)
def test_a_bad_view_is_refused_naming_the_tool_and_the_field(view: Any, problem: str) -> None:
    problems = problems_of(view)
    assert any(p.startswith("agent.json: tool 'board': ") and problem in p for p in problems), (
        problems
    )


def test_an_output_schema_hint_chooses_the_view_and_is_checked_the_same() -> None:
    parsed, problems = parse_tool(tool(None, **{"x-hostcall-view": LIST}), "a.json: tool #1")
    assert problems == [] and parsed is not None and parsed.view is not None
    assert parsed.view.items is not None
    _, problems = parse_tool(tool(None, **{"x-hostcall-view": {"type": "pie"}}), "a.json: tool #1")
    assert problems == [
        "a.json: tool 'board': 'output_schema.x-hostcall-view.type' must be one of card, list, "
        "table, keyvalue, image (got 'pie')"
    ]
    # The agent file's own view wins over the schema's hint.
    parsed, _ = parse_tool(tool({"type": "keyvalue", "fields": [{"label": "N", "value": "$.n"}]},
                                **{"x-hostcall-view": LIST}), "a.json: tool #1")  # fmt: skip
    assert parsed is not None and parsed.view is not None and parsed.view.type == "keyvalue"


def planner(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DEMO_AGENTS / "planner.json").read_text())
    data["tools"][0] |= changes
    return data


def test_a_button_for_a_tool_the_agent_lacks_is_refused_at_load() -> None:
    view = copy.deepcopy(planner()["tools"][0]["view"])
    view["item"]["buttons"][0]["tool"] = "delete_everything"
    agent, problems = parse_agent(planner(view=view), "planner.json", {})
    assert agent is None and problems == [
        "planner.json: tool 'read_board_tasks': 'view' has a button for tool "
        "'delete_everything', which the agent lacks"
    ]


def test_hostcall_check_names_the_tool_and_field_of_a_bad_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hostcall.cli import main

    (tmp_path / "_platform.json").write_text((DEMO_AGENTS / "_platform.json").read_text())
    bad = planner(view={**LIST, "items": "$.tasks[*]"})
    (tmp_path / "planner.json").write_text(json.dumps(bad))
    assert main(["check", "--agents", str(tmp_path)]) != 0
    said = capsys.readouterr()
    assert "tool 'read_board_tasks': 'view.items' '$.tasks[*]' is not a path" in said.out + said.err


# ---- the view's data ------------------------------------------------------------------------


def test_a_list_view_is_built_from_the_result_as_text() -> None:
    drawn = draw(spec(LIST), BOARD)
    assert drawn["type"] == "list" and drawn["more"] == 0
    assert drawn["items"][0] == {
        "title": "Write release notes",
        "subtitle": "todo",
        "buttons": [
            {"label": "Done", "message": "Mark Write release notes as done", "tool": "done"}
        ],
    }


def test_hostile_values_stay_text_and_every_size_is_bounded() -> None:
    rows = [{"title": HOSTILE * 50, "status": {"nested": [1, 2]}} for _ in range(MAX_ITEMS + 7)]
    drawn = draw(spec(LIST), {"tasks": rows})
    assert len(drawn["items"]) == MAX_ITEMS and drawn["more"] == 7
    first = drawn["items"][0]
    assert first["title"].startswith(HOSTILE) and len(first["title"]) == MAX_TEXT_CHARS
    assert first["subtitle"] == '{"nested":[1,2]}'  # not text: shown as JSON, never as markup
    assert len(first["buttons"][0]["message"]) <= MAX_MESSAGE_CHARS
    # Not a list where the view wants one: an empty view, not an error.
    assert draw(spec(LIST), {"tasks": "nope"})["items"] == []
    assert draw(spec(LIST), "a string")["items"] == []


def test_a_table_keyvalue_and_card_are_built_from_their_paths() -> None:
    columns = [{"label": "Task", "value": "@.title"}, {"label": "Who", "value": "@.assignee"}]
    table = {"type": "table", "title": "$.name", "items": "$.tasks", "columns": columns,
             "item": {"buttons": [{"label": "Open", "message": "Open {@.id}"}]}}  # fmt: skip
    drawn = draw(spec(table), {"name": "Board", **BOARD})
    assert drawn["title"] == "Board" and drawn["columns"] == ["Task", "Who"]
    assert drawn["items"][1] == {"cells": ["Fix login bug", "Kenji"],
                                 "buttons": [{"label": "Open", "message": "Open t2"}]}  # fmt: skip
    fields = [{"label": "Count", "value": "$.count"}, {"label": "Missing", "value": "$.none"}]
    keyvalue = {"type": "keyvalue", "fields": fields}
    assert draw(spec(keyvalue), {"count": 3})["fields"] == [
        {"label": "Count", "value": "3"}, {"label": "Missing", "value": ""}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("src", "hosts", "shown"),
    [
        ("https://cdn.example.com/a.png", ("https://cdn.example.com",), True),
        ("https://CDN.example.com:443/a.png", ("https://cdn.example.com",), True),
        ("https://tracker.example.net/pixel.gif?u=1", ("https://cdn.example.com",), False),
        ("http://cdn.example.com/a.png", ("https://cdn.example.com",), False),
        ("https://cdn.example.com@tracker.net/a.png", ("https://cdn.example.com",), False),
        ("https://user:pw@cdn.example.com/a.png", ("https://cdn.example.com",), False),
        ("/static/logo.png", ("self",), True),
        ("/static/logo.png", ("https://cdn.example.com",), False),
        ("//tracker.net/pixel.gif", ("self",), False),
        ("/\\tracker.net/pixel.gif", ("self",), False),
        ("javascript:alert(1)", ("self",), False),
        ("data:image/svg+xml,<svg onload=alert(1)>", ("self",), False),
        ("https://cdn.example.com/a b.png", ("https://cdn.example.com",), False),
        (42, ("self",), False),
    ],
)
def test_an_image_is_shown_only_from_a_host_the_view_allows(
    src: Any, hosts: tuple[str, ...], shown: bool
) -> None:
    assert (image_address(src, hosts) == src) is shown
    view = spec(
        {"type": "image", "image": {"src": "$.u", "alt": "$.a"}, "image_hosts": list(hosts)}
    )
    image = draw(view, {"u": src, "a": "A chart"})["image"]
    assert image == ({"src": src, "alt": "A chart"} if shown else {"alt": "A chart"})


# ---- carried with the call, drawn by the console ---------------------------------------------


def hostile_board() -> dict[str, Any]:
    board = copy.deepcopy(BOARD)
    board["tasks"][0]["title"] = HOSTILE
    return board


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_the_view_travels_in_the_result_event_and_the_snapshot_and_the_console_escapes_it(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    assert harness.answer(call, hostile_board()).status_code == 200
    harness.finish(conv)
    (settled,) = [
        c for c in harness.snapshot(conv)["calls"] if c["toolCallId"] == call["toolCallId"]
    ]
    assert settled["outcome"] == {"output": hostile_board()}  # the view is beside it
    view = settled["view"]
    assert view["type"] == "list" and view["items"][0]["title"] == HOSTILE
    assert view["items"][0]["buttons"] == [{"label": "Follow up", "tool": "create_task",
        "message": f"Add a task to follow up on {HOSTILE}"}]  # fmt: skip
    results = [d for name, d in harness.events(conv) if name == "TOOL_CALL_RESULT"]
    assert results[-1]["view"] == view
    # The widget page lets images come only from what the agent's views allow: none here.
    page = harness.http.get("/widget/planner")
    assert "img-src 'self' data:;" in page.headers["content-security-policy"]

    operator = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    html = operator.http.get(f"/console/conversations/{conv.id}").text
    assert 'data-part="result-view"' in html and "Follow up" in html
    assert HOSTILE not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_the_widget_page_allows_images_from_the_views_hosts_only(
    tmp_path: Path, made: list[Harness]
) -> None:
    from tests.support.harness import write_agent

    hosts = ["self", "https://CDN.example.com"]
    view = {"type": "card", "fields": [{"label": "N", "value": "$.n"}],
            "image": {"src": "$.u", "alt": "$.a"}, "image_hosts": hosts}  # fmt: skip
    agents = tmp_path / "agents"
    write_agent(agents, planner(view=view))
    h = Harness(tmp_path, agents)
    made.append(h)
    csp = h.http.get("/widget/planner").headers["content-security-policy"]
    assert "img-src 'self' data: https://cdn.example.com;" in csp


# ---- MCP tools: a view in a server's overrides, over its structured content -----------------


def test_an_mcp_tools_view_reads_its_structured_content() -> None:
    from hostcall.blocks.mcp.binding import ListedTool, McpBinding, frozen_entries
    from hostcall.policies import visible_view

    columns = [{"label": "Name", "value": "@.name"}, {"label": "Email", "value": "@.email"}]
    view = {"type": "table", "items": "$.structuredContent.contacts", "columns": columns}
    listed = [ListedTool("find", "Finds contacts.", input_schema={"type": "object"})]
    binding = McpBinding("crm", ("find",), {"find": {"view": view}}, {})
    entries, problems = frozen_entries(binding, listed, protected=False)
    assert problems == []
    found, problems = parse_tool(entries[0], "run: tool #1")
    assert problems == [] and found is not None and found.view is not None
    contacts = [{"name": HOSTILE, "email": "a@x.io"}]
    output = {"content": [{"type": "text", "text": "1 contact"}],
              "structuredContent": {"contacts": contacts}}  # fmt: skip
    assert visible_view(found, {"output": output}) == {
        "type": "table", "columns": ["Name", "Email"], "more": 0,
        "items": [{"cells": [HOSTILE, "a@x.io"]}],
    }  # fmt: skip
    assert visible_view(found, {"error": {"code": "block_failed", "message": "x"}}) is None


def test_a_bad_view_in_an_mcp_servers_overrides_is_refused_at_load(tmp_path: Path) -> None:
    from tests.unit.test_mcp_definitions import agent_problems

    pie = {"find": {"view": {"type": "pie"}}}
    problems = agent_problems(tmp_path, {"kind": "mcp", "server": "crm", "tools": ["find"],
                                         "overrides": pie})  # fmt: skip
    assert any("'view.type' must be one of card, list" in p and "find" in p for p in problems), (
        problems
    )
    # A view is a tool's own: not a default for every tool of a server.
    problems = agent_problems(tmp_path, {"kind": "mcp", "server": "crm", "tools": ["find"],
                                         "view": {"type": "pie"}})  # fmt: skip
    assert any("unknown key 'view'" in p for p in problems), problems


# ---- a server-side tool: drawn from what the model may read --------------------------------


def test_a_server_side_tools_view_is_drawn_from_its_redacted_result(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    from tests.unit.test_server_tools import ask, build, fetch_tool

    view = {"type": "keyvalue", "title": "$.body.path",
            "fields": [{"label": "Status", "value": "$.status"},
                       {"label": "Path", "value": "$.body.path"}]}  # fmt: skip
    redact = [{"name": "hide path", "on": "output", "action": "redact",
               "when": {"path": "/status", "op": "equals", "value": 200},
               "fields": ["/body/path"]}]  # fmt: skip
    url = f"{target.base}/echo/{{{{ $fromAI.what }}}}"
    h = build(tmp_path, target, fetch_tool(url, view=view, guardrails=redact))
    made.append(h)
    conv, snap = ask(h, "fetch reports")
    [call] = snap["calls"]
    assert call["state"] == "answered"
    assert call["view"] == {"type": "keyvalue", "title": "[redacted]", "fields": [
        {"label": "Status", "value": "200"}, {"label": "Path", "value": "[redacted]"}
    ]}  # fmt: skip
    assert "/echo/reports" not in json.dumps(call["view"])
    [result] = [d for name, d in h.events(conv) if name == "TOOL_CALL_RESULT"]
    assert result["view"] == call["view"]
