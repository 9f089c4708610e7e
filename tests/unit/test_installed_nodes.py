"""Installed nodes (``"kind": "block"``) through the run engine: found through real entry
points of a package the tests build, checked at load, run with every policy the HTTP block
has, and every way a node fails a typed tool error, never a crashed run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.calls.transitions import OPEN_STATES
from hostcall.cli import main
from hostcall.errors import AgentConfigError
from tests.support.harness import Conv, Harness, write_agent
from tests.support.nodes import PACKAGE, VERSION, installed
from tests.support.redos import HOSTILE_TEXT, RESPONSIVE_SECONDS, while_answering_healthz

OPEN = {state.value for state in OPEN_STATES}


@pytest.fixture
def acme(tmp_path: Path) -> Iterator[Any]:
    with installed(tmp_path / "site") as module:
        yield module


def lookup_tool(**extra: Any) -> dict[str, Any]:
    return {
        "name": "crm_lookup",
        "kind": "block",
        "block": "acme.crm_lookup",
        "effect": "read",
        "ai_params": [{"key": "email", "type": "string", "required": True}],
        "config": {"email": "{{ $fromAI.email }}", "region": "eu", "fields": ["name", "plan"]},
        "deadline_seconds": 2,
        **extra,
    }


def build(
    tmp_path: Path, tool: dict[str, Any], *, env: str = "dev", hosts: tuple[str, ...] = (),
    **rule: Any,
) -> Harness:  # fmt: skip
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {"dev": {"allowed_hosts": list(hosts)}, "prod": {"protected": True}},
    }, name="_platform.json")  # fmt: skip
    scripted = {
        "match": "look up (?P<what>.+)", "tool": tool.get("name", tool.get("toolName")),
        "arguments": {"email": "{{ what }}"},
        "reply": "found {{ result.name }} on {{ result.plan }}",
        "error_reply": "error {{ error.code }}: {{ error.message }}",
        **rule,
    }  # fmt: skip
    if "calls" in scripted:  # several calls in one pass, instead of the one
        del scripted["tool"], scripted["arguments"]
    write_agent(directory, {
        "id": "ops", "environment": env,
        "model": {"kind": "scripted", "rules": [scripted]}, "tools": [tool],
    })  # fmt: skip
    return Harness(tmp_path, directory)


def finished(h: Harness, conv: Conv) -> dict[str, Any]:
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        snap = h.snapshot(conv)
        status, states = snap["run"]["status"], [c["state"] for c in snap["calls"]]
        busy = (
            status == "running"
            or "dispatched" in states
            or (status == "waiting" and not any(s in OPEN for s in states))
        )
        if not busy:
            return snap
        time.sleep(0.02)
    raise AssertionError(f"run still busy: {snap['run']}")


def ask(h: Harness, text: str, **body: Any) -> tuple[Conv, dict[str, Any]]:
    conv = h.conversation("ops")
    r = h.http.post(f"/api/conversations/{conv.id}/messages", json={"text": text, **body},
                    headers=conv.auth)  # fmt: skip
    assert r.status_code == 202, r.text
    return conv, finished(h, conv)


def tool_result(h: Harness, conv: Conv) -> Any:
    """What the model read for the conversation's last call."""
    results = [d for t, d in h.events(conv) if t == "TOOL_CALL_RESULT"]
    return json.loads(results[-1]["content"])


def load_problems(tmp_path: Path, tool: dict[str, Any]) -> list[str]:
    with pytest.raises(AgentConfigError) as caught:
        build(tmp_path, tool)
    return caught.value.problems


# ---- a call ----------------------------------------------------------------------------------


