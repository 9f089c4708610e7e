"""Agent file mistakes stop loading with one clear line naming the file, tool and field."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.errors import AgentConfigError
from hostcall.page_context import PageContextCaps
from hostcall.settings import DEMO_AGENTS, ROOT
from tests.support.harness import planner_definition, write_agent

Definition = dict[str, Any]


def archive_tool(**changes: Any) -> dict[str, Any]:
    """A valid extra tool, so a mistake in it is the file's only problem."""
    tool: dict[str, Any] = {
        "name": "archive_task",
        "description": "Archives a task on the user's board.",
        "input_schema": {
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "required": ["id"],
        },
        "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    }
    tool.update(changes)
    return {k: v for k, v in tool.items() if v is not None}


def with_tool(**changes: Any) -> Callable[[Definition], None]:
    def mutate(data: Definition) -> None:
        data["tools"].append(archive_tool(**changes))

    return mutate


def with_key(key: str, value: Any) -> Callable[[Definition], None]:
    def mutate(data: Definition) -> None:
        data[key] = value

    return mutate


def with_rule(number: int, **changes: Any) -> Callable[[Definition], None]:
    def mutate(data: Definition) -> None:
        data["model"]["rules"][number - 1].update(changes)

    return mutate


def openai_model(**changes: Any) -> dict[str, Any]:
    """A model on a host the demo's environment allows."""
    return {"kind": "openai", "base_url": "http://127.0.0.1:8002/v1", "model": "m", **changes}


@dataclass(frozen=True)
class Mistake:
    id: str
    mutate: Callable[[Definition], None]
    says: tuple[str, ...]  # besides the file name, which every line starts with


DEMO_TOOLS = [t["name"] for t in planner_definition()["tools"]]
BAD_SCHEMA = {"type": "object", "properties": {"a": {"type": "nope"}}}

MISTAKES = [
    Mistake("name-starts-with-digit", with_tool(name="1archive"), ("tool '1archive'", "'name'")),
    Mistake("name-with-dash", with_tool(name="archive-task"), ("tool 'archive-task'", "'name'")),
    Mistake("name-with-bang", with_tool(name="archive!"), ("tool 'archive!'", "'name'")),
    Mistake("name-with-outer-space", with_tool(name=" archive"), ("tool ' archive'", "'name'")),
    Mistake("name-too-long", with_tool(name="a" * 65), ("'name'", "64")),
    Mistake(
        "duplicate-name",
        with_tool(name="read_board_tasks"),
        ("tool 'read_board_tasks'", "duplicate name"),
    ),
    Mistake(
        "missing-input-schema",
        with_tool(input_schema=None),
        ("tool 'archive_task'", "'input_schema'", "required"),
    ),
    Mistake(
        "missing-output-schema",
        with_tool(output_schema=None),
        ("tool 'archive_task'", "'output_schema'", "required"),
    ),
    Mistake(
        "schema-not-an-object",
        with_tool(input_schema=["type", "object"]),
        ("tool 'archive_task'", "'input_schema'", "JSON Schema object"),
    ),
    Mistake(
        "schema-root-not-object",
        with_tool(output_schema={"type": "array"}),
        ("tool 'archive_task'", "'output_schema'", '"type": "object"'),
    ),
    Mistake(
        "invalid-json-schema",
        with_tool(input_schema=BAD_SCHEMA),
        ("tool 'archive_task'", "'input_schema'", "properties/a/type", "'nope'"),
    ),
    Mistake("unknown-agent-key", with_key("colour", "red"), ("unknown key 'colour'",)),
    Mistake("history-turns-zero", with_key("history_turns", 0), ("'history_turns'", "1 to")),
    Mistake("history-turns-text", with_key("history_turns", "20"), ("'history_turns'",)),
    Mistake("history-turns-bool", with_key("history_turns", True), ("'history_turns'",)),
    Mistake("history-turns-huge", with_key("history_turns", 10**6), ("'history_turns'", "1000")),
    Mistake("page-context-list", with_key("page_context", []), ("'page_context'", "object")),
    Mistake(
        "page-context-unknown-key",
        with_key("page_context", {"max_bytes": 10}),
        ("page_context", "unknown key 'max_bytes'"),
    ),
    Mistake(
        "page-context-over-ceiling",
        with_key("page_context", {"max_entry_bytes": 16385}),
        ("'max_entry_bytes'", "1 to 16384"),
    ),
    Mistake(
        "page-context-total-zero",
        with_key("page_context", {"max_total_bytes": 0}),
        ("'max_total_bytes'", "1 to 65536"),
    ),
    Mistake(
        "page-context-entries-bool",
        with_key("page_context", {"max_entries": True}),
        ("'max_entries'", "1 to 64"),
    ),
    Mistake(
        "unknown-tool-key", with_tool(timeout=5), ("tool 'archive_task'", "unknown key 'timeout'")
    ),
    Mistake(
        "missing-description", with_tool(description=None), ("tool 'archive_task'", "'description'")
    ),
    Mistake(
        "blank-description", with_tool(description="  "), ("tool 'archive_task'", "'description'")
    ),
    Mistake(
        "bad-deadline", with_tool(deadline_seconds=0), ("tool 'archive_task'", "'deadline_seconds'")
    ),
    Mistake(
        "origin-with-path",
        with_key("allowed_origins", ["http://localhost:8001/app"]),
        ("allowed origin 'http://localhost:8001/app'",),
    ),
    Mistake(
        "origin-not-http",
        with_key("allowed_origins", ["ftp://example.com"]),
        ("allowed origin 'ftp://example.com'",),
    ),
    Mistake(
        "origin-without-scheme",
        with_key("allowed_origins", ["example.com"]),
        ("allowed origin 'example.com'",),
    ),
    Mistake(
        "rule-bad-regex",
        with_rule(1, match="(unclosed"),
        ("model", "rule #1", "'match'", "regular expression"),
    ),
    # Patterns run in RE2 (linear time): what it lacks is refused at load, said plainly.
    Mistake(
        "rule-backreference",
        with_rule(1, match=r"(?i)(\w+) \1"),
        ("model", "rule #1", "'match'", "RE2", "backreferences"),
    ),
    Mistake(
        "rule-lookahead",
        with_rule(2, match=r"add (?!nothing)(?P<title>.+)"),
        ("model", "rule #2", "'match'", "lookahead"),
    ),
    Mistake(
        "rule-too-large",
        with_rule(1, match=r"a.{900}x"),
        ("model", "rule #1", "'match'", "too large"),
    ),
    Mistake(
        "schema-pattern-lookahead",
        with_tool(
            input_schema={
                "type": "object",
                "properties": {"id": {"type": "string", "pattern": "^(?!x)"}},
            }
        ),
        ("tool 'archive_task'", "'input_schema'", "pattern at /properties/id", "lookahead"),
    ),
    Mistake(
        "schema-pattern-properties-backreference",
        with_tool(
            output_schema={
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "patternProperties": {r"^(a)\1$": {"type": "string"}},
            }
        ),
        ("tool 'archive_task'", "'output_schema'", "patternProperties", "backreferences"),
    ),
    Mistake(
        "guardrail-backreference",
        with_tool(
            guardrails=[
                {
                    "name": "twice",
                    "action": "block",
                    "when": {"path": "/id", "op": "regex", "value": r"(\w)\1"},
                }
            ]
        ),
        ("tool 'archive_task'", "guardrail 'twice'", "'value'", "backreferences"),
    ),
    Mistake(
        "rule-bad-template",
        with_rule(2, reply="Done: {% if %}"),
        ("model", "rule #2", "'reply'", "template"),
    ),
    Mistake(
        "rule-bad-argument-template",
        with_rule(2, arguments={"title": "{{ title"}),
        ("model", "rule #2", "'arguments'", "template"),
    ),
    # Valid JSON Schema, but no form could ever be submitted.
    Mistake(
        "required-not-a-property",
        with_tool(
            output_schema={
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok", "done"],
            }
        ),
        ("tool 'archive_task'", "'output_schema'", "requires 'done' at /", "(ok)"),
    ),
    Mistake(
        "nested-required-not-a-property",
        with_tool(
            input_schema={
                "type": "object",
                "properties": {
                    "who": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["id"],
                    }
                },
            }
        ),
        ("tool 'archive_task'", "'input_schema'", "requires 'id' at /properties/who"),
    ),
    # Reply mistakes caught by `hostcall check`, not by a visitor.
    Mistake(
        "reply-reads-a-dict-method",
        with_rule(1, reply="{% for t in result.items %}{{ t }}{% endfor %}"),
        ("model", "rule #1", "'reply'", "result.items", "items() method", "['items']"),
    ),
    Mistake(
        "reply-reads-an-undeclared-field",
        with_rule(2, reply="Created {{ result.name }}."),
        ("model", "rule #2", "'reply'", "result.name", "no property 'name'", "'create_task'"),
    ),
    Mistake(
        "reply-reads-an-undeclared-nested-field",
        with_rule(1, reply="{{ result.tasks[0].owner }}"),
        ("rule #1", "result.tasks[0].owner", "no property 'owner'", "assignee, dueDate"),
    ),
    Mistake(
        "reply-fails-on-an-example-result",
        with_rule(1, reply="{{ result.tasks | map(attribute='title') | sum }}"),
        ("rule #1", "'reply' fails on an example result of 'read_board_tasks'", "TypeError"),
    ),
    Mistake(
        "error-reply-fails-on-an-example-error",
        with_rule(2, error_reply="{{ error.code + 1 }}"),
        ("rule #2", "'error_reply' fails on an example result", "TypeError"),
    ),
    Mistake(
        "rule-unknown-tool",
        with_rule(1, tool="delete_everything"),
        ("model", "rule #1", "'delete_everything'"),
    ),
    # What an agent file may make the server send, and where (the demo's platform file).
    Mistake(
        "model-key-is-a-server-secret",
        with_key("model", openai_model(api_key_env="HOSTCALL_SECRET_KEYS")),
        ("model", "'api_key_env'", "'HOSTCALL_SECRET_KEYS'", "server's own settings", "never"),
    ),
    Mistake(
        "model-key-not-listed",
        with_key("model", openai_model(api_key_env="AWS_SECRET_ACCESS_KEY")),
        ("model", "'api_key_env'", "'AWS_SECRET_ACCESS_KEY'", "not listed in 'allowed_env'"),
    ),
    Mistake(
        "model-host-not-allowed",
        with_key("model", openai_model(base_url="http://169.254.169.254/v1")),
        ("model", "'base_url'", "169.254.169.254:80", "'allowed_hosts'"),
    ),
]


