"""MCP servers in _platform.json and in agent files: what is refused at load, and how; the
bounded form of a result's content (hostcall/blocks/mcp/)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp_types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from hostcall.agents import load_agents
from hostcall.blocks.mcp.binding import ListedTool, McpBinding, exposed_name, frozen_entries
from hostcall.blocks.mcp.results import content_output, error_text, result_schema
from hostcall.errors import AgentConfigError
from hostcall.platform import Environment, load_platform
from hostcall.policies import ApprovalReason, approval_reason
from hostcall.schemas import CompiledSchema
from hostcall.tools import parse_tool
from tests.support.harness import write_agent

ROOT = Path(__file__).resolve().parents[2]

SERVERS = {
    "crm": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": {"env": "CRM_TOKEN"}}},
    "files": {"command": ["python", "-m", "files"], "env": {"ROOT": {"env": "FILES_ROOT"}}},
}
ENVIRON = {"CRM_TOKEN": "Bearer abc-123-secret", "FILES_ROOT": "/srv/files"}


def platform_problems(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    write_agent(tmp_path, data, name="_platform.json")
    with pytest.raises(AgentConfigError) as caught:
        load_platform(tmp_path, ENVIRON)
    return caught.value.problems


def agent_problems(tmp_path: Path, *tools: dict[str, Any], rules: list[Any] = ()) -> list[str]:
    write_agent(tmp_path, {
        "environments": {"dev": {"mcp_servers": ["crm"]}},
        "allowed_env": ["CRM_TOKEN", "FILES_ROOT"],
        "mcp_servers": SERVERS,
    }, name="_platform.json")  # fmt: skip
    write_agent(tmp_path, {"id": "ops", "environment": "dev", "tools": list(tools),
                           "model": {"kind": "scripted", "rules": list(rules)}})  # fmt: skip
    try:
        load_agents(tmp_path, ENVIRON)
    except AgentConfigError as exc:
        return exc.problems
    return []


def test_declared_servers_are_read_with_their_secrets_kept_out_of_their_repr(
    tmp_path: Path,
) -> None:
    write_agent(tmp_path, {
        "environments": {"dev": {"mcp_servers": ["crm", "files"]}},
        "allowed_env": ["CRM_TOKEN", "FILES_ROOT"],
        "mcp_servers": SERVERS,
    }, name="_platform.json")  # fmt: skip
    platform = load_platform(tmp_path, ENVIRON)
    crm, files = platform.mcp_servers["crm"], platform.mcp_servers["files"]
    assert crm.transport == "http" and crm.headers == {"Authorization": "Bearer abc-123-secret"}
    assert files.transport == "stdio" and files.command == ("python", "-m", "files")
    assert files.env == {"ROOT": "/srv/files"}
    assert files.max_message_mb == 16  # what one message read from the command may weigh
    assert platform.environments["dev"].mcp_servers == {"crm", "files"}
    assert "secret" not in repr(platform)
    assert crm.secrets() == ["Bearer abc-123-secret", "abc-123-secret"]


def test_bad_server_declarations_are_refused_one_line_each(tmp_path: Path) -> None:
    problems = platform_problems(tmp_path, {
        "environments": {"dev": {"mcp_servers": ["crm", "ghost"]}},
        "allowed_env": ["CRM_TOKEN"],
        "mcp_servers": {
            "crm": {"url": "ftp://127.0.0.1/mcp"},
            "both": {"url": "http://127.0.0.1:1/mcp", "command": ["x"]},
            "creds": {"url": "http://user:pw@127.0.0.1:1/mcp"},
            "keys": {"url": "http://127.0.0.1:1/mcp",
                     "headers": {"X": {"env": "HOSTCALL_SECRET_KEYS"}}},
            "unlisted": {"command": ["x"], "env": {"T": {"env": "OTHER"}}},
            "empty": {"command": []},
            "unbounded": {"command": ["x"], "max_message_mb": 0},
        },
    })  # fmt: skip
    where = "_platform.json: mcp server"
    assert problems == [
        f"{where} 'crm': 'url' must be an absolute http:// or https:// URL",
        f"{where} 'both': must be {{'url': 'http://host:port/path', 'headers': {{...}}, "
        "'max_message_mb': 16} or "
        "{'command': ['program', 'arg', ...], 'env': {...}, 'cwd': PATH, 'max_message_mb': 16}",
        f"{where} 'creds': credentials in the URL are not allowed; use 'headers'",
        f"{where} 'keys': header 'X': environment variable 'HOSTCALL_SECRET_KEYS' is one of "
        "the server's own settings (HOSTCALL_*), never given to an agent",
        f"{where} 'unlisted': env 'T': environment variable 'OTHER' is not listed in "
        "'allowed_env' of _platform.json",
        f"{where} 'empty': 'command' must list the program and its arguments",
        f"{where} 'unbounded': 'max_message_mb' must be a number above 0, at most 1024",
        "_platform.json: environment 'dev': MCP server 'ghost' is not declared in 'mcp_servers'",
    ]


def test_an_agent_using_a_server_its_environment_does_not_allow_is_refused(
    tmp_path: Path,
) -> None:
    assert agent_problems(tmp_path, {"kind": "mcp", "server": "files", "tools": "all"}) == [
        "ops.json: MCP server 'files' is not allowed in environment 'dev' "
        "(its 'mcp_servers' in _platform.json: crm)"
    ]
    assert agent_problems(tmp_path, {"kind": "mcp", "server": "nope", "tools": ["a"]}) == [
        "ops.json: MCP server 'nope' is not declared in _platform.json's 'mcp_servers' (crm, files)"
    ]


def test_bad_bindings_are_refused_naming_the_server_and_the_tool(tmp_path: Path) -> None:
    problems = agent_problems(
        tmp_path,
        {"kind": "mcp", "server": "crm", "tools": [], "color": "red"},
        {"kind": "mcp", "server": "crm", "tools": ["lookup"], "effect": "maybe",
         "overrides": {"lookup": {"max_calls_per_pass": 0, "colour": 1}, "other": {}}},
        {"kind": "mcp", "server": "crm", "tools": ["a"], "overrides": {"a": {"name": "no spaces"}}},
    )  # fmt: skip
    where = "ops.json: MCP server 'crm'"
    assert problems == [
        f"{where}: unknown key 'color'",
        f"{where}: 'tools' must list the server's tool names, or be \"all\"",
        f"{where}: 'overrides' names tools not chosen in 'tools': ['other']",
        f"{where}: overrides.lookup: unknown key 'colour'",
        f"{where}: tool 'lookup': 'effect' must be 'read' or 'write' (got 'maybe')",
        f"{where}: tool 'lookup': 'max_calls_per_pass' must be a whole number, 1 or more",
        f"{where}: tool 'no spaces': 'name' must start with a letter or _ and hold only "
        "letters, digits, _ and - (at most 64 characters)",
    ]


def test_rules_may_name_chosen_tools_and_any_tool_of_an_all_binding(tmp_path: Path) -> None:
    rule = {"match": "x", "tool": "find", "arguments": {}, "reply": "ok"}
    chosen = {"kind": "mcp", "server": "crm", "tools": ["lookup"],
              "overrides": {"lookup": {"name": "find"}}}  # fmt: skip
    assert agent_problems(tmp_path, chosen, rules=[rule]) == []
    assert agent_problems(tmp_path, {**chosen, "overrides": {}}, rules=[rule]) == [
        "ops.json: model: rule #1: calls tool 'find', which the agent does not define"
    ]
    assert agent_problems(tmp_path, {"kind": "mcp", "server": "crm", "tools": "all"},
                          rules=[rule]) == []  # fmt: skip


def test_freezing_takes_the_servers_schemas_hints_and_the_files_overrides() -> None:
    listed = [
        ListedTool("get.contact", "Gets one.", "Get a contact", {"type": "object"},
                   {"type": "object", "properties": {"id": {"type": "string"}}}, read_only=True),
        ListedTool("wipe", "Deletes all.", input_schema={"type": "object"}),
        ListedTool("broken", "Bad schema.", input_schema={"type": "nonsense"}),
    ]  # fmt: skip
    binding = McpBinding("crm", None, {"wipe": {"approval": "always"}}, {"deadline_seconds": 9})
    entries, problems = frozen_entries(binding, listed, protected=False)
    assert [e["name"] for e in entries] == ["get_contact", "wipe"]
    first, second = entries
    assert first["tool"] == "get.contact" and first["effect"] == "read"
    assert first["effect_by_hint"] is True  # the server's claim, not the file's
    assert first["title"] == "Get a contact" and "output_schema" in first
    assert second["effect"] == "write" and second["approval"] == "always"
    assert "effect_by_hint" not in second
    assert all(e["deadline_seconds"] == 9 for e in entries)
    assert len(problems) == 1 and "tool 'broken'" in problems[0]
    chosen = McpBinding("crm", ("gone",), {}, {})
    assert frozen_entries(chosen, listed, protected=False) == (
        [],
        ["the server lists no tool 'gone'"],
    )


@pytest.mark.parametrize(
    ("hints", "said", "protected", "effect"),
    [
        ({"read_only": True}, None, False, "read"),
        ({"read_only": True}, None, True, "write"),  # a claim no person checked
        ({"read_only": True, "destructive": True}, None, False, "write"),  # destructive wins
        ({"read_only": True, "destructive": True}, None, True, "write"),
        ({}, None, False, "write"),
        ({"read_only": True, "destructive": True}, "read", True, "read"),  # the file decides
        ({"read_only": True}, "write", False, "write"),
    ],
)
def test_an_mcp_tools_effect_is_the_files_then_its_honest_hints_never_in_protected(
    hints: dict[str, bool], said: str | None, protected: bool, effect: str
) -> None:
    overrides = {"t": {"effect": said}} if said else {}
    binding = McpBinding("crm", ("t",), overrides, {})
    [entry], _ = frozen_entries(binding, [ListedTool("t", "A tool.", **hints)], protected=protected)
    assert entry["effect"] == effect
    assert entry.get("effect_by_hint", False) is (said is None and effect == "read")


def test_a_read_by_the_servers_hint_alone_still_asks_a_person_where_protected() -> None:
    """A run frozen in an open environment keeps its entries; should the operator protect
    the environment meanwhile, the server's claim is not taken there either."""
    hinted, _ = parse_tool({"kind": "mcp", "name": "wipe", "description": "Wipes.",
                            "server": "crm", "tool": "wipe", "effect": "read",
                            "effect_by_hint": True}, "t")  # fmt: skip
    said, _ = parse_tool({"kind": "mcp", "name": "look", "description": "Looks.",
                          "server": "crm", "tool": "look", "effect": "read"}, "t")  # fmt: skip
    assert hinted is not None and said is not None
    protected, open_ = Environment("prod", protected=True), Environment("dev")
    assert approval_reason(hinted, protected, granted=False, hits=()) is (
        ApprovalReason.PROTECTED_WRITE
    )
    assert approval_reason(said, protected, granted=False, hits=()) is None
    assert approval_reason(hinted, open_, granted=False, hits=()) is None
    assert exposed_name("9lives/now") == "_9lives_now"