def test_a_node_runs_with_the_models_argument_and_the_model_reads_its_result(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    h = build(tmp_path, lookup_tool())
    made.append(h)
    tool = h.runtime.agents["ops"].tool("crm_lookup")
    assert tool is not None and tool.kind == "block"
    # The model's parameters are the tool's input; the description is the block's own.
    assert tool.input_schema["required"] == ["email"]
    assert tool.description.startswith("Look up a customer in the CRM")
    conv, snap = ask(h, "look up ada@example.com")
    assert snap["run"]["status"] == "finished"
    assert snap["calls"][0]["state"] == "answered"
    assert acme.CALLS == [
        (
            "acme.crm_lookup",
            {"email": "ada@example.com", "region": "eu", "fields": ["name", "plan"]},
        ),
    ]
    assert h.assistant_texts(conv)[-1] == "found Ada Lovelace on gold"


def test_from_ai_values_are_placed_as_values_never_evaluated(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    tool = lookup_tool(
        ai_params=[{"key": "email", "type": "string", "required": True},
                   {"key": "limit", "type": "integer"}],
        config={"email": "{{ $fromAI.email }}", "region": "eu", "limit": "{{ $fromAI.limit }}"},
    )  # fmt: skip
    h = build(tmp_path, tool, arguments={"email": "{{ what }}", "limit": 3})
    made.append(h)
    hostile = "{{ $fromAI.limit }} __import__('os').system('id') {{ 7*7 }}"
    _, snap = ask(h, f"look up {hostile}")
    # Passed to the node as the text it was, its JSON type kept for a whole reference.
    assert acme.CALLS == [("acme.crm_lookup", {"email": hostile, "region": "eu", "limit": 3})]
    error = h.model_error(snap["calls"][0])
    assert error == {
        "code": "block_failed",
        "message": f"The block failed: no customer {hostile} in eu",
    }
    assert snap["run"]["status"] == "finished"


def test_arguments_that_do_not_fit_the_config_are_invalid_and_the_node_never_runs(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    tool = lookup_tool(
        ai_params=[{"key": "email", "type": "string", "required": True},
                   {"key": "region", "type": "string", "required": True}],
        config={"email": "{{ $fromAI.email }}", "region": "{{ $fromAI.region }}"},
    )  # fmt: skip
    h = build(tmp_path, tool, arguments={"email": "{{ what }}", "region": "mars"})
    made.append(h)
    conv, snap = ask(h, "look up ada@example.com")
    error = h.model_error(snap["calls"][0])
    assert error["code"] == "invalid_arguments"
    assert error["message"].startswith("The arguments do not fit the block: field 'config.region'")
    assert acme.CALLS == []
    assert snap["run"]["status"] == "finished"
    assert h.assistant_texts(conv)[-1].startswith("error invalid_arguments")


@pytest.mark.parametrize(
    ("block", "config", "message"),
    [
        ("acme.explode", {}, "The block failed: it raised RuntimeError"),
        ("acme.hang", {}, "The block failed: timeout after 0.3 s"),
        ("acme.junk", {"what": "nan"}, "The block failed: it returned something that is not JSON"),
        ("acme.junk", {"what": "set"}, "The block failed: it returned something that is not JSON"),
        ("acme.junk", {"what": "object"},
         "The block failed: it returned something that is not JSON"),
        ("acme.junk", {"what": "deep"}, "The block failed: it returned something that is not JSON"),
    ],
)  # fmt: skip
def test_a_node_that_raises_hangs_or_returns_junk_is_block_failed_and_the_run_goes_on(
    tmp_path: Path,
    acme: Any,
    made: list[Harness],
    caplog: pytest.LogCaptureFixture,
    block: str,
    config: dict[str, Any],
    message: str,
) -> None:
    tool = {"name": "odd", "kind": "block", "block": block, "config": config,
            "ai_params": [{"key": "email", "type": "string"}], "deadline_seconds": 0.3}  # fmt: skip
    h = build(tmp_path, tool)
    made.append(h)
    started = time.monotonic()
    conv, snap = ask(h, "look up anyone")
    assert time.monotonic() - started < 5
    assert [name for name, _ in acme.CALLS] == [block]
    assert snap["calls"][0]["state"] == "failed"
    assert h.model_error(snap["calls"][0]) == {"code": "block_failed", "message": message}
    assert snap["run"]["status"] == "finished"
    assert h.assistant_texts(conv)[-1] == f"error block_failed: {message}"
    # What a node's exception said (a password here) reaches the operator's log only.
    seen = json.dumps(h.events(conv)) + json.dumps(snap)
    assert "hunter2" not in seen
    if block == "acme.explode":
        assert "hunter2" in caplog.text


def test_a_result_that_does_not_match_the_output_schema_is_block_failed(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    schema = {"type": "object",
              "properties": {"name": {"type": "string"}, "plan": {"enum": ["silver"]}}}  # fmt: skip
    h = build(tmp_path, lookup_tool(output_schema=schema))
    made.append(h)
    _, snap = ask(h, "look up ada@example.com")
    error = h.model_error(snap["calls"][0])
    assert error["code"] == "block_failed" and "output schema" in error["message"]
    assert len(acme.CALLS) == 1


def test_the_server_answers_while_a_models_value_meets_the_configs_pattern(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    tool = {"name": "coded", "kind": "block", "block": "acme.coded",
            "config": {"code": "{{ $fromAI.email }}"},
            "ai_params": [{"key": "email", "type": "string", "required": True}]}  # fmt: skip
    h = build(tmp_path, tool, reply="code {{ result.code }}")
    made.append(h)
    (_, snap), longest = while_answering_healthz(h.http, lambda: ask(h, f"look up {HOSTILE_TEXT}"))
    assert longest < RESPONSIVE_SECONDS, f"/healthz waited {longest:.2f}s"
    assert snap["calls"][0]["outcome"]["error"]["code"] == "invalid_arguments"
    assert acme.CALLS == []
    conv, _ = ask(h, "look up aaaa")
    assert h.assistant_texts(conv)[-1] == "code aaaa"


# ---- policies --------------------------------------------------------------------------------


def test_a_huge_result_is_cut_for_the_model_and_kept_whole_in_the_ledger(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    tool = {"name": "junk", "kind": "block", "block": "acme.junk", "config": {"what": "huge"},
            "max_result_kb": 4}  # fmt: skip
    h = build(tmp_path, tool, arguments={}, reply="done")
    made.append(h)
    conv, snap = ask(h, "look up it")
    assert snap["calls"][0]["state"] == "answered"
    seen = tool_result(h, conv)
    assert seen["truncated"] is True and seen["shownBytes"] == 4096
    assert "cut" in seen["message"]
    stored = h.call(h.runtime.store.get_call, snap["calls"][0]["toolCallId"])
    assert stored is not None and len(stored.outcome["output"]["text"]) == 200_000


def test_simulation_returns_the_simulation_result_and_never_runs_the_node(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    h = build(tmp_path, lookup_tool(simulation_result={"name": "Sim", "plan": "none"}))
    made.append(h)
    conv, snap = ask(h, "look up ada@example.com", simulate=True)
    assert acme.CALLS == []
    assert snap["calls"][0]["simulated"] is True
    assert h.assistant_texts(conv)[-1] == "(Simulated) found Sim on none"


def test_a_write_in_a_protected_environment_runs_only_once_a_person_approves(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    h = build(tmp_path, lookup_tool(effect="write"), env="prod")
    made.append(h)
    conv, snap = ask(h, "look up ada@example.com")
    call = snap["calls"][0]
    assert call["state"] == "awaiting_confirmation"
    assert h.decide(call, "reject", reason="no").status_code == 200
    finished(h, conv)
    assert acme.CALLS == []  # rejected: never run
    h.say(conv, "look up ada@example.com")
    call = h.open_call(conv, "awaiting_confirmation")
    assert h.decide(call, "approve").status_code == 200
    assert finished(h, conv)["run"]["status"] == "finished"
    assert len(acme.CALLS) == 1
    assert h.assistant_texts(conv)[-1] == "found Ada Lovelace on gold"


def test_calls_past_the_limit_per_pass_fail_and_run_no_node(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    calls = [{"tool": "crm_lookup", "arguments": {"email": "ada@example.com"}}] * 3
    h = build(tmp_path, lookup_tool(max_calls_per_pass=2), calls=calls)
    made.append(h)
    _, snap = ask(h, "look up ada@example.com")
    states = sorted(c["state"] for c in snap["calls"])
    assert states == ["answered", "answered", "failed"]
    failed = next(c for c in snap["calls"] if c["state"] == "failed")
    assert failed["outcome"]["error"]["code"] == "call_limit_reached"
    assert len(acme.CALLS) == 2


def test_an_input_guardrail_blocks_the_call_before_the_node_runs(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    rule = {"name": "no example.com", "on": "input", "action": "block",
            "when": {"path": "/email", "op": "regex", "value": "@example\\.com$"}}  # fmt: skip
    h = build(tmp_path, lookup_tool(guardrails=[rule]))
    made.append(h)
    _, snap = ask(h, "look up ada@example.com")
    assert snap["calls"][0]["outcome"]["error"]["code"] == "blocked_by_guardrail"
    assert acme.CALLS == []


def test_a_node_reading_the_visitor_where_nobody_signs_in_is_refused_at_load(
    tmp_path: Path, acme: Any
) -> None:
    config = {"email": "{{ $user.claims.email }}", "region": "eu", "fields": ["name"]}
    assert load_problems(tmp_path, lookup_tool(config=config)) == [
        "ops.json: tool 'crm_lookup' uses $user, but the agent has no 'identity' block: "
        "nobody would ever be signed in (docs/identity.md)"
    ]
    assert acme.CALLS == []


# ---- the hosts a node reaches -----------------------------------------------------------------


def fetch_tool(url: str) -> dict[str, Any]:
    return {"name": "fetch", "kind": "block", "block": "acme.fetch", "config": {"url": url},
            "ai_params": [{"key": "email", "type": "string"}]}  # fmt: skip


def test_a_node_reaching_a_host_the_environment_does_not_allow_is_refused_at_load(
    tmp_path: Path, acme: Any
) -> None:
    assert load_problems(tmp_path, fetch_tool("https://crm.example.com/api")) == [
        "ops.json: tool 'fetch': 'config' reaches crm.example.com:443, which environment 'dev' "
        "does not allow (its 'allowed_hosts' in _platform.json: none)"
    ]
    assert acme.CALLS == []


def test_a_host_the_model_chose_is_refused_before_the_node_runs(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    h = build(tmp_path, fetch_tool("{{ $fromAI.email }}"), hosts=("127.0.0.1:9",),
              reply="reached {{ result.reached }}")  # fmt: skip
    made.append(h)
    conv, snap = ask(h, "look up http://127.0.0.2:9/admin")
    error = h.model_error(snap["calls"][0])
    assert error["code"] == "not_authorized" and "127.0.0.2:9" in error["message"]
    assert acme.CALLS == []
    conv, snap = ask(h, "look up http://127.0.0.1:9/ok")
    assert h.assistant_texts(conv)[-1] == "reached http://127.0.0.1:9/ok"
    assert acme.CALLS == [("acme.fetch", {"url": "http://127.0.0.1:9/ok"})]


# ---- checked at load -------------------------------------------------------------------------


def test_a_config_that_does_not_fit_the_blocks_schema_names_file_tool_and_field(
    tmp_path: Path, acme: Any
) -> None:
    tool = lookup_tool(config={"email": "{{ $fromAI.email }}", "fields": ["name", "age"],
                               "limit": 0, "colour": "red"})  # fmt: skip
    assert load_problems(tmp_path, tool) == [
        "ops.json: tool 'crm_lookup': 'config' 'region' is a required property",
        "ops.json: tool 'crm_lookup': 'config' Additional properties are not allowed "
        "('colour' was unexpected)",
        "ops.json: tool 'crm_lookup': 'config' field 'config.fields.1': 'age' is not one of "
        "['name', 'plan', 'email']",
        "ops.json: tool 'crm_lookup': 'config' field 'config.limit': 0 is less than the "
        "minimum of 1",
    ]
    assert acme.CALLS == []


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"block": "acme.nope"},
         "'block': 'acme.nope' is not installed (installed: acme.coded, acme.crm_lookup, "
         "acme.explode, acme.fetch, acme.hang, acme.junk; `hostcall blocks` lists them)"),
        ({"block": "acme.broken"},
         f"'block': 'acme.broken' (from {PACKAGE} {VERSION}) acme_nodes_for_tests:NotANode is "
         "not a hostcall.blocks.node.Node"),
        ({"block": 42}, "'block' must name an installed block (`hostcall blocks` lists them)"),
        ({"config": ["eu"]}, "'config' must be a JSON object"),
        ({"config": {"email": "{{ $fromAI.mail }}", "region": "eu"}},
         "'config' field 'config.email': $fromAI.mail is not a declared AI parameter"),
        ({"config": {"email": "{{ email }}", "region": "eu"}},
         "'config' field 'config.email': '{{ email }}' is not allowed; only "
         "{{ $fromAI.<key> }}, {{ $user.sub }} and {{ $user.claims.<name> }} are (expressions "
         "are never evaluated)"),
        ({"config": {"{{ $fromAI.email }}": "x", "region": "eu"}},
         "'config' field 'config': names are fixed; '{{ $fromAI.email }}' holds one"),
        ({"url": "http://example.com"}, "unknown key 'url'"),
    ],
)  # fmt: skip
def test_a_bad_block_tool_is_refused_at_load_with_a_clear_line(
    tmp_path: Path, acme: Any, change: dict[str, Any], line: str
) -> None:
    assert load_problems(tmp_path, lookup_tool(**change)) == [
        f"ops.json: tool 'crm_lookup': {line}"
    ]


def test_hostcall_check_and_blocks_commands(
    tmp_path: Path, acme: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    build(tmp_path, lookup_tool()).stop()
    assert main(["check", "--agents", str(tmp_path / "agents")]) == 0
    assert capsys.readouterr().out == "ok: ops (1 tools: crm_lookup)\n"
    bad = json.loads((tmp_path / "agents" / "ops.json").read_text())
    bad["tools"][0]["config"]["region"] = "mars"
    (tmp_path / "agents" / "ops.json").write_text(json.dumps(bad))
    assert main(["check", "--agents", str(tmp_path / "agents")]) == 1
    assert capsys.readouterr().err == (
        "ops.json: tool 'crm_lookup': 'config' field 'config.region': 'mars' is not one of "
        "['eu', 'us']\n"
    )
    # A broken entry point is listed with what is wrong, and the status says so.
    assert main(["blocks"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"Acme.Upper\t{PACKAGE} {VERSION}\tbroken: its name must be lowercase letters, digits "
        "and _, in dotted parts",
        f"acme.bad_schema\t{PACKAGE} {VERSION}\tbroken: its 'config_schema' must have "
        '"type": "object" at its root',
        f"acme.broken\t{PACKAGE} {VERSION}\tbroken: acme_nodes_for_tests:NotANode is not a "
        "hostcall.blocks.node.Node",
        f"acme.coded\t{PACKAGE} {VERSION}\tTakes a code of a's (a catastrophic pattern for a "
        "backtracking matcher).",
        f"acme.crm_lookup\t{PACKAGE} {VERSION}\tLook up a customer in the CRM by e-mail.",
        f"acme.explode\t{PACKAGE} {VERSION}\tRaises with a secret in its message.",
        f"acme.fetch\t{PACKAGE} {VERSION}\tSays it reaches its config's URL (and never connects).",
        f"acme.hang\t{PACKAGE} {VERSION}\tNever answers.",
        f"acme.junk\t{PACKAGE} {VERSION}\tReturns what its config asks for, JSON or not.",
        f"acme.missing\t{PACKAGE} {VERSION}\tbroken: could not be imported (AttributeError: "
        "module 'acme_nodes_for_tests' has no attribute 'MissingClass')",
        f"acme.sync_run\t{PACKAGE} {VERSION}\tbroken: its 'run' must be an async method",
    ]


def test_without_the_package_a_block_tool_is_refused_and_nothing_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_problems(tmp_path, lookup_tool()) == [
        "ops.json: tool 'crm_lookup': 'block': 'acme.crm_lookup' is not installed (installed: "
        "none; `hostcall blocks` lists them)"
    ]
    assert main(["blocks"]) == 0
    assert "no blocks installed" in capsys.readouterr().out


def test_a_node_tool_in_the_import_format_loads_and_runs(
    tmp_path: Path, acme: Any, made: list[Harness]
) -> None:
    seed_tool = {
        "toolName": "crm_lookup",
        "toolDescription": "Finds a customer.",
        "aiParams": [{"id": "p1", "key": "email", "type": "string", "required": True}],
        "block": "acme.crm_lookup",
        "config": {"email": "{{ $fromAI.email }}", "region": "us"},
        "effect": "read",
        "executionTimeoutSeconds": 3,
    }
    h = build(tmp_path, seed_tool)
    made.append(h)
    tool = h.runtime.agents["ops"].tool("crm_lookup")
    assert tool is not None and tool.kind == "block" and tool.deadline_seconds == 3
    assert tool.description == "Finds a customer."
    conv, _ = ask(h, "look up ada@example.com")
    assert h.assistant_texts(conv)[-1] == "found Ada Lovelace on gold"
    assert acme.CALLS == [("acme.crm_lookup", {"email": "ada@example.com", "region": "us"})]
