"""A run's stored definition is a row, read back as data from outside: one that no longer
parses, or a run that is gone, is a typed error naming the run, never a bare ``assert``
(hostcall/runs/agents.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.errors import RunUnreadable
from hostcall.store.records import Run, RunStatus
from tests.support.harness import Harness, planner_definition, write_agent
from tests.unit.test_agent_files import agents_folder


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    write_agent(agents_folder(tmp_path / "agents"), planner_definition())
    harness = Harness(tmp_path, tmp_path / "agents")
    yield harness
    harness.stop()


def stored_run(h: Harness, agent: dict[str, Any]) -> str:
    conv = h.conversation("planner")
    run = Run(f"r_{uuid.uuid4().hex[:16]}", conv.id, agent, RunStatus.WAITING)
    h.call(h.runtime.store.create_run, run)
    return run.id


def test_a_stored_definition_that_no_longer_parses_is_a_typed_error(h: Harness) -> None:
    run_id = stored_run(h, {"id": "planner", "tools": "not a list"})
    agents = h.runtime.engine.agents
    with pytest.raises(RunUnreadable) as caught:
        h.call(agents.run_agent, run_id)
    assert caught.value.run_id == run_id and caught.value.status == 500
    assert caught.value.problems == [f"run {run_id}: 'tools' must be a list"]
    with pytest.raises(RunUnreadable):
        h.call(agents.agent_of_run, "r_gone")


def test_a_stored_mcp_entry_is_read_back_whatever_its_rules_read(h: Harness) -> None:
    """A run frozen by an earlier version, whose reply read a structured result's field at
    the top (``result.email``), still resumes: its replies render leniently."""
    entry = {
        "kind": "mcp",
        "server": "crm",
        "tool": "lookup",
        "name": "lookup",
        "description": "Looks up.",
        "effect": "read",
        "output_schema": {"type": "object", "properties": {"email": {"type": "string"}}},
    }
    rule = {"match": "x", "tool": "lookup", "arguments": {}, "reply": "{{ result.email }}"}
    definition = {"id": "planner", "tools": [entry],
                  "model": {"kind": "scripted", "rules": [rule]}}  # fmt: skip
    agent = h.call(h.runtime.engine.agents.run_agent, stored_run(h, definition))
    assert agent is not None and agent.tool("lookup") is not None