def test_content_is_bounded_described_and_the_cut_is_told() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    content = [
        TextContent(type="text", text="é" * 6),  # 12 bytes
        ImageContent(type="image", data=png, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=TextResourceContents(
            uri="file:///a.md", mime_type="text/markdown", text="abcdefgh")),
        EmbeddedResource(type="resource", resource=BlobResourceContents(
            uri="file:///b.bin", blob=base64.b64encode(b"12345").decode())),
        ResourceLink(type="resource_link", uri="file:///c.csv", name="c.csv"),
    ]  # fmt: skip
    output = content_output(content, {"n": 1}, limit=15)
    assert output == {
        "content": [
            {"type": "text", "text": "é" * 6},
            {"type": "image", "text": "", "mimeType": "image/png", "bytes": 100},
            {"type": "resource", "text": "abc", "uri": "file:///a.md", "mimeType": "text/markdown"},
            {"type": "resource", "text": "", "uri": "file:///b.bin", "bytes": 5},
            {"type": "resource_link", "text": "", "uri": "file:///c.csv", "name": "c.csv"},
        ],
        "structuredContent": {"n": 1},
        "truncated": {"bytes": 5, "note": "5 bytes of the tool's text were left out: the "
                      "result is longer than this tool's limit of 15 bytes."},
    }  # fmt: skip
    # A cut never splits a character.
    assert content_output([TextContent(type="text", text="éé")], None, limit=3)["content"] == [
        {"type": "text", "text": "é"}
    ]
    assert error_text([TextContent(type="text", text="  bad\n input ")]) == "bad input"
    assert error_text([]) == "the tool reported an error without a message"


