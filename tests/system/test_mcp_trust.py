"""What an MCP server says of itself is not trusted where it matters, and what it sends never
breaks an agent: lying annotations in a protected environment, and results of every shape read
as ``result.content[0].text`` (docs/agents.md, "MCP servers")."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.errors import AgentConfigError
from tests.support.harness import Harness
from tests.support.mcp_server import Seen, http_server
from tests.system.test_check_command import check_cli
from tests.system.test_mcp_servers import ERROR_REPLY, ask, build, call_rule, everything, run_tools


@pytest.fixture(scope="module")
def crm() -> Iterator[tuple[str, Seen]]:
    seen = Seen()
    with http_server(seen) as url:
        yield url, seen


def reply_rule(tool: str, reply: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**call_rule(tool, arguments), "reply": reply}


# ---- annotations in a protected environment ------------------------------------------------


def test_a_tool_claiming_read_only_waits_for_a_person_in_a_protected_environment(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["wipe", "erase"]},
              rules=[call_rule("wipe"), call_rule("erase")], env="prod")  # fmt: skip
    made.append(h)
    before = len(seen.calls)
    conv, snap = ask(h, "call wipe")
    [call] = snap["calls"]
    assert call["state"] == "awaiting_confirmation", call
    frozen = {t["name"]: t for t in run_tools(h, conv)}
    assert frozen["wipe"]["effect"] == "write" and frozen["erase"]["effect"] == "write"
    _, snap = ask(h, "call erase")
    assert snap["calls"][0]["state"] == "awaiting_confirmation"
    assert seen.calls[before:] == []  # nothing deleted before a person said so
    assert h.decide(call, "approve").status_code == 200
    snap = h.finish(conv)
    assert snap["calls"][0]["outcome"]["output"]["content"][0]["text"] == "wiped"
    assert seen.calls[before:] == ["wipe"]


def test_destructive_hint_wins_over_read_only_hint_outside_protected_environments(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": ["wipe", "erase"]},
              rules=[call_rule("wipe")])  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "call wipe")
    assert snap["calls"][0]["state"] == "answered"  # dev trusts an honest readOnlyHint
    frozen = {t["name"]: t for t in run_tools(h, conv)}
    assert frozen["wipe"]["effect"] == "read" and frozen["wipe"]["effect_by_hint"] is True
    assert frozen["erase"]["effect"] == "write"  # readOnlyHint and destructiveHint: a write


def test_the_agent_file_saying_read_is_trusted_in_a_protected_environment(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, seen = crm
    read = {"effect": "read"}
    binding = {"kind": "mcp", "server": "crm", "tools": ["lookup", "erase"],
               "overrides": {"lookup": read, "erase": read}}  # fmt: skip
    rules = [reply_rule("lookup", "{{ result.structuredContent.email }}", {"name": "Di"}),
             call_rule("erase")]  # fmt: skip
    h = build(tmp_path, url, binding, rules=rules, env="prod")
    made.append(h)
    before = len(seen.calls)
    conv, snap = ask(h, "call lookup")
    assert snap["calls"][0]["state"] == "answered"
    assert h.assistant_texts(conv)[-1] == "di@example.com"
    _, snap = ask(h, "call erase")  # the operator's word, even against destructiveHint
    assert snap["calls"][0]["state"] == "answered"
    assert seen.calls[before:] == ["lookup", "erase"]


def test_a_tool_added_by_list_changed_claiming_read_only_waits_for_a_person(
    tmp_path: Path, made: list[Harness]
) -> None:
    seen = Seen()
    with http_server(seen) as url:  # its own server: the test grows its list
        binding = {"kind": "mcp", "server": "crm", "tools": "all",
                   "overrides": {"sprout": {"effect": "read"}}}  # fmt: skip
        h = build(tmp_path, url, binding, rules=[call_rule("sprout"), call_rule("purge")],
                  env="prod")  # fmt: skip
        made.append(h)
        conv, snap = ask(h, "call sprout")
        assert snap["calls"][0]["state"] == "answered", snap["calls"]
        _, snap = ask(h, "call purge", conv)
        assert snap["calls"][-1]["state"] == "awaiting_confirmation", snap["calls"]
        [purge] = [t for t in run_tools(h, conv) if t["name"] == "purge"]
        assert purge["effect"] == "write"
        assert "purge" not in seen.calls


# ---- results of every shape ----------------------------------------------------------------


def test_all_tools_and_a_rule_reading_the_documented_shape_answer_a_plain_string(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    """The SDK gives a tool returning a string the output schema ``{result: string}``."""
    url, _ = crm
    rules = [reply_rule("greet", "said {{ result.content[0].text }}", {"name": "Ann"}),
             reply_rule("lookup", "{{ result.content[0].text }}", {"name": "Bo"}),
             reply_rule("picture", "[{{ result.content[0].text }}]")]  # fmt: skip
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": "all"}, rules=rules)
    made.append(h)
    for _ in range(3):  # every message, not only the first
        conv, snap = ask(h, "call greet")
        assert snap["run"]["status"] == "finished", snap["run"]
        assert h.assistant_texts(conv)[-1] == "said hello Ann"
    output = snap["calls"][0]["outcome"]["output"]
    assert output["structuredContent"] == {"result": "hello Ann"}
    conv, _ = ask(h, "call lookup")
    assert json.loads(h.assistant_texts(conv)[-1]) == {"name": "Bo", "email": "bo@example.com"}
    conv, _ = ask(h, "call picture")
    assert h.assistant_texts(conv)[-1] == "[]"  # an image has an empty text, never a 500


def test_a_rule_reading_a_field_the_servers_schema_lacks_leaves_the_tool_out_named(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness], caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = crm
    caplog.set_level(logging.WARNING, "hostcall.engine")
    rules = [{**reply_rule("greet", "{{ result.structuredContent.reslt }}", {"name": "Cy"}),
              "error_reply": ERROR_REPLY}, call_rule("pid")]  # fmt: skip
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": "all"}, rules=rules)
    made.append(h)
    conv, snap = ask(h, "call greet")
    assert snap["run"]["status"] == "finished", snap["run"]
    assert h.assistant_texts(conv)[-1].startswith("error unknown_tool: ")
    assert "reads result.structuredContent.reslt: the output schema has no property 'reslt'" in (
        caplog.text
    )
    assert "tool 'greet' left out" in caplog.text
    assert {t["name"] for t in run_tools(h, conv)} >= {"pid", "lookup"}  # the others stay


def test_a_redacted_structured_field_is_not_left_in_the_text_beside_it(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    hide = {"name": "hide emails", "on": "output", "action": "redact",
            "when": {"path": "/structuredContent/email", "op": "exists"},
            "fields": ["/structuredContent/email"]}  # fmt: skip
    binding = {"kind": "mcp", "server": "crm", "tools": ["lookup"],
               "overrides": {"lookup": {"guardrails": [hide]}}}  # fmt: skip
    rule = reply_rule("lookup", "{{ result.content[0].text }}", {"name": "Eve"})
    h = build(tmp_path, url, binding, rules=[rule])
    made.append(h)
    conv, _ = ask(h, "call lookup")
    assert json.loads(h.assistant_texts(conv)[-1]) == {"name": "Eve", "email": "[redacted]"}
    assert "eve@example.com" not in everything(h, conv)


# ---- hostcall check ------------------------------------------------------------------------


def test_check_says_ok_for_the_documented_shape_and_the_agent_then_answers(
    tmp_path: Path, crm: tuple[str, Seen], made: list[Harness]
) -> None:
    url, _ = crm
    rule = reply_rule("greet", "said {{ result.content[0].text }}", {"name": "Di"})
    h = build(tmp_path, url, {"kind": "mcp", "server": "crm", "tools": "all"}, rules=[rule])
    made.append(h)
    done = check_cli(tmp_path / "agents", {"CRM_TOKEN": "t", "FILES_TOKEN": "f"})
    assert done.returncode == 0, done.stderr
    assert "MCP server crm: all its tools" in done.stdout
    conv, snap = ask(h, "call greet")
    assert snap["run"]["status"] == "finished", snap["run"]
    assert h.assistant_texts(conv)[-1] == "said hello Di"


@pytest.mark.parametrize(
    ("tools", "tool", "reply", "says"),
    [
        ("all", "greet", "{{ result.content[0].txt }}",
         "reads result.content[0].txt: the output schema has no property 'txt' here (it has: "
         "bytes, description, mimeType, name, text, type, uri) (tool 'greet')"),
        (["lookup"], "lookup", "{{ result.email }}",
         "reads result.email: the output schema has no property 'email' here (it has: content, "
         "structuredContent, truncated) (tool 'lookup')"),
    ],
)  # fmt: skip
def test_check_refuses_a_rule_reading_a_field_no_mcp_result_has(
    tmp_path: Path, tools: Any, tool: str, reply: str, says: str
) -> None:
    with pytest.raises(AgentConfigError):  # the server refuses it at start, as check does
        build(tmp_path, "http://127.0.0.1:9/mcp", {"kind": "mcp", "server": "crm",
              "tools": tools}, rules=[reply_rule(tool, reply)])  # fmt: skip
    done = check_cli(tmp_path / "agents", {"CRM_TOKEN": "t", "FILES_TOKEN": "f"})
    assert done.returncode == 1, done
    assert done.stderr == f"ops.json: model: rule #1: 'reply': {says}\n"
