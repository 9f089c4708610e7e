"""Tool policies (issue: timeouts, effects, approvals, limits, simulation, guardrails)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.errors import AgentConfigError
from hostcall.guardrails import Hit, evaluate, parse_guardrails
from hostcall.platform import Environment, Platform
from hostcall.policies import (
    model_content,
    settled_result,
    visible_content,
    visible_outcome,
    visible_view,
)
from hostcall.tools import Tool
from hostcall.views.spec import parse_view
from tests.support.harness import Harness, write_agent
from tests.support.redos import (
    FAST_SECONDS,
    HOSTILE_PATTERN,
    HOSTILE_TEXT,
    RESPONSIVE_SECONDS,
    timed,
    while_answering_healthz,
)

OBJECT = {"type": "object", "properties": {"note": {"type": "string"}}}
PLATFORM = {
    "environments": {
        "dev": {"protected": False, "allowed_hosts": []},
        "prod": {"protected": True, "allowed_hosts": []},
    }
}


def act_tool(**policy: Any) -> dict[str, Any]:
    return {
        "name": "act",
        "description": "Does the thing.",
        "input_schema": {"type": "object", "properties": {"amount": {"type": "number"},
                                                           "email": {"type": "string"}}},
        "output_schema": {"type": "object"},
        **policy,
    }  # fmt: skip


def agent(*tools: dict[str, Any], environment: str = "dev", **extra: Any) -> dict[str, Any]:
    return {
        "id": "ops",
        "environment": environment,
        "model": {
            "kind": "scripted",
            "rules": [
                {"match": r"act (?P<amount>\d+)", "tool": "act",
                 "arguments": {"amount": 0, "email": "ana@example.com"},
                 "reply": "result: {{ result | tojson }}",
                 "error_reply": "error: {{ error.code }}{% if error.rule %} {{ error.rule }}{% endif %}"},  # noqa: E501
                {"match": "twice", "tool": "act", "arguments": {}, "reply": "again"},
            ],
            "fallback": "nothing",
        },
        "tools": list(tools) or [act_tool()],
        **extra,
    }  # fmt: skip


def setup(tmp_path: Path, data: dict[str, Any], **settings: Any) -> Harness:
    directory = tmp_path / "agents"
    write_agent(directory, data)
    write_agent(directory, PLATFORM, name="_platform.json")
    return Harness(tmp_path, directory, **settings)


@pytest.fixture
def make(tmp_path: Path):  # type: ignore[no-untyped-def]
    made: list[Harness] = []

    def build(data: dict[str, Any], **settings: Any) -> Harness:
        h = setup(tmp_path / str(len(made)), data, **settings)
        made.append(h)
        return h

    yield build
    for h in made:
        h.stop()


def first_call(h: Harness, text: str = "act 1") -> tuple[Any, dict[str, Any]]:
    conv = h.conversation("ops")
    h.say(conv, text)
    return conv, h.settle(conv)["calls"][0]


# ---- approval by environment ---------------------------------------------------------------

MATRIX = [
    ("read", "by_environment", "dev", False),
    ("read", "by_environment", "prod", False),
    ("write", "by_environment", "dev", False),
    ("write", "by_environment", "prod", True),
    ("read", "always", "dev", True),
    ("write", "always", "prod", True),
    ("read", "never", "prod", False),
    ("write", "never", "dev", False),
]


@pytest.mark.parametrize(("effect", "approval", "env", "needs"), MATRIX)
def test_approval_by_environment_matrix(
    make: Any, effect: str, approval: str, env: str, needs: bool
) -> None:
    h = make(agent(act_tool(effect=effect, approval=approval), environment=env))
    _, call = first_call(h)
    assert call["state"] == ("awaiting_confirmation" if needs else "dispatched")
    if needs:
        expected = "protected_write" if (effect, env) == ("write", "prod") else "always"
        assert call["approval"]["reason"] == expected


def test_never_for_a_write_in_a_protected_environment_is_refused_at_load(tmp_path: Path) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, agent(act_tool(effect="write", approval="never"), environment="prod"))
    write_agent(directory, PLATFORM, name="_platform.json")
    with pytest.raises(AgentConfigError) as caught:
        load_agents(directory, {})
    assert caught.value.problems == [
        "ops.json: tool 'act': 'approval': 'never' is refused for a write tool in the protected "
        "environment 'prod' (writes there always need a person)"
    ]


def test_a_protected_write_cannot_slip_past_approval_at_run_time(make: Any) -> None:
    # Loaded while 'dev' was unprotected, with approval "never"...
    h = make(agent(act_tool(effect="write", approval="never"), environment="dev"))
    _, call = first_call(h)
    assert call["state"] == "dispatched"
    # ...then the environment became protected (the platform is read live): a person must
    # approve, whatever the frozen definition says.
    h.runtime.engine.agents.platform = Platform({"dev": Environment("dev", protected=True)})
    _, call = first_call(h)
    assert call["state"] == "awaiting_confirmation"
    assert call["approval"] == {"reason": "protected_write", "scopes": ["once"]}


def test_an_undefined_environment_is_refused_at_load(tmp_path: Path) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, agent(environment="staging"))
    write_agent(directory, PLATFORM, name="_platform.json")
    with pytest.raises(AgentConfigError) as caught:
        load_agents(directory, {})
    assert "environment 'staging' is not defined" in caught.value.problems[0]


# ---- approval timeout and scope ------------------------------------------------------------


def test_approval_expires_across_a_restart_and_is_never_executed(make: Any) -> None:
    h = make(agent(act_tool(approval="always", approval_timeout_seconds=0.4)))
    conv, call = first_call(h)
    assert call["state"] == "awaiting_confirmation"
    h.stop()
    h.clock.advance(0.6)
    h.start()
    snap = h.settle(conv)
    assert snap["calls"][0]["state"] == "expired"
    assert snap["calls"][0]["outcome"]["error"]["code"] == "approval_expired"
    late = h.decide(call, "approve")
    assert late.status_code == 410
    assert "hostcall.tool_call_dispatch" not in [t for t, _ in h.events(conv)]
    assert h.assistant_texts(conv)[-1] == "error: approval_expired"


def test_allow_for_this_conversation_skips_later_approvals_of_that_tool(make: Any) -> None:
    h = make(agent(act_tool(approval="always")))
    conv, call = first_call(h)
    assert call["approval"]["scopes"] == ["once", "conversation"]
    assert h.decide(call, "approve", scope="conversation").status_code == 200
    dispatched = h.open_call(conv, "dispatched")
    assert dispatched["approval"]["scope"] == "conversation"
    h.answer(dispatched, {})
    h.settle(conv)
    h.say(conv, "act 2")
    second = h.settle(conv)["calls"][-1]
    assert second["state"] == "dispatched"
    assert second["approval"] == {"reason": "grant", "scope": "conversation"}
    # Another conversation has no grant.
    _, other = first_call(h)
    assert other["state"] == "awaiting_confirmation"


def test_allow_once_asks_again_next_time(make: Any) -> None:
    h = make(agent(act_tool(approval="always")))
    conv, call = first_call(h)
    assert h.decide(call, "approve", scope="once").status_code == 200
    h.answer(h.open_call(conv, "dispatched"), {})
    h.settle(conv)
    h.say(conv, "act 2")
    assert h.settle(conv)["calls"][-1]["state"] == "awaiting_confirmation"


def test_a_protected_write_offers_no_conversation_scope(make: Any) -> None:
    h = make(agent(act_tool(effect="write"), environment="prod"))
    conv, call = first_call(h)
    assert call["approval"]["scopes"] == ["once"]
    r = h.decide(call, "approve", scope="conversation")
    assert (
        r.status_code == 400
        and "scope 'conversation' is not offered" in r.json()["error"]["message"]
    )
    assert h.settle(conv)["calls"][0]["state"] == "awaiting_confirmation"  # nothing lost


# ---- limits --------------------------------------------------------------------------------


def test_calls_past_max_calls_per_pass_get_call_limit_reached(make: Any) -> None:
    data = agent(act_tool(max_calls_per_pass=2))
    data["model"]["rules"] = [{
        "match": "act",
        "calls": [{"tool": "act", "arguments": {"amount": n}} for n in (1, 2, 3)],
        "reply": "{% for r in results %}{{ r.error.code if r.error else 'ok' }} {% endfor %}",
    }]  # fmt: skip
    h = make(data)
    conv = h.conversation("ops")
    h.say(conv, "act")
    calls = h.settle(conv)["calls"]
    assert [c["state"] for c in calls] == ["dispatched", "dispatched", "failed"]
    assert calls[2]["outcome"]["error"]["code"] == "call_limit_reached"
    assert h.model_error(calls[2])["limit"] == 2
    for call in calls[:2]:
        assert h.answer(call, {}).status_code == 200
    assert h.settle(conv)["run"]["status"] == "finished"
    assert h.assistant_texts(conv)[-1].split() == ["call_limit_reached", "ok", "ok"]


def test_calls_within_max_calls_per_pass_all_run(make: Any) -> None:
    data = agent(act_tool(max_calls_per_pass=3))
    data["model"]["rules"] = [{
        "match": "act", "calls": [{"tool": "act", "arguments": {}} for _ in range(3)],
    }]  # fmt: skip
    h = make(data)
    conv = h.conversation("ops")
    h.say(conv, "act")
    assert [c["state"] for c in h.settle(conv)["calls"]] == ["dispatched"] * 3


def test_result_truncated_exactly_past_the_limit(make: Any) -> None:
    h = make(agent(act_tool(max_result_kb=1)))
    limit = 1024
    for size, truncated in [(limit, False), (limit + 1, True)]:
        conv, call = first_call(h)
        # {"note":"xxx"} is 11 bytes of wrapping.
        output = {"note": "x" * (size - 11)}
        assert len(json.dumps(output, separators=(",", ":"))) == size
        assert h.answer(call, output).status_code == 200
        h.settle(conv)
        content = next(d for t, d in h.events(conv) if t == "TOOL_CALL_RESULT")["content"]
        seen = json.loads(content)
        if truncated:
            assert seen["truncated"] is True
            assert seen["totalBytes"] == size and seen["shownBytes"] == limit
            assert seen["cutBytes"] == 1
            assert "cut" in seen["message"]
        else:
            assert seen == output
        stored = h.call(h.runtime.store.get_call, call["toolCallId"])
        assert stored is not None and stored.outcome == {"output": output}  # ledger keeps it all


# ---- simulation ----------------------------------------------------------------------------


def test_simulated_run_returns_the_simulation_result_and_executes_nothing(make: Any) -> None:
    h = make(agent(act_tool(approval="always", simulation_result={"note": "pretend"})))
    conv = h.conversation("ops")
    r = h.http.post(
        f"/api/conversations/{conv.id}/messages",
        json={"text": "act 1", "simulate": True},
        headers=conv.auth,
    )
    assert r.status_code == 202
    snap = h.settle(conv)
    assert snap["run"]["status"] == "finished"
    call = snap["calls"][0]
    assert call["state"] == "answered" and call["simulated"] is True
    types = [t for t, _ in h.events(conv)]
    assert "hostcall.tool_call_dispatch" not in types
    assert "hostcall.tool_call_approval_requested" not in types
    result = next(d for t, d in h.events(conv) if t == "TOOL_CALL_RESULT")
    assert result["simulated"] is True
    assert json.loads(result["content"]) == {"simulated": True, "result": {"note": "pretend"}}
    assert h.assistant_texts(conv)[-1] == '(Simulated) result: {"note": "pretend"}'


# ---- guardrails ----------------------------------------------------------------------------


def test_input_guardrail_blocks_the_call(make: Any) -> None:
    tool = act_tool(
        guardrails=[
            {
                "name": "big amounts",
                "on": "input",
                "action": "block",
                "when": {"path": "/amount", "op": "gt", "value": 100},
            }
        ]
    )
    data = agent(tool)
    data["model"]["rules"][0]["arguments"] = {"amount": 500}
    h = make(data)
    conv, call = first_call(h)
    assert call["state"] == "failed"
    assert call["outcome"]["error"]["code"] == "blocked_by_guardrail"
    assert h.model_error(call)["rule"] == "big amounts"
    assert h.assistant_texts(conv)[-1] == "error: blocked_by_guardrail big amounts"
    types = [t for t, _ in h.events(conv)]
    assert "hostcall.tool_call_guardrail" in types and "hostcall.tool_call_dispatch" not in types


def test_input_guardrail_does_not_block_when_the_condition_is_false(make: Any) -> None:
    tool = act_tool(
        guardrails=[
            {
                "name": "big amounts",
                "on": "input",
                "action": "block",
                "when": {"path": "/amount", "op": "gt", "value": 100},
            }
        ]
    )
    h = make(agent(tool))
    _, call = first_call(h)
    assert call["state"] == "dispatched"


def test_input_guardrail_can_require_approval(make: Any) -> None:
    tool = act_tool(approval="never", guardrails=[
        {"name": "external email", "on": "input", "action": "require_approval",
         "when": [{"path": "/email", "op": "regex", "value": "@example\\.com$"}]}])  # fmt: skip
    h = make(agent(tool))
    _, call = first_call(h)
    assert call["state"] == "awaiting_confirmation"
    assert call["approval"]["reason"] == "guardrail"


def test_output_guardrail_redacts_fields_before_the_model_sees_them(make: Any) -> None:
    tool = act_tool(guardrails=[{"name": "hide email", "on": "output", "action": "redact",
                                 "when": {"path": "/email", "op": "exists"},
                                 "fields": ["/email"]}])  # fmt: skip
    h = make(agent(tool))
    conv, call = first_call(h)
    output = {"email": "secret@example.com", "ok": True}
    assert h.answer(call, output).status_code == 200
    h.settle(conv)
    content = json.loads(next(d for t, d in h.events(conv) if t == "TOOL_CALL_RESULT")["content"])
    assert content == {"email": "[redacted]", "ok": True}
    assert "secret@example.com" not in h.assistant_texts(conv)[-1]
    stored = h.call(h.runtime.store.get_call, call["toolCallId"])
    assert stored is not None and stored.outcome is not None
    assert stored.outcome["output"]["email"] == "secret@example.com"


def test_output_guardrail_blocks_and_log_rules_are_recorded(make: Any) -> None:
    tool = act_tool(guardrails=[
        {"name": "audit", "on": "output", "action": "log", "when": {"path": "/ok", "op": "exists"}},
        {"name": "no secrets", "on": "output", "action": "block",
         "when": {"path": "/note", "op": "contains", "value": "password"}},
    ])  # fmt: skip
    h = make(agent(tool))
    conv, call = first_call(h)
    assert h.answer(call, {"ok": True, "note": "the Password is hunter2"}).status_code == 200
    snap = h.settle(conv)
    assert snap["calls"][0]["outcome"]["error"]["code"] == "blocked_by_guardrail"
    assert "hunter2" not in json.dumps(snap)
    fired = [d["rule"] for t, d in h.events(conv) if t == "hostcall.tool_call_guardrail"]
    assert fired == ["audit", "no secrets"]


def test_the_server_answers_while_a_guardrail_matches_a_hostile_input(make: Any) -> None:
    tool = act_tool(guardrails=[{"name": "all a", "on": "input", "action": "block",
                                 "when": {"path": "/email", "op": "regex",
                                          "value": HOSTILE_PATTERN}}])  # fmt: skip
    data = agent(tool)
    rule = {"match": "act (?P<email>.+)", "tool": "act", "arguments": {"email": "{{ email }}"}}
    data["model"]["rules"][0] = {**rule, "reply": "done"}
    h = make(data)
    conv = h.conversation("ops")

    def send() -> dict[str, Any]:
        h.say(conv, f"act {HOSTILE_TEXT}")
        return h.settle(conv)

    snap, longest = while_answering_healthz(h.http, send)
    assert longest < RESPONSIVE_SECONDS, f"/healthz waited {longest:.2f}s"
    # The rule did not match (the text ends with "!"): the call went to the page, whole.
    [call] = snap["calls"]
    assert call["state"] == "dispatched" and call["input"] == {"email": HOSTILE_TEXT}
    assert "hostcall.tool_call_guardrail" not in [t for t, _ in h.events(conv)]
    rules = parse_guardrails(tool["guardrails"])
    hits, seconds = timed(lambda: evaluate(rules, "input", {"email": HOSTILE_TEXT}))
    assert hits == [] and seconds < FAST_SECONDS, f"the guardrail took {seconds:.2f}s"
    assert evaluate(rules, "input", {"email": "aaa"}) == [Hit("all a", "block", "input")]


def test_bad_guardrail_definitions_are_refused_at_load(tmp_path: Path) -> None:
    cases = [
        ({"name": "r", "on": "input", "action": "explode", "when": {"path": "/a", "op": "equals"}},
         "'action' must be one of"),
        ({"name": "r", "on": "input", "action": "redact", "fields": ["/a"],
          "when": {"path": "/a", "op": "exists"}}, "'redact' applies to outputs only"),
        ({"name": "r", "action": "block", "when": {"path": "a", "op": "equals"}},
         "JSON Pointer"),
        ({"name": "r", "action": "block", "when": {"path": "/a", "op": "regex", "value": "("}},
         "not a valid regular expression"),
        ({"name": "r", "action": "block",
          "when": {"path": "/a", "op": "regex", "value": r"(\w+) \1"}},
         "backreferences"),
        ({"name": "r", "action": "block",
          "when": {"path": "/a", "op": "regex", "value": "(?<!@)example"}},
         "lookbehind"),
    ]  # fmt: skip
    for index, (rule, message) in enumerate(cases):
        directory = tmp_path / f"agents{index}"
        write_agent(directory, agent(act_tool(guardrails=[rule])))
        with pytest.raises(AgentConfigError) as caught:
            load_agents(directory, {})
        assert message in caught.value.problems[0], caught.value.problems


# ---- frozen configuration ------------------------------------------------------------------


def test_a_run_keeps_its_agent_definition_when_the_file_changes(make: Any) -> None:
    h = make(agent(act_tool(output_schema={"type": "object", "required": ["old"]})))
    conv, call = first_call(h)
    changed = agent(act_tool(output_schema={"type": "object", "required": ["new"]}))
    changed["model"]["rules"][0]["reply"] = "NEW REPLY"
    write_agent(h.agents_dir, changed, name="ops.json")
    h.runtime.reload_agents()
    # The run in flight still validates against the old schema and replies the old way.
    assert h.answer(call, {"new": 1}).status_code == 422
    assert h.answer(call, {"old": 1}).status_code == 200
    h.settle(conv)
    assert h.assistant_texts(conv)[-1] == 'result: {"old": 1}'
    # A new run uses the new definition.
    conv2, call2 = first_call(h)
    assert h.answer(call2, {"new": 1}).status_code == 200
    h.settle(conv2)
    assert h.assistant_texts(conv2)[-1] == "NEW REPLY"


def test_a_conversation_whose_agent_was_removed_gets_a_clear_error(make: Any) -> None:
    h = make(agent())
    conv = h.conversation("ops")
    (h.agents_dir / "ops.json").rename(h.agents_dir / "ops.json.off")
    write_agent(h.agents_dir, {**agent(), "id": "other"}, name="other.json")
    h.runtime.reload_agents()
    for path, body in [("capabilities", {"tools": []}), ("messages", {"text": "act 1"})]:
        r = h.http.post(f"/api/conversations/{conv.id}/{path}", json=body, headers=conv.auth)
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_agent", r.text
    assert h.snapshot(conv)["messages"] == []  # nothing half-done


# ---- a settled call's result, drawn once ---------------------------------------------------


def _settled_tools() -> list[Tool]:
    view, problems = parse_view(
        {"type": "list", "items": "$.tasks", "item": {"title": "@.title"}}, "act"
    )
    assert view is not None and not problems
    hide = parse_guardrails([{"name": "hide email", "on": "output", "action": "redact",
                              "when": {"path": "/email", "op": "exists"},
                              "fields": ["/email"]}])  # fmt: skip
    base = Tool("act", "Does the thing.", {"type": "object"}, {"type": "object"})
    return [
        base,
        replace(base, view=view),
        replace(base, guardrails=hide, view=view),
        replace(base, untrusted=True, view=view),
        replace(base, max_result_kb=0.05),
        replace(base, untrusted=True, max_result_kb=0.05, guardrails=hide),
    ]


SETTLED_OUTCOMES: list[dict[str, Any]] = [
    {"output": {"tasks": [{"title": "a"}, {"title": "b"}], "email": "ana@example.com"}},
    {"output": {"note": "x" * 200}},
    {"output": {"tasks": [{"title": "a"}]}, "simulated": True},
    {"output": {"email": "ana@example.com"},
     "guardrails": [{"rule": "hide email", "on": "output", "action": "redact"}]},
    {"error": {"code": "timeout", "message": "late", "delivered": True}},
    {"error": {"code": "cancelled", "message": "stopped", "mayHaveRun": True, "reason": "no"}},
]  # fmt: skip


@pytest.mark.parametrize("outcome", SETTLED_OUTCOMES)
def test_a_settled_result_is_what_each_view_of_it_shows(outcome: dict[str, Any]) -> None:
    # The settling unit draws the four in one go; each must stay what the functions apart
    # give (the snapshot's call view still calls them one at a time).
    for tool in [None, *_settled_tools()]:
        content = model_content(tool, outcome)
        shown = settled_result(tool, outcome)
        assert shown.content == content
        assert shown.event_content == visible_content(tool, outcome, content)
        assert shown.outcome == visible_outcome(tool, outcome)
        assert shown.view == visible_view(tool, outcome)