def agents_folder(path: Path) -> Path:
    """A directory for agent files, with the demo's platform files (``_*.json``, not agents)."""
    path.mkdir(parents=True, exist_ok=True)
    for platform_file in DEMO_AGENTS.glob("_*.json"):
        shutil.copy(platform_file, path)
    return path


def bad_definition(mistake: Mistake) -> Definition:
    data = planner_definition()
    data["id"] = mistake.id.replace("-", "_")
    mistake.mutate(data)
    return data


def problems_of(directory: Path) -> list[str]:
    with pytest.raises(AgentConfigError) as caught:
        load_agents(directory, {})
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_mistake_stops_loading_with_one_line_naming_file_tool_and_field(
    tmp_path: Path, mistake: Mistake
) -> None:
    write_agent(agents_folder(tmp_path), bad_definition(mistake), name="agent.json")
    [problem] = problems_of(tmp_path)
    assert problem.startswith("agent.json: ") and "\n" not in problem
    for words in mistake.says:
        assert words in problem, (words, problem)


def test_invalid_json_file_stops_loading_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"id": "broken",\n  "tools": [}', encoding="utf-8")
    [problem] = problems_of(tmp_path)
    assert problem.startswith("broken.json: not valid JSON") and "line 2" in problem


@pytest.mark.parametrize("name", ["créer tâche", "タスク 作成", "_archive", "archive task 2"])
def test_tool_names_with_spaces_and_non_ascii_letters_are_accepted(
    tmp_path: Path, name: str
) -> None:
    data = planner_definition()
    data["tools"].append(archive_tool(name=name))
    write_agent(agents_folder(tmp_path), data)
    agent = load_agents(tmp_path, {})["planner"]
    tool = agent.tool(name)
    assert tool is not None and tool.public()["name"] == name


