"""Agent definitions: one JSON file per agent, checked completely when the server starts.

A bad file stops the server with one line per problem, naming the file, the tool and the
field. The format is documented in docs/agents.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from server.errors import AgentConfigError
from server.schemas import CompiledSchema, schema_problem

AGENT_KEYS = {
    "id",
    "name",
    "greeting",
    "instructions",
    "allowed_origins",
    "max_steps",
    "model",
    "tools",
}
TOOL_KEYS = {
    "name",
    "kind",
    "description",
    "input_schema",
    "output_schema",
    "require_confirmation",
    "deadline_seconds",
    "approval_timeout_seconds",
}
TOOL_KINDS = {"client"}
MAX_NAME_LENGTH = 64


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    kind: str = "client"
    require_confirmation: bool = False
    deadline_seconds: float = 300.0
    approval_timeout_seconds: float = 600.0

    @property
    def input_validator(self) -> CompiledSchema:
        return _compiled(self.name, "input", self.input_schema)

    @property
    def output_validator(self) -> CompiledSchema:
        return _compiled(self.name, "output", self.output_schema)

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "requireConfirmation": self.require_confirmation,
        }


_COMPILED: dict[tuple[str, str, str], CompiledSchema] = {}


def _compiled(name: str, which: str, schema: dict[str, Any]) -> CompiledSchema:
    key = (name, which, json.dumps(schema, sort_keys=True))
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = CompiledSchema(schema)
    return found


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    name: str
    greeting: str
    instructions: str
    allowed_origins: tuple[str, ...]
    max_steps: int
    model: Mapping[str, Any]
    tools: tuple[Tool, ...]
    source: dict[str, Any]

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)


def valid_tool_name(name: Any) -> bool:
    """Seed rule: starts with a letter or ``_``; then letters, digits, spaces and ``_``."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_NAME_LENGTH
        and (name[0].isalpha() or name[0] == "_")
        and all(c.isalnum() or c in " _" for c in name)
        and name == name.strip()
    )


def valid_origin(origin: Any) -> bool:
    if not isinstance(origin, str):
        return False
    parts = urlsplit(origin)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and origin == f"{parts.scheme}://{parts.netloc}"
        and not parts.username
    )


def parse_agent(
    data: Any, where: str, environ: Mapping[str, str]
) -> tuple[Agent | None, list[str]]:
    """Check one agent definition; return it, or the problems found (all of them)."""
    # Imported here: the model factory imports adapters that import this module's types.
    from server.models.factory import model_problem

    if not isinstance(data, dict):
        return None, [f"{where}: an agent file must hold a JSON object"]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(data) - AGENT_KEYS)]
    agent_id = data.get("id")
    if not isinstance(agent_id, str) or not agent_id.replace("-", "").replace("_", "").isalnum():
        problems.append(f"{where}: 'id' must be a non-empty string of letters, digits, - and _")
    for key in ("name", "greeting", "instructions"):
        if key in data and not isinstance(data[key], str):
            problems.append(f"{where}: {key!r} must be a string")
    origins = data.get("allowed_origins", [])
    if not isinstance(origins, list):
        problems.append(f"{where}: 'allowed_origins' must be a list of origins")
        origins = []
    for origin in origins:
        if not valid_origin(origin):
            problems.append(
                f"{where}: allowed origin {origin!r} is not an origin like 'https://example.com'"
            )
    max_steps = data.get("max_steps", 8)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or not 1 <= max_steps <= 100:
        problems.append(f"{where}: 'max_steps' must be an integer from 1 to 100")
    tools_data = data.get("tools", [])
    if not isinstance(tools_data, list):
        problems.append(f"{where}: 'tools' must be a list")
        tools_data = []
    tools: list[Tool] = []
    seen: set[str] = set()
    for index, raw in enumerate(tools_data):
        tool, tool_problems = _parse_tool(raw, f"{where}: tool #{index + 1}")
        problems += tool_problems
        if tool is None:
            continue
        if tool.name in seen:
            problems.append(f"{where}: tool {tool.name!r}: duplicate name")
        seen.add(tool.name)
        tools.append(tool)
    model = data.get("model", {"kind": "scripted", "rules": []})
    problem = model_problem(model, tools=seen, environ=environ)
    if problem:
        problems.append(f"{where}: model: {problem}")
    if problems:
        return None, problems
    assert isinstance(agent_id, str)
    return Agent(
        id=agent_id,
        name=str(data.get("name", agent_id)),
        greeting=data.get("greeting", ""),
        instructions=data.get("instructions", ""),
        allowed_origins=tuple(origins),
        max_steps=max_steps,
        model=model,
        tools=tuple(tools),
        source=data,
    ), []


def _parse_tool(raw: Any, where: str) -> tuple[Tool | None, list[str]]:
    if not isinstance(raw, dict):
        return None, [f"{where}: must be a JSON object"]
    name = raw.get("name")
    if isinstance(name, str):
        where = f"{where.rsplit(': ', 1)[0]}: tool {name!r}"
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(raw) - TOOL_KEYS)]
    if not valid_tool_name(name):
        problems.append(
            f"{where}: 'name' must start with a letter or _ and hold only letters, digits, "
            f"spaces and _ (at most {MAX_NAME_LENGTH} characters)"
        )
    if raw.get("kind", "client") not in TOOL_KINDS:
        problems.append(f"{where}: 'kind' must be one of {sorted(TOOL_KINDS)}")
    if not isinstance(raw.get("description"), str) or not raw["description"].strip():
        problems.append(f"{where}: 'description' is required (it tells the model when to call)")
    for key in ("input_schema", "output_schema"):
        if key not in raw:
            problems.append(f"{where}: {key!r} is required")
            continue
        problem = schema_problem(raw[key])
        if problem:
            problems.append(f"{where}: {key!r} {problem}")
    if not isinstance(raw.get("require_confirmation", False), bool):
        problems.append(f"{where}: 'require_confirmation' must be true or false")
    for key in ("deadline_seconds", "approval_timeout_seconds"):
        value = raw.get(key, 1)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            problems.append(f"{where}: {key!r} must be a positive number of seconds")
    if problems:
        return None, problems
    assert isinstance(name, str)
    return Tool(
        name=name,
        description=raw["description"],
        input_schema=raw["input_schema"],
        output_schema=raw["output_schema"],
        kind=raw.get("kind", "client"),
        require_confirmation=raw.get("require_confirmation", False),
        deadline_seconds=float(raw.get("deadline_seconds", 300)),
        approval_timeout_seconds=float(raw.get("approval_timeout_seconds", 600)),
    ), []


def load_agents(directory: Path, environ: Mapping[str, str]) -> dict[str, Agent]:
    """Every ``*.json`` agent in ``directory``; raises ``AgentConfigError`` listing all problems."""
    if not directory.is_dir():
        raise AgentConfigError([f"{directory}: agents directory not found"])
    agents: dict[str, Agent] = {}
    problems: list[str] = []
    files = sorted(directory.glob("*.json"))
    if not files:
        problems.append(f"{directory}: no agent files (*.json) found")
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(f"{path.name}: not valid JSON: {exc}")
            continue
        agent, found = parse_agent(data, path.name, environ)
        problems += found
        if agent is None:
            continue
        if agent.id in agents:
            problems.append(f"{path.name}: agent id {agent.id!r} is already used by another file")
        agents[agent.id] = agent
    if problems:
        raise AgentConfigError(problems)
    return agents
