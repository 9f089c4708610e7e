"""Page tools: a page's own tools (WebMCP's ``registerTool``, an AG-UI client's ``tools``),
admitted only by an agent whose file has a ``page_tools`` block, checked like an agent file's
tools (a refusal names the tool and the reason, and nothing of it is kept), stored with their
surface on both stores, frozen by a run with their digest, and called only on a surface that
holds the same registration."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents, parse_agent
from hostcall.errors import AgentConfigError
from tests.support.databases import fresh_schema
from tests.support.harness import Conv, Harness, write_agent
from tests.unit.test_bad_input import assert_error
from tests.unit.test_embedding import widget_config

NOTE_OUTPUT = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
BOARD: dict[str, Any] = {
    "id": "board",
    "name": "Board",
    "page_tools": {
        "allow": ["add_note", "read_*"],
        "max_tools": 3,
        "max_description_chars": 40,
        "max_schema_bytes": 300,
        "tools": {"add_note": {"output": NOTE_OUTPUT}},
    },
    "tools": [
        {
            "name": "sizes",
            "description": "The sizes in stock.",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "effect": "read",
        }
    ],
    "model": {
        "kind": "scripted",
        "rules": [
            {"match": "add a note", "tool": "add_note", "arguments": {"text": "hi"},
             "reply": "Noted: {{ result.ok }}", "error_reply": "failed {{ error.code }}"},
            {"match": "read the page", "tool": "read_page", "arguments": {},
             "reply": "Read {{ result.title }}", "error_reply": "failed {{ error.code }}"},
        ],
        "fallback": "Ask me.",
    },
}  # fmt: skip
NOTE = {
    "name": "add_note",
    "title": "Add a note",
    "description": "Adds a note to the board.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "annotations": {"readOnlyHint": False, "untrustedContentHint": False},
}
READ = {
    "name": "read_page",
    "description": "Reads the page.",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": True, "untrustedContentHint": True},
}
A, B = "tab-a-0000", "tab-b-0000"


def closed() -> dict[str, Any]:
    data = {k: v for k, v in BOARD.items() if k != "page_tools"}
    data["model"] = {"kind": "scripted", "rules": [], "fallback": "no"}
    return {**data, "id": "closed"}


def digest(tool: dict[str, Any]) -> str:
    """The contract's digest, computed here apart from the server's."""
    hints = tool.get("annotations") or {}
    signed = {
        "name": tool["name"],
        "description": tool["description"],
        "inputSchema": tool.get("inputSchema") or {"type": "object"},
        "annotations": {
            "readOnlyHint": hints.get("readOnlyHint", False),
            "untrustedContentHint": hints.get("untrustedContentHint", False),
        },
    }
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest, tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, BOARD)
    write_agent(agents_dir, closed())
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if request.param == "postgres" else None
        h = Harness(tmp_path, agents_dir, **({"database_url": url} if url else {}))
        stack.callback(h.stop)
        yield h


@pytest.fixture
def board(tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, BOARD)
    write_agent(agents_dir, closed())
    h = Harness(tmp_path, agents_dir)
    yield h
    h.stop()


def offer(h: Harness, conv: Conv, surface: str, page_tools: Any, tools: Any = ()) -> Any:
    body = {"surfaceId": surface, "tools": list(tools), "pageTools": page_tools}
    return h.http.post(f"/api/conversations/{conv.id}/capabilities", json=body, headers=conv.auth)


def held(h: Harness, conv: Conv, surface: str) -> list[tuple[str, str]]:
    found = h.call(h.runtime.store.get_surface, conv.id, surface)
    return [] if found is None else [(t["name"], t["digest"]) for t in found.page_tools]


# ---- the agent file ----------------------------------------------------------------------


def test_a_page_tools_block_loads_and_its_policies_are_read() -> None:
    agent, problems = parse_agent(BOARD, "board.json", {})
    assert problems == []
    assert agent is not None and agent.page_tools is not None
    assert agent.page_tools.allows("read_anything") and not agent.page_tools.allows("delete")
    assert agent.page_tools.to_wire() == {
        "allow": ["add_note", "read_*"],
        "maxTools": 3,
        "maxDescriptionChars": 40,
        "maxSchemaBytes": 300,
    }


@pytest.mark.parametrize(
    ("block", "mention"),
    [
        ({}, "'allow' must list"),
        ({"allow": []}, "'allow' must list"),
        ({"allow": ["bad name"]}, "'allow' must list"),
        ({"allow": ["a*b"]}, "'allow' must list"),
        ({"allow": ["a"], "max_tools": 65}, "'max_tools' must be a whole number from 1 to 64"),
        ({"allow": ["a"], "max_description_chars": 0}, "from 1 to 4096"),
        ({"allow": ["a"], "max_schema_bytes": 70000}, "from 1 to 65536"),
        ({"allow": ["a"], "trust_read_hints": "yes"}, "'trust_read_hints' must be true or false"),
        ({"allow": ["a"], "admitted": []}, "unknown key 'admitted'"),
        ({"allow": ["a"], "tools": {"b": {}}}, "tools.b: names no tool that 'allow' admits"),
        ({"allow": ["a"], "tools": {"a": {"colour": 1}}}, "tools.a: unknown key 'colour'"),
        ({"allow": ["a"], "tools": {"a": {"effect": "delete"}}}, "'effect' must be 'read'"),
        ({"allow": ["a"], "tools": {"a": {"output": {"type": "string"}}}}, '"type": "object"'),
        ("all", "'page_tools' must be an object"),
    ],
)
def test_a_bad_page_tools_block_is_refused_naming_the_key(block: Any, mention: str) -> None:
    agent, problems = parse_agent({**BOARD, "page_tools": block}, "board.json", {})
    assert agent is None
    assert any(mention in p for p in problems), problems


def test_hostcall_check_refuses_a_never_asked_page_tool_in_a_protected_environment(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, {"environments": {"prod": {"protected": True}}}, name="_platform.json")
    data = {**closed(), "environment": "prod",
            "page_tools": {"allow": ["a"], "tools": {"a": {"approval": "never"}}}}  # fmt: skip
    write_agent(directory, data)
    with pytest.raises(AgentConfigError) as raised:
        load_agents(directory, {})
    assert any("tools.a: 'approval': 'never' is refused" in p for p in raised.value.problems)


def test_the_widget_config_carries_the_page_tools_rule_or_null(board: Harness) -> None:
    config = widget_config(board.http.get("/widget/board").text)
    assert config["pageTools"] == {
        "allow": ["add_note", "read_*"],
        "maxTools": 3,
        "maxDescriptionChars": 40,
        "maxSchemaBytes": 300,
    }
    assert widget_config(board.http.get("/widget/closed").text)["pageTools"] is None


# ---- admission -----------------------------------------------------------------------------


def test_admitted_page_tools_are_answered_with_their_digest_and_kept_on_both_stores(
    both: Harness,
) -> None:
    h = both
    conv = h.conversation("board")
    r = offer(h, conv, A, [NOTE, READ], tools=["sizes"])
    assert r.status_code == 200, r.text
    assert r.json() == {
        "surfaceId": A,
        "tools": ["sizes"],
        "pageTools": [
            {"name": "add_note", "digest": digest(NOTE)},
            {"name": "read_page", "digest": digest(READ)},
        ],
        "refused": [],
    }
    assert held(h, conv, A) == [("add_note", digest(NOTE)), ("read_page", digest(READ))]
    # The title is the page's, not the model's: it does not change the registration.
    assert digest({**NOTE, "title": "Other"}) == digest(NOTE)
    h.restart()
    assert held(h, conv, A) == [("add_note", digest(NOTE)), ("read_page", digest(READ))]
    # Offered again without them (the page unregistered them): they are gone.
    assert offer(h, conv, A, [READ]).json()["pageTools"] == [
        {"name": "read_page", "digest": digest(READ)}
    ]
    assert held(h, conv, A) == [("read_page", digest(READ))]


# Nested 18 deep in under 300 bytes: past the depth a schema may have, not its size.
NOT: dict[str, Any] = {}
for _ in range(17):
    NOT = {"not": NOT}
DEEP = {"type": "object", "not": NOT}


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        ({**NOTE, "name": "delete_board"}, "not_allowed"),
        ({**NOTE, "name": "sizes"}, "shadowed"),
        ({**NOTE, "name": "read page"}, "bad_name"),
        ({**NOTE, "name": "read_" + "x" * 70}, "bad_name"),
        ({**NOTE, "name": ""}, "bad_name"),
        ({**NOTE, "inputSchema": {"type": "array"}}, "bad_schema"),
        ({**NOTE, "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}}},
         "bad_schema"),
        ({**NOTE, "inputSchema": {"type": "object", "properties": {
            "a": {"$ref": "https://evil.example/schema.json"}}}}, "bad_schema"),
        ({**NOTE, "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "pattern": "^(a+)\\1$"}}}}, "bad_schema"),
        ({**NOTE, "inputSchema": {"type": "object", "required": ["b"], "properties": {}}},
         "bad_schema"),
        ({**NOTE, "inputSchema": DEEP}, "bad_schema"),
        ({**NOTE, "inputSchema": {"type": "object", "description": "x" * 300}}, "too_large"),
        ({**NOTE, "description": "x" * 41}, "description_too_long"),
    ],
)  # fmt: skip
def test_a_refused_page_tool_is_named_with_its_reason_and_never_kept(
    board: Harness, tool: dict[str, Any], reason: str
) -> None:
    h = board
    conv = h.conversation("board")
    r = offer(h, conv, A, [tool, READ])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["refused"] == [{"name": tool["name"], "reason": reason}]
    # Nothing else was lost: the other tool is admitted and kept.
    assert body["pageTools"] == [{"name": "read_page", "digest": digest(READ)}]
    assert held(h, conv, A) == [("read_page", digest(READ))]


def test_past_max_tools_the_rest_are_refused_too_many(board: Harness) -> None:
    conv = board.conversation("board")
    tools = [{**READ, "name": f"read_{i}"} for i in range(5)]
    body = offer(board, conv, A, tools).json()
    assert [t["name"] for t in body["pageTools"]] == ["read_0", "read_1", "read_2"]
    assert body["refused"] == [{"name": "read_3", "reason": "too_many"},
                               {"name": "read_4", "reason": "too_many"}]  # fmt: skip
    assert [n for n, _ in held(board, conv, A)] == ["read_0", "read_1", "read_2"]


def test_an_agent_without_a_page_tools_block_admits_none(board: Harness) -> None:
    conv = board.conversation("closed")
    body = offer(board, conv, A, [NOTE, READ], tools=["sizes"]).json()
    assert body["pageTools"] == []
    assert body["refused"] == [{"name": "add_note", "reason": "not_admitted"},
                               {"name": "read_page", "reason": "not_admitted"}]  # fmt: skip
    assert held(board, conv, A) == []
    # Its own tools are handled as ever.
    assert body["tools"] == ["sizes"]


@pytest.mark.parametrize(
    ("page_tools", "mention"),
    [
        ({"add_note": NOTE}, "'pageTools' must be a list"),
        (["add_note"], "pageTools[0] must be a JSON object"),
        ([{**NOTE, "name": 5}], "'name' and 'description' must be strings"),
        ([{**NOTE, "inputSchema": "object"}], "'inputSchema' and 'annotations' objects"),
        ([{**NOTE, "annotations": {"readOnlyHint": "yes"}}], "must be true or false"),
        ([NOTE, NOTE], "names 'add_note' twice"),
    ],
)
def test_a_malformed_capabilities_body_is_a_400_and_the_surface_keeps_its_tools(
    board: Harness, page_tools: Any, mention: str
) -> None:
    conv = board.conversation("board")
    assert offer(board, conv, A, [READ]).status_code == 200
    assert_error(offer(board, conv, A, page_tools), 400, "bad_request", mention)
    assert held(board, conv, A) == [("read_page", digest(READ))]