def test_a_broken_tool_is_reported_once_not_again_by_the_rules_that_call_it(
    tmp_path: Path,
) -> None:
    data = planner_definition()
    create = next(t for t in data["tools"] if t["name"] == "create_task")
    del create["output_schema"]
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    # Rule #2 calls create_task, which IS defined (wrongly): one line, about the schema.
    assert problems_of(tmp_path) == ["agent.json: tool 'create_task': 'output_schema' is required"]


def test_several_problems_in_one_file_are_reported_at_once(tmp_path: Path) -> None:
    data = planner_definition()
    data["colour"] = "red"
    data["allowed_origins"] = ["http://localhost:8001/app"]
    data["tools"] += [
        archive_tool(name="archive-task"),
        archive_tool(name="restore", description=None),
    ]
    data["model"]["rules"][0]["match"] = "(unclosed"
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    problems = problems_of(tmp_path)
    expected = [
        "unknown key 'colour'",
        "allowed origin 'http://localhost:8001/app'",
        "tool 'archive-task': 'name'",
        "tool 'restore': 'description'",
        "model: rule #1: 'match'",
    ]
    assert len(problems) == len(expected), problems
    for words in expected:
        assert sum(words in p for p in problems) == 1, (words, problems)


def test_several_bad_rules_are_all_reported(tmp_path: Path) -> None:
    data = planner_definition()
    data["model"]["rules"][0]["match"] = "(unclosed"
    data["model"]["rules"][2]["reply"] = "{% if %}"
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    problems = problems_of(tmp_path)
    assert len(problems) == 2, problems
    assert "rule #1" in problems[0] and "rule #3" in problems[1]


