"""A kind of server-side tool added through the registry alone (tests/support/block_kinds.py)
is parsed, checked at load and run by the engine under every tool's policies: approval, the
execution timeout, the environment's hosts and the visitor's identity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.blocks import registry
from hostcall.errors import AgentConfigError
from hostcall.tools import parse_tool
from tests.support.block_kinds import TallyKind
from tests.support.harness import Conv, Harness, write_agent


@pytest.fixture
def tally() -> Iterator[TallyKind]:
    kind = TallyKind()
    with registry.registered(kind):
        yield kind


def tally_tool(**extra: Any) -> dict[str, Any]:
    return {"name": "count", "kind": "tally", "description": "Counts.", "say": "hi",
            "effect": "read", **extra}  # fmt: skip


def build(tmp_path: Path, tool: dict[str, Any], made: list[Harness], **agent: Any) -> Harness:
    directory = tmp_path / "agents"
    write_agent(directory, {
        "id": "ops",
        "model": {"kind": "scripted", "rules": [{
            "match": "count (?P<what>.+)", "tool": "count", "arguments": {"what": "{{ what }}"},
            "reply": "said {{ result.said }} {{ result.count }}",
            "error_reply": "error {{ error.code }}",
        }]},
        "tools": [tool],
        **agent,
    })  # fmt: skip
    h = Harness(tmp_path, directory)
    made.append(h)
    return h


def ask(h: Harness, text: str) -> tuple[Conv, dict[str, Any]]:
    conv = h.conversation("ops")
    h.say(conv, text)
    return conv, h.settle(conv)


def test_a_registered_kind_is_parsed_and_run_by_the_engine(
    tmp_path: Path, tally: TallyKind, made: list[Harness]
) -> None:
    h = build(tmp_path, tally_tool(), made)
    conv, _ = ask(h, "count sheep")
    snap = h.finish(conv)
    assert [c["state"] for c in snap["calls"]] == ["answered"]
    assert tally.calls == [{"what": "sheep"}]
    assert h.assistant_texts(conv)[-1] == "said hi 1"


def test_a_registered_kind_reads_its_own_keys(tally: TallyKind) -> None:
    tool, problems = parse_tool(tally_tool(color="red", say=3), "ops.json: tool #1")
    assert tool is None
    assert problems == [
        "ops.json: tool 'count': unknown key 'color'",
        "ops.json: tool 'count': 'say' must be text",
    ]


def test_a_kind_nobody_registered_is_refused() -> None:
    _, problems = parse_tool(tally_tool(), "ops.json: tool #1")
    assert problems == [
        "ops.json: tool 'count': 'kind' must be one of client, http, mcp, person, block "
        "(got 'tally')"
    ]


def test_a_registered_kind_waits_for_a_persons_approval(
    tmp_path: Path, tally: TallyKind, made: list[Harness]
) -> None:
    h = build(tmp_path, tally_tool(effect="write", approval="always"), made)
    conv, _ = ask(h, "count one")
    call = h.open_call(conv, "awaiting_confirmation")
    assert h.decide(call, "reject", reason="no").status_code == 200
    h.finish(conv)
    assert tally.calls == []  # rejected: never run

    h.say(conv, "count two")
    call = h.open_call(conv, "awaiting_confirmation")
    assert h.decide(call, "approve").status_code == 200
    h.finish(conv)
    assert tally.calls == [{"what": "two"}]
    assert h.assistant_texts(conv)[-1] == "said hi 1"


def test_a_registered_kind_that_ignores_its_deadline_is_cut_at_it(
    tmp_path: Path, tally: TallyKind, made: list[Harness]
) -> None:
    h = build(tmp_path, tally_tool(hang=True, deadline_seconds=0.3), made)
    conv, _ = ask(h, "count forever")
    snap = h.finish(conv)
    error = h.model_error(snap["calls"][0])
    assert error == {"code": "block_failed", "message": "The block failed: timeout after 0.3 s"}
    assert h.assistant_texts(conv)[-1] == "error block_failed"


def test_a_registered_kinds_hosts_and_user_values_are_checked_at_load(
    tmp_path: Path, tally: TallyKind, made: list[Harness]
) -> None:
    with pytest.raises(AgentConfigError) as caught:
        build(tmp_path, tally_tool(reach="crm.example.com:443", as_visitor=True), made)
    problems = caught.value.problems
    assert len(problems) == 2
    assert problems[0].startswith(
        "ops.json: tool 'count': 'reach' names crm.example.com:443, which environment "
        "'default' does not allow"
    )
    assert problems[1] == (
        "ops.json: tool 'count' uses $user, but the agent has no 'identity' block: nobody "
        "would ever be signed in (docs/identity.md)"
    )
