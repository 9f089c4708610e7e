"""Tool definitions and their policies (docs/agents.md).

Three kinds: ``client`` tools run in the host page (or a person answers them through a form);
``http`` tools run an HTTP request block on the server; ``mcp`` tools call a tool of an MCP
server (one such entry is what a run freezes of an agent's MCP servers: hostcall/blocks/mcp/);
``block`` tools run a node an installed package provides (``hostcall.blocks.installed``).
All carry the same policies:
execution timeout, effect, human approval and its timeout, calls per agent pass, result size
sent to the model, a simulation result, and guardrails.

A tool may also be written in the tool-block import format (``toolName``, ``toolDescription``,
``aiParams``, ``block``…); ``from_import_format`` turns it into ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hostcall.blocks.http_request import (
    AiParam,
    HttpRequestSpec,
    ai_params_schema,
    parse_ai_params,
    parse_request_spec,
)
from hostcall.blocks.installed import NodeTool, parse_node_tool
from hostcall.blocks.mcp.results import result_schema
from hostcall.guardrails import Guardrail, parse_guardrails
from hostcall.schemas import CompiledSchema, pattern_problems, required_problems, schema_problem

KINDS = ("client", "http", "mcp", "person", "block")
EFFECTS = ("read", "write")
APPROVALS = ("by_environment", "always", "never")
POLICY_KEYS = {
    "deadline_seconds", "approval_timeout_seconds", "effect", "approval", "require_confirmation",
    "max_calls_per_pass", "max_result_kb", "simulation_result", "guardrails", "idempotent",
    "title",
}  # fmt: skip
CLIENT_KEYS = {"name", "kind", "description", "input_schema", "output_schema", *POLICY_KEYS}
MAX_TITLE_LENGTH = 80
HTTP_KEYS = {
    "name", "kind", "description", "ai_params", "request", "connection", "output_schema",
    "max_response_kb", *POLICY_KEYS,
}  # fmt: skip
MCP_KEYS = {
    "name", "kind", "description", "server", "tool", "input_schema", "output_schema",
    "max_response_kb", "effect_by_hint", *POLICY_KEYS,
}  # fmt: skip
# What of an MCP tool's texts reaches the model by default (blocks/mcp/results.py).
MCP_RESPONSE_KB = 256.0
# The built-in ``person`` tool (kind ``person``): the agent asks for a person of the team,
# which queues the conversation in the console (hostcall/handoff.py). Its schemas are ours.
PERSON_KEYS = {"name", "kind", "description", *POLICY_KEYS}
PERSON_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 500,
                              "description": "Why the visitor needs a person, in a sentence"}},
    "additionalProperties": False,
}  # fmt: skip
PERSON_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"queued": {"type": "boolean"}},
    "required": ["queued"],
}
BLOCK_KEYS = {
    "name", "kind", "description", "block", "config", "ai_params", "output_schema", *POLICY_KEYS,
}  # fmt: skip
HTTP_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"status": {"type": "integer"}, "body": {}},
    "required": ["status"],
}
MAX_NAME_LENGTH = 64
# The import format's names for our keys (seed 003's tool block).
IMPORT_KEYS = {
    "toolName": "name", "toolDescription": "description", "aiParams": "ai_params",
    "executionTimeoutSeconds": "deadline_seconds", "effect": "effect",
    "humanApproval": "approval", "approvalTimeoutMinutes": "approval_timeout_seconds",
    "maxCallsPerPass": "max_calls_per_pass", "maxResultSizeKb": "max_result_kb",
    "simulationResult": "simulation_result", "guardrails": "guardrails",
    "connection": "connection", "outputSchema": "output_schema", "config": "config",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class HttpBlock:
    spec: HttpRequestSpec
    params: tuple[AiParam, ...]
    connection: str | None = None
    max_response_kb: float = 1024.0


@dataclass(frozen=True, slots=True)
class McpBlock:
    server: str
    tool: str
    # The tool declared an outputSchema: its result must carry structured content.
    structured: bool = False
    max_response_kb: float = MCP_RESPONSE_KB
    # Its effect is read only because the server's annotations say so: the server's claim,
    # which a protected environment does not take (``Tool.protected_write``).
    effect_by_hint: bool = False


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    kind: str = "client"
    effect: str = "write"
    approval: str = "by_environment"
    deadline_seconds: float = 300.0
    approval_timeout_seconds: float = 600.0
    max_calls_per_pass: int | None = None
    max_result_kb: float | None = None
    has_simulation_result: bool = False
    simulation_result: Any = None
    guardrails: tuple[Guardrail, ...] = ()
    http: HttpBlock | None = None
    mcp: McpBlock | None = None
    node: NodeTool | None = None
    # What end users see instead of the tool's id ("Create a task", not "create_task").
    title: str = ""
    idempotent: bool = False

    @property
    def rerunnable(self) -> bool:
        """May run again with the same call id if its surface went away."""
        return self.effect == "read" or self.idempotent

    @property
    def protected_write(self) -> bool:
        """Whether a protected environment holds a call for a person: every write, and an
        MCP tool that is a read only by its server's annotations (a server may claim
        ``readOnlyHint`` for a tool that deletes; only the agent file's ``read`` is trusted
        there)."""
        return self.effect == "write" or (self.mcp is not None and self.mcp.effect_by_hint)

    @property
    def require_confirmation(self) -> bool:
        return self.approval == "always"

    @property
    def input_validator(self) -> CompiledSchema:
        return _compiled(self.input_schema)

    @property
    def output_validator(self) -> CompiledSchema:
        return _compiled(self.output_schema)

    def public(self) -> dict[str, Any]:
        """What the widget and the page may know of a tool."""
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "requireConfirmation": self.require_confirmation,
            "title": self.title or self.name,
            "effect": self.effect,
            "rerunnable": self.rerunnable,
        }


_COMPILED: dict[str, CompiledSchema] = {}
# By the schema object: a tool's validator is asked for on every answer, and encoding the
# schema to find it cost more than the check itself. The entry holds the schema,
# so its id is not reused while the entry lives; reloads make new objects, hence the bound.
_BY_OBJECT: dict[int, tuple[dict[str, Any], CompiledSchema]] = {}
_BY_OBJECT_MAX = 4096


def _compiled(schema: dict[str, Any]) -> CompiledSchema:
    held = _BY_OBJECT.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    key = json.dumps(schema, sort_keys=True)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = CompiledSchema(schema)
    if len(_BY_OBJECT) >= _BY_OBJECT_MAX:
        _BY_OBJECT.clear()
    _BY_OBJECT[id(schema)] = (schema, found)
    return found


def valid_tool_name(name: Any, *, kind: str = "client") -> bool:
    """Seed rule: starts with a letter or ``_``; then letters, digits, spaces and ``_``.

    Server-side tools follow the tool-block rule instead: letters, digits, ``_`` and ``-``.
    """
    extra = " _" if kind == "client" else "_-"
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_NAME_LENGTH
        and (name[0].isalpha() or name[0] == "_")
        and all(c.isalnum() or c in extra for c in name)
        and name == name.strip()
    )


def from_import_format(raw: dict[str, Any]) -> dict[str, Any]:
    """A tool in the tool-block format, in our keys (unknown keys are kept, to be reported)."""
    converted: dict[str, Any] = {"kind": "http"}
    for key, value in raw.items():
        if key == "block":
            if isinstance(value, str):  # an installed block, by name
                converted |= {"kind": "block", "block": value}
            elif isinstance(value, dict):
                converted["request"] = {k: v for k, v in value.items() if k != "type"}
            continue
        ours = IMPORT_KEYS.get(key, key)
        if key == "approvalTimeoutMinutes" and isinstance(value, int | float):
            value = value * 60
        if key == "aiParams" and isinstance(value, list):
            value = [{k: v for k, v in p.items() if k != "id"} if isinstance(p, dict) else p
                     for p in value]  # fmt: skip
        converted[ours] = value
    return converted


def parse_tool(raw: Any, where: str) -> tuple[Tool | None, list[str]]:
    """Check one tool definition; return it, or every problem found."""
    if not isinstance(raw, dict):
        return None, [f"{where}: must be a JSON object"]
    if "toolName" in raw:
        raw = from_import_format(raw)
    name = raw.get("name")
    if isinstance(name, str):
        where = f"{where.rsplit(': ', 1)[0]}: tool {name!r}"
    kind = raw.get("kind", "client")
    if kind not in KINDS:
        return None, [f"{where}: 'kind' must be one of {', '.join(KINDS)} (got {kind!r})"]
    keys = {
        "client": CLIENT_KEYS, "http": HTTP_KEYS, "mcp": MCP_KEYS, "person": PERSON_KEYS,
        "block": BLOCK_KEYS,
    }  # fmt: skip
    allowed = keys[kind]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(raw) - allowed)]
    if not valid_tool_name(name, kind=kind):
        rule = "letters, digits, spaces and _" if kind == "client" else "letters, digits, _ and -"
        problems.append(
            f"{where}: 'name' must start with a letter or _ and hold only {rule} "
            f"(at most {MAX_NAME_LENGTH} characters)"
        )
    node: NodeTool | None = None
    if kind == "block":
        node, found = parse_node_tool(raw)
        problems += [f"{where}: {p}" for p in found]
    # A block tool without a description has its block's (one line, from its package).
    own_description = kind != "block" or "description" in raw
    if own_description and (
        not isinstance(raw.get("description"), str) or not raw["description"].strip()
    ):
        problems.append(f"{where}: 'description' is required (it tells the model when to call)")
    http: HttpBlock | None = None
    mcp: McpBlock | None = None
    if kind == "mcp":
        mcp, input_schema, output_schema = _parse_mcp(raw, where, problems)
    elif kind == "client":
        for key in ("input_schema", "output_schema"):
            if key not in raw:
                problems.append(f"{where}: {key!r} is required")
            elif problem := schema_problem(raw[key]):
                problems.append(f"{where}: {key!r} {problem}")
            else:
                found = required_problems(raw[key]) + pattern_problems(raw[key])
                problems += [f"{where}: {key!r} {p}" for p in found]
        input_schema, output_schema = raw.get("input_schema", {}), raw.get("output_schema", {})
    elif kind == "person":
        input_schema, output_schema = PERSON_INPUT_SCHEMA, PERSON_OUTPUT_SCHEMA
    elif kind == "block":
        input_schema = ai_params_schema(node.params) if node else {"type": "object"}
        declared = node.block.output_schema if node else None
        # No schema declared: any JSON value (the strict reader has already judged it).
        output_schema = raw.get("output_schema", dict(declared) if declared else {})
        if "output_schema" in raw and (problem := schema_problem(output_schema)):
            problems.append(f"{where}: 'output_schema' {problem}")
    else:
        http, input_schema = _parse_http(raw, where, problems)
        output_schema = raw.get("output_schema", HTTP_OUTPUT_SCHEMA)
        if problem := schema_problem(output_schema):
            problems.append(f"{where}: 'output_schema' {problem}")
        else:
            problems += [f"{where}: 'output_schema' {p}" for p in pattern_problems(output_schema)]
    policy = _parse_policy(raw, where, problems)
    if kind == "person" and "effect" not in raw:
        policy["effect"] = "read"  # queueing changes nothing a person must approve
    if problems:
        return None, problems
    assert isinstance(name, str)
    return Tool(
        name=name,
        description=raw["description"]
        if own_description or node is None
        else node.block.description,
        input_schema=input_schema,
        output_schema=output_schema,
        kind=kind,
        http=http,
        mcp=mcp,
        node=node,
        **policy,
    ), []


def _parse_http(
    raw: dict[str, Any], where: str, problems: list[str]
) -> tuple[HttpBlock | None, dict[str, Any]]:
    try:
        params = parse_ai_params(raw.get("ai_params", []))
        spec = parse_request_spec(raw.get("request"), params)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return None, {"type": "object"}
    connection = raw.get("connection")
    if connection is not None and not isinstance(connection, str):
        problems.append(f"{where}: 'connection' must be the name of a connection")
    size = raw.get("max_response_kb", 1024)
    if not _positive(size):
        problems.append(f"{where}: 'max_response_kb' must be a positive number")
        size = 1024
    return HttpBlock(spec, params, connection, float(size)), ai_params_schema(params)


def _parse_mcp(
    raw: dict[str, Any], where: str, problems: list[str]
) -> tuple[McpBlock | None, dict[str, Any], dict[str, Any]]:
    """One tool of an MCP server, as a run froze it (its schemas are the server's)."""
    server, tool = raw.get("server"), raw.get("tool")
    if not isinstance(server, str) or not isinstance(tool, str) or not server or not tool:
        problems.append(f"{where}: 'server' and 'tool' must name an MCP server and its tool")
    schemas: dict[str, dict[str, Any]] = {}
    for key in ("input_schema", "output_schema"):
        value = raw.get(key, {"type": "object"})
        if problem := schema_problem(value):
            problems.append(f"{where}: {key!r} {problem}")
        else:
            problems += [f"{where}: {key!r} {p}" for p in pattern_problems(value)]
        schemas[key] = value
    size = raw.get("max_response_kb", MCP_RESPONSE_KB)
    if not _positive(size):
        problems.append(f"{where}: 'max_response_kb' must be a positive number")
        size = MCP_RESPONSE_KB
    hinted = raw.get("effect_by_hint", False)
    if not isinstance(hinted, bool):
        problems.append(f"{where}: 'effect_by_hint' must be true or false")
        hinted = False
    structured = "output_schema" in raw
    block = McpBlock(str(server), str(tool), structured, float(size), hinted)
    # An entry's output_schema is the server's, for its structured content: the result
    # itself always has the one shape blocks/mcp/results.py describes.
    output = result_schema(schemas["output_schema"] if structured else None)
    return block, schemas["input_schema"], output


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _parse_policy(raw: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    for key in ("deadline_seconds", "approval_timeout_seconds"):
        if key in raw:
            if _positive(raw[key]):
                policy[key] = float(raw[key])
            else:
                problems.append(f"{where}: {key!r} must be a positive number of seconds")
    effect = raw.get("effect", "write")
    if effect not in EFFECTS:
        problems.append(f"{where}: 'effect' must be 'read' or 'write' (got {effect!r})")
    policy["effect"] = effect
    approval = raw.get("approval")
    confirm = raw.get("require_confirmation")
    if confirm is not None and not isinstance(confirm, bool):
        problems.append(f"{where}: 'require_confirmation' must be true or false")
    if approval is not None and approval not in APPROVALS:
        problems.append(f"{where}: 'approval' must be one of {', '.join(APPROVALS)}")
    if confirm is not None and approval is not None and (approval == "always") != confirm:
        problems.append(f"{where}: 'require_confirmation' and 'approval' disagree; keep one")
    policy["approval"] = approval or ("always" if confirm else "by_environment")
    idempotent = raw.get("idempotent", False)
    if not isinstance(idempotent, bool):
        problems.append(f"{where}: 'idempotent' must be true or false")
    policy["idempotent"] = idempotent is True
    title = raw.get("title", "")
    if not isinstance(title, str) or len(title.strip()) > MAX_TITLE_LENGTH:
        problems.append(f"{where}: 'title' must be text of at most {MAX_TITLE_LENGTH} characters")
    else:
        policy["title"] = title.strip()
    limit = raw.get("max_calls_per_pass")
    if limit is not None:
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
            policy["max_calls_per_pass"] = limit
        else:
            problems.append(f"{where}: 'max_calls_per_pass' must be a whole number, 1 or more")
    size = raw.get("max_result_kb")
    if size is not None:
        if _positive(size):
            policy["max_result_kb"] = float(size)
        else:
            problems.append(f"{where}: 'max_result_kb' must be a positive number")
    if "simulation_result" in raw:
        policy["has_simulation_result"] = True
        policy["simulation_result"] = raw["simulation_result"]
    if "guardrails" in raw:
        try:
            policy["guardrails"] = parse_guardrails(raw["guardrails"])
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    return policy
