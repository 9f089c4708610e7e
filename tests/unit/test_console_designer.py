"""The agent designer's server side: hostcall check's validator, atomic save and
reload, versions, roll back, create / duplicate / disable — and bad input changing nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.errors import AgentConfigError
from tests.support.harness import Harness, planner_definition
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)


@pytest.fixture
def designer(harness: Harness) -> ConsoleClient:
    return ConsoleClient(harness.app, harness.runtime, "dana", "designer")


def check_lines(directory: Path) -> list[str]:
    """What ``hostcall check --agents directory`` prints (its code path: load_agents)."""
    try:
        load_agents(directory, {})
    except AgentConfigError as exc:
        return exc.problems
    return []


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*.json")}


def test_saving_writes_the_file_reloads_the_agent_and_records_a_version(
    harness: Harness, designer: ConsoleClient
) -> None:
    original = (harness.agents_dir / "planner.json").read_text()
    agent = planner_definition()
    agent["greeting"] = "Bonjour !"
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 200 and r.json() == {"version": 2}
    assert json.loads((harness.agents_dir / "planner.json").read_text()) == agent
    assert harness.runtime.agents["planner"].greeting == "Bonjour !"  # reloaded, as SIGHUP does
    versions = harness.call(harness.runtime.store.list_agent_versions, "planner")
    assert [(v.version, v.author, v.note) for v in versions] == [
        (2, "dana", ""), (1, "", "as found on disk"),
    ]  # fmt: skip
    assert versions[1].body == original
    assert check_lines(harness.agents_dir) == []
    assert not [p for p in harness.agents_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_run_already_started_keeps_its_frozen_agent_after_a_save(
    harness: Harness, designer: ConsoleClient
) -> None:
    conv = harness.conversation()
    harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    agent = planner_definition()
    schema = agent["tools"][0]["output_schema"]
    schema["properties"]["boardName"] = {"type": "string"}
    schema["required"] = [*schema.get("required", []), "boardName"]
    assert designer.post("/console/api/agents/planner", {"agent": agent}).status_code == 200
    # The run validates its answer against the schema it started with.
    answered = harness.answer(call, {"tasks": []})
    assert answered.status_code == 200, answered.text


def test_an_invalid_schema_is_refused_with_hostcall_checks_lines_and_nothing_changes(
    harness: Harness, designer: ConsoleClient, tmp_path: Path
) -> None:
    before = _files(harness.agents_dir)
    agent = planner_definition()
    agent["tools"][0]["input_schema"] = {"type": "object", "properties": {"a": {"type": "strng"}}}
    staged = tmp_path / "staged"
    staged.mkdir()
    for name, data in before.items():
        (staged / name).write_bytes(data)
    (staged / "planner.json").write_text(json.dumps(agent))
    expected = check_lines(staged)
    assert expected and "'input_schema' is not valid JSON Schema" in expected[0]

    live = designer.post("/console/api/agents/planner/check", {"agent": agent})
    assert live.json() == {"problems": expected}
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "agent_invalid"
    assert error["message"] == expected[0] and error["details"]["problems"] == expected
    assert _files(harness.agents_dir) == before
    assert harness.call(harness.runtime.store.list_agent_versions, "planner") == []
    assert "agent.save" not in [e.action for e in harness.call(harness.runtime.store.list_audit)]


def _backreference_rule(agent: dict[str, Any]) -> str:
    agent["model"]["rules"][0]["match"] = r"(?i)(\w+) \1"
    return "model: rule #1: 'match'"


def _lookbehind_guardrail(agent: dict[str, Any]) -> str:
    tool = agent["tools"][0]
    tool["guardrails"] = [
        {
            "name": "not ours",
            "action": "block",
            "when": {"path": "", "op": "regex", "value": "(?<!@)example"},
        }
    ]
    return f"tool {tool['name']!r}: guardrail 'not ours'"


def _backreference_pattern(agent: dict[str, Any]) -> str:
    tool = agent["tools"][0]
    tool["output_schema"]["properties"]["code"] = {"type": "string", "pattern": r"(.)\1"}
    return f"tool {tool['name']!r}: 'output_schema' has a pattern at /properties/code"


@pytest.mark.parametrize(
    "mistake", [_backreference_rule, _lookbehind_guardrail, _backreference_pattern]
)
def test_a_pattern_re2_cannot_take_is_refused_at_save_and_nothing_changes(
    harness: Harness, designer: ConsoleClient, tmp_path: Path, mistake: Any
) -> None:
    before = _files(harness.agents_dir)
    agent = planner_definition()
    where = mistake(agent)
    staged = tmp_path / "staged"
    staged.mkdir()
    for name, data in before.items():
        (staged / name).write_bytes(data)
    (staged / "planner.json").write_text(json.dumps(agent))
    [expected] = check_lines(staged)
    assert expected.startswith(f"planner.json: {where}"), expected
    assert "RE2" in expected and ("backreferences" in expected or "lookbehind" in expected)

    assert designer.post("/console/api/agents/planner/check", {"agent": agent}).json() == {
        "problems": [expected]
    }
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "agent_invalid"
    assert r.json()["error"]["details"]["problems"] == [expected]
    assert _files(harness.agents_dir) == before
    assert harness.call(harness.runtime.store.list_agent_versions, "planner") == []
    # The agent that runs is the one on disk.
    assert harness.runtime.agents["planner"].source == json.loads(before["planner.json"])


@pytest.mark.parametrize(
    ("agent", "code"),
    [
        ({"id": "other"}, "agent_id_changed"),
        ("not an object", "agent_id_changed"),
        (
            {**planner_definition(), "tools": [{"name": "1 bad", "description": "x"}]},
            "agent_invalid",
        ),
        ({**planner_definition(), "surprise": True}, "agent_invalid"),
    ],
)
def test_bad_agents_are_refused_and_nothing_changes(
    harness: Harness, designer: ConsoleClient, agent: Any, code: str
) -> None:
    before = _files(harness.agents_dir)
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 422 and r.json()["error"]["code"] == code
    assert _files(harness.agents_dir) == before
    assert harness.call(harness.runtime.store.list_agent_versions, "planner") == []


@pytest.mark.parametrize(
    ("model", "line"),
    [
        (
            {"api_key_env": "HOSTCALL_SECRET_KEYS"},
            "planner.json: model: 'api_key_env': environment variable 'HOSTCALL_SECRET_KEYS' "
            "is one of the server's own settings (HOSTCALL_*), never given to an agent",
        ),
        (
            {"api_key_env": "PATH"},
            "planner.json: model: 'api_key_env': environment variable 'PATH' is not listed "
            "in 'allowed_env' of _platform.json",
        ),
        (
            {"base_url": "http://169.254.169.254/latest"},
            "planner.json: model: 'base_url' goes to 169.254.169.254:80, which is not in the "
            "'allowed_hosts' of the agent's environment (_platform.json)",
        ),
    ],
)
def test_a_model_reaching_for_server_secrets_or_hosts_is_refused_at_save(
    harness: Harness, designer: ConsoleClient, model: dict[str, str], line: str
) -> None:
    # Set, so that only the allow-lists can refuse them.
    harness.settings.environ.update({"HOSTCALL_SECRET_KEYS": "signing-keys", "PATH": "/bin"})
    before = _files(harness.agents_dir)
    agent = planner_definition()
    # On a host the demo's environment allows (its holiday service), unless changed.
    agent["model"] = {"kind": "openai", "base_url": "http://127.0.0.1:8002/v1", "model": "m",
                      **model}  # fmt: skip
    live = designer.post("/console/api/agents/planner/check", {"agent": agent})
    assert live.json() == {"problems": [line]}
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "agent_invalid" and error["details"]["problems"] == [line]
    assert _files(harness.agents_dir) == before
    assert harness.runtime.agents["planner"].model["kind"] == "scripted"
    assert harness.call(harness.runtime.store.list_agent_versions, "planner") == []


def test_bad_bodies_are_clear_errors(harness: Harness, designer: ConsoleClient) -> None:
    assert designer.post("/console/api/agents/planner", {}).status_code == 400
    r = designer.http.post(
        "/console/api/agents/planner", content=b"{nope",
        headers={"X-CSRF-Token": designer.csrf, "Content-Type": "application/json"},
    )  # fmt: skip
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"
    assert designer.post("/console/api/agents/ghost", {"agent": {"id": "ghost"}}).status_code == 404


def test_versions_diff_and_roll_back(harness: Harness, designer: ConsoleClient) -> None:
    original = (harness.agents_dir / "planner.json").read_text()
    agent = planner_definition()
    agent["greeting"] = "Version two"
    designer.post("/console/api/agents/planner", {"agent": agent})
    page = designer.http.get("/console/agents/planner/versions")
    assert page.status_code == 200
    assert '<div data-kind="+">+  &#34;greeting&#34;: &#34;Version two&#34;,</div>' in page.text
    r = designer.form("/console/agents/planner/rollback", {"version": "1"})
    assert r.status_code == 303
    assert (harness.agents_dir / "planner.json").read_text() == original
    assert harness.runtime.agents["planner"].greeting != "Version two"
    notes = [v.note for v in harness.call(harness.runtime.store.list_agent_versions, "planner")]
    assert notes == ["roll back to version 1", "", "as found on disk"]
    missing = designer.form("/console/agents/planner/rollback", {"version": "99"})
    assert missing.status_code == 404
    assert len(harness.call(harness.runtime.store.list_agent_versions, "planner")) == 3


def test_create_duplicate_disable_and_enable(harness: Harness, designer: ConsoleClient) -> None:
    r = designer.form("/console/agents", {"id": "helpdesk", "name": "Help desk"})
    assert r.status_code == 303 and r.headers["location"] == "/console/agents/helpdesk"
    assert harness.runtime.agents["helpdesk"].name == "Help desk"
    assert designer.form("/console/agents", {"id": "helpdesk"}).status_code == 409
    assert designer.form("/console/agents", {"id": "../evil"}).status_code == 400
    assert not (harness.agents_dir.parent / "evil.json").exists()

    r = designer.form("/console/agents/planner/duplicate", {"id": "planner2"})
    assert r.status_code == 303
    assert harness.runtime.agents["planner2"].tools == harness.runtime.agents["planner"].tools

    assert designer.form("/console/agents/planner2/disable", {}).status_code == 303
    assert "planner2" not in harness.runtime.agents
    assert (harness.agents_dir / "disabled" / "planner2.json").exists()
    assert check_lines(harness.agents_dir) == []
    assert designer.form("/console/agents/planner2/enable", {}).status_code == 303
    assert "planner2" in harness.runtime.agents
    actions = [e.action for e in reversed(harness.call(harness.runtime.store.list_audit))]
    assert actions[-4:] == ["agent.create", "agent.duplicate", "agent.disable", "agent.enable"]


def test_disabling_the_last_agent_is_refused_and_changes_nothing(
    harness: Harness, designer: ConsoleClient
) -> None:
    before = _files(harness.agents_dir)
    r = designer.form("/console/agents/planner/disable", {})
    assert r.status_code == 422 and "no agent files" in r.text
    assert _files(harness.agents_dir) == before
    assert "planner" in harness.runtime.agents


def test_a_failed_write_leaves_the_old_file_whole(
    harness: Harness, designer: ConsoleClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _files(harness.agents_dir)

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    agent = planner_definition()
    agent["greeting"] = "never written"
    with pytest.raises(OSError):
        designer.post("/console/api/agents/planner", {"agent": agent})
    assert _files(harness.agents_dir) == before
    assert not [p for p in harness.agents_dir.iterdir() if p.name.endswith(".tmp")]


def test_an_http_tool_to_a_host_the_environment_does_not_allow_is_refused_at_save(
    harness: Harness, designer: ConsoleClient
) -> None:
    """Checked as it is saved, not met as not_authorized on every call afterwards."""
    before = _files(harness.agents_dir)
    agent = planner_definition()
    agent["tools"].append({
        "name": "weather", "kind": "http", "description": "Today's weather.",
        "request": {"method": "GET", "url": "https://api.example.com/today"},
    })  # fmt: skip
    line = (
        "planner.json: tool 'weather': 'url' goes to api.example.com:443, which environment "
        "'demo' does not allow (its 'allowed_hosts' in _platform.json: 127.0.0.1:8002, "
        "localhost:8002)"
    )
    live = designer.post("/console/api/agents/planner/check", {"agent": agent})
    assert live.json() == {"problems": [line]}
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"]["problems"] == [line]
    assert _files(harness.agents_dir) == before
    assert harness.runtime.agents["planner"].tool("weather") is None
    assert harness.call(harness.runtime.store.list_agent_versions, "planner") == []


def test_the_editor_offers_the_installed_blocks_and_leaves_out_the_broken(
    harness: Harness, designer: ConsoleClient, tmp_path: Path
) -> None:
    from tests.support.nodes import PACKAGE, VERSION, installed

    with installed(tmp_path / "site"):
        html = designer.http.get("/console/agents/planner").text
    data = json.loads(html.split('id="hc-data">', 1)[1].split("</script>", 1)[0])["data"]
    blocks = {b["name"]: b for b in data["blocks"]}
    assert sorted(blocks) == [
        "acme.coded", "acme.crm_lookup", "acme.explode", "acme.fetch", "acme.hang", "acme.junk",
    ]  # fmt: skip
    assert blocks["acme.crm_lookup"]["package"] == PACKAGE
    assert blocks["acme.crm_lookup"]["version"] == VERSION
    assert blocks["acme.crm_lookup"]["description"] == "Look up a customer in the CRM by e-mail."
    assert blocks["acme.crm_lookup"]["configSchema"]["required"] == ["email", "region"]