def test_the_mcp_example_of_docs_agents_md_loads_with_its_platform_file(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S)
              if b.lstrip().startswith("{") and '"mcp' in b]  # fmt: skip
    [platform] = [b for b in blocks if "mcp_servers" in b and "environments" in b]
    [support] = [b for b in blocks if b.get("id") == "support"]
    del platform["connections"]  # they read a secrets file this machine does not have
    write_agent(tmp_path, platform, name="_platform.json")
    write_agent(tmp_path, support)
    environ = {"CRM_TOKEN": "Bearer t", "FILES_TOKEN": "f", "HOLIDAYS_KEY": "h"}
    agent = load_agents(tmp_path, environ)["support"]
    assert [(b.server, b.tools) for b in agent.mcp] == [
        ("crm", ("lookup_contact", "create_contact")),
        ("files", None),
    ]
    # In production, only crm is allowed: the same file is refused there.
    write_agent(tmp_path, {**support, "environment": "production"})
    with pytest.raises(AgentConfigError) as caught:
        load_agents(tmp_path, environ)
    assert caught.value.problems == [
        "support.json: MCP server 'files' is not allowed in environment 'production' "
        "(its 'mcp_servers' in _platform.json: crm)"
    ]


def test_every_result_has_a_first_text_and_matches_the_schema_its_run_froze() -> None:
    """``result.content[0].text`` (docs/agents.md) holds for whatever a server sends."""
    nested = {  # as pydantic writes a model that holds another: a $ref into its own $defs
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"owner": {"$ref": "#/$defs/Person"}},
        "required": ["owner"],
        "$defs": {"Person": {"type": "object", "properties": {"email": {"type": "string"}},
                             "required": ["email"]}},
    }  # fmt: skip
    png = base64.b64encode(b"\x89PNG").decode()
    cases: list[tuple[list[Any], Any, Any]] = [
        ([], None, None),
        ([], {"owner": {"email": "a@b.c"}}, nested),
        ([TextContent(type="text", text='{"result": "hi"}')], {"result": "hi"},
         {"type": "object", "properties": {"result": {"type": "string"}}}),
        ([ImageContent(type="image", data=png, mime_type="image/png")], None, None),
        ([ResourceLink(type="resource_link", uri="file:///c.csv", name="c.csv")], None, None),
    ]  # fmt: skip
    for content, structured, declared in cases:
        output = content_output(content, structured, limit=1024)
        assert isinstance(output["content"][0]["text"], str), output
        assert CompiledSchema(result_schema(declared)).problems(output) == [], output
    # Nothing sent but structured content: its JSON is the first text, as the spec asks.
    assert content_output([], {"n": 1}, limit=99)["content"] == [
        {"type": "text", "text": '{"n": 1}'}
    ]
    # The server's own schema still checks its structured content, $refs and all.
    wrong = content_output([], {"owner": {"email": 7}}, limit=1024)
    assert CompiledSchema(result_schema(nested)).problems(wrong) != []
    assert (
        CompiledSchema(result_schema(nested)).problems({"content": [{"type": "text", "text": ""}]})
        != []
    )