def test_problems_in_several_files_are_all_reported(tmp_path: Path) -> None:
    agents_folder(tmp_path)
    for mistake in MISTAKES[:3]:
        write_agent(tmp_path, bad_definition(mistake), name=f"{mistake.id}.json")
    write_agent(tmp_path, planner_definition())  # a good file does not hide the bad ones
    problems = problems_of(tmp_path)
    assert sorted(p.split(":")[0] for p in problems) == sorted(f"{m.id}.json" for m in MISTAKES[:3])


def test_the_demo_agent_loads() -> None:
    agents = load_agents(DEMO_AGENTS, {})
    assert list(agents) == ["planner"]
    assert [t.name for t in agents["planner"].tools] == DEMO_TOOLS


def test_the_openai_agent_file_of_docs_models_md_loads_with_its_platform_file(
    tmp_path: Path,
) -> None:
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    found = re.findall(r"```json\n(.*?)```", text, re.S)
    blocks = [json.loads(block) for block in found if block.lstrip().startswith("{")]
    [platform] = [b for b in blocks if "environments" in b]
    [shop] = [b for b in blocks if b.get("id") == "shop"]
    write_agent(tmp_path, platform, name="_platform.json")
    write_agent(tmp_path, shop)
    agents = load_agents(tmp_path, {"OPENAI_API_KEY": "sk-test"})
    assert agents["shop"].model["base_url"] == "https://api.openai.com/v1"
    # Without its line in allowed_env, the same file is refused.
    write_agent(tmp_path, {**platform, "allowed_env": []}, name="_platform.json")
    [problem] = problems_of(tmp_path)
    assert problem.startswith("shop.json: model: 'api_key_env'") and "allowed_env" in problem


