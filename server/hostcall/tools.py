"""Tool definitions and their policies (docs/agents.md).

A ``client`` tool runs in the host page (or a person answers it through a form). Every other
kind runs on the server: its definition's own keys are read by its ``BlockKind``, found by
name in ``hostcall.blocks.registry`` (an HTTP request, an MCP server's tool, the built-in
person tool, an installed node), and its block is what the engine runs for a call. All carry
the same policies: execution timeout, effect, human approval and its timeout, calls per agent
pass, result size sent to the model, a simulation result, and guardrails.

A tool may also be written in the tool-block import format (``toolName``, ``toolDescription``,
``aiParams``, ``block``…); ``from_import_format`` turns it into ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hostcall.blocks import registry
from hostcall.blocks.kind import Block, positive
from hostcall.guardrails import Guardrail, parse_guardrails
from hostcall.schemas import CompiledSchema, pattern_problems, required_problems, schema_problem
from hostcall.views.spec import ViewSpec, parse_view

# The wire's enum of kinds (the OpenAPI document's): the page's, then the registry's.
KINDS = ("client", *registry.names())
EFFECTS = ("read", "write")
APPROVALS = ("by_environment", "always", "never")
POLICY_KEYS = {
    "deadline_seconds", "approval_timeout_seconds", "effect", "approval", "require_confirmation",
    "max_calls_per_pass", "max_result_kb", "simulation_result", "guardrails", "idempotent",
    "title", "view",
}  # fmt: skip
# The output schema's hint of a view, where the agent file's tool sets none (docs/agents.md).
VIEW_HINT = "x-hostcall-view"
# Every tool's keys; a kind adds its own (``BlockKind.keys``).
COMMON_KEYS = {"name", "kind", "description", *POLICY_KEYS}
CLIENT_KEYS = {*COMMON_KEYS, "input_schema", "output_schema"}
MAX_TITLE_LENGTH = 80
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
    # What the server runs for a call (hostcall/blocks/kind.py); None for a client tool.
    block: Block | None = None
    # Its effect is read only because an MCP server's annotations say so: the server's
    # claim, which a protected environment does not take (``protected_write``).
    effect_by_hint: bool = False
    # What end users see instead of the tool's id ("Create a task", not "create_task").
    title: str = ""
    idempotent: bool = False
    # A page tool (hostcall/page_tools.py): the digest of the registration the run planned
    # with (a call goes only to a surface holding the same), whether the page marked its
    # results untrusted, and whether a form may answer it (only with the agent file's
    # output schema).
    page_digest: str = ""
    untrusted: bool = False
    has_form: bool = True
    # What the widget draws from a result (hostcall/views/); None: the result's values.
    view: ViewSpec | None = None

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
        return self.effect == "write" or self.effect_by_hint

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
            **({"pageTool": True} if self.page_digest else {}),
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
    kind_name = raw.get("kind", "client")
    kind = registry.kind(kind_name) if isinstance(kind_name, str) else None
    if kind is None and kind_name != "client":
        known = ", ".join(("client", *registry.names()))
        return None, [f"{where}: 'kind' must be one of {known} (got {kind_name!r})"]
    allowed = CLIENT_KEYS if kind is None else COMMON_KEYS | kind.keys
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(raw) - allowed)]
    if not valid_tool_name(name, kind=kind_name):
        rule = "letters, digits, spaces and _" if kind is None else "letters, digits, _ and -"
        problems.append(
            f"{where}: 'name' must start with a letter or _ and hold only {rule} "
            f"(at most {MAX_NAME_LENGTH} characters)"
        )
    # A kind may give a tool a description of its own (a node's, one line from its package).
    own_description = kind is None or kind.needs_description or "description" in raw
    if own_description and (
        not isinstance(raw.get("description"), str) or not raw["description"].strip()
    ):
        problems.append(f"{where}: 'description' is required (it tells the model when to call)")
    block: Block | None = None
    extra: dict[str, Any] = {}
    if kind is None:
        problems += _client_schema_problems(raw, where)
        input_schema, output_schema = raw.get("input_schema", {}), raw.get("output_schema", {})
        description = raw.get("description")
    else:
        parsed, found = kind.parse(raw)
        problems += [f"{where}: {p}" for p in found]
        if parsed is not None:
            block, input_schema, output_schema = (
                parsed.block,
                parsed.input_schema,
                parsed.output_schema,
            )
            description = raw["description"] if own_description else parsed.description
            if parsed.effect is not None and "effect" not in raw:
                extra["effect"] = parsed.effect
            extra["effect_by_hint"] = parsed.effect_by_hint
    policy = _parse_policy(raw, where, problems) | extra
    hinted = output_schema.get(VIEW_HINT) if not problems and "view" not in raw else None
    if hinted is not None:
        policy["view"], found = parse_view(hinted, where, f"output_schema.{VIEW_HINT}")
        problems += found
    if problems:
        return None, problems
    assert isinstance(name, str)
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        kind=kind_name,
        block=block,
        **policy,
    ), []


def _client_schema_problems(raw: dict[str, Any], where: str) -> list[str]:
    problems = []
    for key in ("input_schema", "output_schema"):
        if key not in raw:
            problems.append(f"{where}: {key!r} is required")
        elif problem := schema_problem(raw[key]):
            problems.append(f"{where}: {key!r} {problem}")
        else:
            found = required_problems(raw[key]) + pattern_problems(raw[key])
            problems += [f"{where}: {key!r} {p}" for p in found]
    return problems


def _parse_policy(raw: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    for key in ("deadline_seconds", "approval_timeout_seconds"):
        if key in raw:
            if positive(raw[key]):
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
        if positive(size):
            policy["max_result_kb"] = float(size)
        else:
            problems.append(f"{where}: 'max_result_kb' must be a positive number")
    if "simulation_result" in raw:
        policy["has_simulation_result"] = True
        policy["simulation_result"] = raw["simulation_result"]
    if "view" in raw:
        policy["view"], found = parse_view(raw["view"], where)
        problems += found
    if "guardrails" in raw:
        try:
            policy["guardrails"] = parse_guardrails(raw["guardrails"])
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    return policy