def test_a_rule_reading_a_field_no_mcp_result_has_is_refused_at_load(tmp_path: Path) -> None:
    def rule(reply: str, tool: str = "echo") -> dict[str, Any]:
        return {"match": "x", "tool": tool, "arguments": {}, "reply": reply}

    every = {"kind": "mcp", "server": "crm", "tools": "all"}
    chosen = {"kind": "mcp", "server": "crm", "tools": ["lookup"]}
    good = "{{ result.content[0].text }} {{ result.structuredContent.anything }}"
    assert agent_problems(tmp_path, every, rules=[rule(good)]) == []
    assert agent_problems(tmp_path, chosen, rules=[rule(good, "lookup")]) == []
    where = "ops.json: model: rule #1: 'reply'"
    assert agent_problems(tmp_path, every, rules=[rule("{{ result.content[0].txt }}")]) == [
        f"{where}: reads result.content[0].txt: the output schema has no property 'txt' here "
        "(it has: bytes, description, mimeType, name, text, type, uri) (tool 'echo')"
    ]
    assert agent_problems(tmp_path, chosen, rules=[rule("{{ result.email }}", "lookup")]) == [
        f"{where}: reads result.email: the output schema has no property 'email' here "
        "(it has: content, structuredContent, truncated) (tool 'lookup')"
    ]