@pytest.mark.parametrize(
    ("platform", "says"),
    [
        # A connection bound to no host could be carried anywhere: its hosts are required.
        ({"connections": {"c": {"headers": {}}}}, "connection 'c': must be {'hosts'"),
        ({"connections": {"c": {"hosts": [], "headers": {}}}}, "'hosts' must list"),
        ({"connections": {"c": {"hosts": ["*:443"], "headers": {}}}}, "hosts: '*:443'"),
        ({"allowed_env": "OPENAI_API_KEY"}, "'allowed_env' must list environment variable"),
        ({"allowed_env": ["NOT A NAME"]}, "'allowed_env' must list environment variable"),
        ({"allowed_env": ["hostcall_secret_keys"]}, "'hostcall_secret_keys' is one of the"),
    ],
)
def test_platform_file_mistakes_stop_loading(
    tmp_path: Path, platform: dict[str, Any], says: str
) -> None:
    write_agent(tmp_path, platform, name="_platform.json")
    write_agent(tmp_path, {"id": "plain"})
    [problem] = problems_of(tmp_path)
    assert problem.startswith("_platform.json: ") and says in problem, problem


def test_re2_syntax_that_python_lacks_is_accepted(tmp_path: Path) -> None:
    """Patterns are RE2's everywhere: what Python's re refuses but RE2 reads loads."""
    data = planner_definition()
    data["model"]["rules"][1]["match"] = r"(?i)add a task to (?<title>\p{L}[\p{L} ]*)\z"
    guard = {"name": "letters", "action": "log", "when": {"path": "/id", "op": "regex",
                                                          "value": r"^\pL+\z"}}  # fmt: skip
    tool = archive_tool(guardrails=[guard])
    tool["input_schema"]["properties"]["id"]["pattern"] = r"^\p{L}+\z"
    tool["output_schema"]["patternProperties"] = {r"^\p{Han}+$": {"type": "string"}}
    data["tools"].append(tool)
    write_agent(agents_folder(tmp_path), data, name="planner.json")
    [loaded] = [t for t in load_agents(tmp_path, {})["planner"].tools if t.name == "archive_task"]
    assert loaded.input_validator.problems({"id": "café"}) == []
    assert [p.path for p in loaded.input_validator.problems({"id": "café!"})] == ["/id"]


def test_history_turns_is_optional_and_kept_when_set(tmp_path: Path) -> None:
    data = planner_definition()
    write_agent(agents_folder(tmp_path), {**data, "id": "default_window"}, name="a.json")
    write_agent(agents_folder(tmp_path), {**data, "id": "short", "history_turns": 3}, "b.json")
    agents = load_agents(tmp_path, {})
    assert agents["default_window"].history_turns == 20
    assert agents["short"].history_turns == 3


def test_page_context_is_admitted_only_with_its_block_and_its_caps_default(
    tmp_path: Path,
) -> None:
    data = planner_definition()
    del data["page_context"]  # the demo's planner admits it
    write_agent(agents_folder(tmp_path), {**data, "id": "closed"}, name="a.json")
    write_agent(agents_folder(tmp_path), {**data, "id": "open", "page_context": {}}, "b.json")
    caps = {"max_entry_bytes": 100, "max_total_bytes": 300, "max_entries": 4}
    write_agent(agents_folder(tmp_path), {**data, "id": "set", "page_context": caps}, "c.json")
    agents = load_agents(tmp_path, {})
    assert agents["closed"].page_context is None
    assert agents["open"].page_context == PageContextCaps(2048, 8192, 16)
    assert agents["set"].page_context == PageContextCaps(100, 300, 4)