def test_an_output_guardrail_reading_no_field_of_an_mcp_result_is_refused(
    tmp_path: Path,
) -> None:
    """Written for a structured result at the top (``/email``), it would never match."""
    hide = {
        "name": "hide",
        "on": "output",
        "action": "redact",
        "when": {"path": "/email", "op": "exists"},
        "fields": ["/structuredContent/email"],
    }
    block = {
        "name": "stop",
        "on": "output",
        "action": "block",
        "when": {"path": "/content/0/text", "op": "contains", "value": "secret"},
    }
    binding = {"kind": "mcp", "server": "crm", "tools": ["lookup"],
               "overrides": {"lookup": {"guardrails": [hide, block]}}}  # fmt: skip
    assert agent_problems(tmp_path, binding) == [
        "ops.json: MCP server 'crm': tool 'lookup': guardrail 'hide': '/email' is no field of "
        "an MCP result (it has /content, /structuredContent and /truncated)"
    ]


def test_approval_never_is_refused_for_an_mcp_tool_not_said_to_read_where_protected(
    tmp_path: Path,
) -> None:
    write_agent(tmp_path, {
        "environments": {"prod": {"protected": True, "mcp_servers": ["crm"]}},
        "allowed_env": ["CRM_TOKEN"],
        "mcp_servers": {"crm": SERVERS["crm"]},
    }, name="_platform.json")  # fmt: skip
    bindings = [
        {"kind": "mcp", "server": "crm", "tools": "all", "approval": "never"},
        {"kind": "mcp", "server": "crm", "tools": ["a", "b"], "approval": "never",
         "overrides": {"a": {"effect": "read"}}},
    ]  # fmt: skip
    write_agent(tmp_path, {"id": "ops", "environment": "prod", "tools": bindings})
    with pytest.raises(AgentConfigError) as caught:
        load_agents(tmp_path, ENVIRON)
    refused = "'approval': 'never' is refused in the protected environment 'prod'"
    assert [p.split(": 'approval'")[0] for p in caught.value.problems] == [
        "ops.json: MCP server 'crm': its tools",
        "ops.json: MCP server 'crm': tool 'b'",
    ]
    assert all(refused in p for p in caught.value.problems)
