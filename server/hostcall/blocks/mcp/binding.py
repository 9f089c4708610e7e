"""An agent's use of an MCP server, as its file says it, and what a run freezes of it.

::

    {"kind": "mcp", "server": "crm", "tools": ["lookup_contact", "create_contact"],
     "approval": "always",
     "overrides": {"lookup_contact": {"effect": "read", "title": "Look up a contact"}}}

``tools`` is a list of the server's tool names, or ``"all"``. Policy keys beside it apply to
every tool; ``overrides`` set them (and ``name``, ``description``, ``max_response_kb``) per
tool. The file decides a tool's effect; where it says nothing, the server's annotations give
it (``readOnlyHint`` without ``destructiveHint``: read) — but not in a protected environment,
where annotations are a claim from outside that no person checked: there a tool is a write
unless the file says ``read``. When a run starts, the server's list is read and each chosen
tool becomes one ``{"kind": "mcp", "server", "tool", ...}`` entry of the run's frozen definition
(``frozen_entries``): what the model sees for the rest of the run, whatever the server
announces meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hostcall.blocks.mcp.results import RESULT_FIELDS
from hostcall.tools import MAX_NAME_LENGTH, POLICY_KEYS, Tool, parse_tool

ALL = "all"
OVERRIDE_KEYS = {*POLICY_KEYS, "name", "description", "max_response_kb"}
DEFAULT_KEYS = OVERRIDE_KEYS - {"name", "description", "title", "view"}
BINDING_KEYS = {"kind", "server", "tools", "overrides", "apps", *DEFAULT_KEYS}
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class ListedTool:
    """One tool of a server's ``tools/list``, as much as a definition needs of it."""

    name: str
    description: str = ""
    title: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: Mapping[str, Any] | None = None
    read_only: bool = False  # readOnlyHint
    destructive: bool = False  # destructiveHint, said: it wins over readOnlyHint
    # Its MCP App view (``_meta.ui.resourceUri``, a ui:// URI) and whether only views may
    # call it (``_meta.ui.visibility == ["app"]``): hostcall/apps/resources.py.
    app_resource: str | None = None
    app_only: bool = False

    @property
    def hinted_read(self) -> bool:
        """Whether the annotations make the tool a read (where they are taken at all)."""
        return self.read_only and not self.destructive


@dataclass(frozen=True, slots=True)
class McpBinding:
    server: str
    tools: tuple[str, ...] | None  # None: all of them
    overrides: Mapping[str, Mapping[str, Any]]
    defaults: Mapping[str, Any]
    # ``"apps": {"allow_writes": true}``: the server's MCP App views may ask for its writes,
    # each run only once the visitor confirms it in the widget (hostcall/services/apps.py).
    app_writes: bool = False

    def known_names(self) -> list[str]:
        """The names the model will know the chosen tools by (all but ``"all"``'s)."""
        return [self.exposed_name(t) for t in self.tools or ()]

    def never_asked_writes(self, environment: str) -> list[str]:
        """Problems in a protected ``environment``, where every MCP tool the file does not
        call a read is a write (whatever the server claims): ``approval: never`` is refused
        for it, as for any write there."""
        problems = []
        for tool in self.tools or (None,):
            said = {**self.defaults, **(self.overrides.get(tool, {}) if tool else {})}
            if said.get("approval") == "never" and said.get("effect") != "read":
                named = f"tool {self.exposed_name(tool)!r}" if tool else "its tools"
                problems.append(
                    f"MCP server {self.server!r}: {named}: 'approval': 'never' is refused in "
                    f"the protected environment {environment!r}: an MCP tool is a write there "
                    "(writes always need a person) unless the agent file says "
                    "'effect': 'read'"
                )
        return problems

    def exposed_name(self, tool: str) -> str:
        given = self.overrides.get(tool, {}).get("name")
        return given if isinstance(given, str) else exposed_name(tool)


def exposed_name(tool: str) -> str:
    """A server's tool name as a server-side tool's name (letters, digits, _ and -)."""
    name = _NOT_NAME.sub("_", tool)[:MAX_NAME_LENGTH]
    return name if name[:1].isalpha() or name[:1] == "_" else f"_{name}"[:MAX_NAME_LENGTH]


def is_binding(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("kind") == "mcp" and "tools" in raw


def parse_binding(raw: dict[str, Any], where: str) -> tuple[McpBinding | None, list[str]]:
    server = raw.get("server")
    if isinstance(server, str):
        where = f"{where.rsplit(': ', 1)[0]}: MCP server {server!r}"
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(raw) - BINDING_KEYS)]
    if not isinstance(server, str) or not server:
        problems.append(f"{where}: 'server' must name one of _platform.json's 'mcp_servers'")
    chosen = raw["tools"]
    if chosen != ALL and (
        not isinstance(chosen, list)
        or not chosen
        or not all(isinstance(t, str) and t for t in chosen)
    ):
        problems.append(f"{where}: 'tools' must list the server's tool names, or be \"all\"")
        chosen = []
    overrides = raw.get("overrides", {})
    if not isinstance(overrides, dict) or not all(isinstance(v, dict) for v in overrides.values()):
        problems.append(f"{where}: 'overrides' must map a tool's name to its settings")
        overrides = {}
    if isinstance(chosen, list) and (stray := sorted(set(overrides) - set(chosen))):
        problems.append(f"{where}: 'overrides' names tools not chosen in 'tools': {stray}")
    defaults = {k: v for k, v in raw.items() if k in DEFAULT_KEYS}
    for tool, override in overrides.items():
        for key in sorted(set(override) - OVERRIDE_KEYS):
            problems.append(f"{where}: overrides.{tool}: unknown key {key!r}")
    apps = raw.get("apps", {})
    if (
        not isinstance(apps, dict)
        or set(apps) - {"allow_writes"}
        or not isinstance(apps.get("allow_writes", False), bool)
    ):
        problems.append(f"{where}: 'apps' must be {{'allow_writes': true or false}}")
        apps = {}
    binding = McpBinding(
        str(server),
        None if chosen == ALL else tuple(chosen),
        {t: dict(o) for t, o in overrides.items()},
        defaults,
        app_writes=apps.get("allow_writes", False),
    )
    # Each setting checked as the frozen tool will be, on a stand-in schema (its keys were
    # checked above, against what an agent file may set).
    for tool in binding.tools or ("tool",):
        probe = _entry(binding, ListedTool(tool, "stand-in"), protected=True)
        parsed, found = parse_tool(probe, f"{where}: {tool}")
        problems += [p for p in found if ": unknown key " not in p]
        if parsed is not None:
            problems += _guardrail_problems(parsed, f"{where}: tool {parsed.name!r}")
    if problems:
        return None, list(dict.fromkeys(problems))
    return binding, []


def _guardrail_problems(tool: Tool, where: str) -> list[str]:
    """An output guardrail's paths must be able to hold in an MCP result (results.py): one
    that reads ``/email`` where the field is ``/structuredContent/email`` would never match,
    and what it was to redact would reach the model."""
    problems = []
    for rule in tool.guardrails:
        paths = [c.path for c in rule.when] + list(rule.fields) if rule.on == "output" else []
        for path in paths:
            if path.lstrip("/").split("/", 1)[0] not in RESULT_FIELDS:
                problems.append(
                    f"{where}: guardrail {rule.name!r}: {path!r} is no field of an MCP result "
                    "(it has /content, /structuredContent and /truncated)"
                )
    return problems


def _entry(binding: McpBinding, listed: ListedTool, *, protected: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "kind": "mcp",
        "server": binding.server,
        "tool": listed.name,
        "name": exposed_name(listed.name),
        "description": listed.description or listed.title or listed.name,
        "input_schema": dict(listed.input_schema),
        "effect": "write",
    }
    if listed.output_schema is not None:
        entry["output_schema"] = dict(listed.output_schema)
    if listed.title:
        entry["title"] = listed.title[:80].strip()
    if listed.app_resource is not None:
        entry["app_resource"] = listed.app_resource
    if listed.app_only:
        entry["app_only"] = True
    if binding.app_writes:
        # Every tool of the binding: a view's write is often an app-only tool with no view
        # of its own (a board's "add task" button), and the agent file's word covers it.
        entry["app_writes"] = True
    entry |= dict(binding.defaults) | dict(binding.overrides.get(listed.name, {}))
    said = "effect" in binding.defaults or "effect" in binding.overrides.get(listed.name, {})
    if not said and listed.hinted_read and not protected:
        # Marked: should the environment become protected while a run holds this entry,
        # the call still goes to a person (Tool.protected_write).
        entry |= {"effect": "read", "effect_by_hint": True}
    return entry


def frozen_entries(
    binding: McpBinding, listed: Sequence[ListedTool], *, protected: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """The chosen tools of a server's list as tool entries, and why any was left out.
    ``protected``: the run's environment is, and the server's annotations are not taken."""
    by_name = {t.name: t for t in listed}
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    for name in binding.tools or list(by_name):
        if name not in by_name:
            problems.append(f"the server lists no tool {name!r}")
            continue
        entry = _entry(binding, by_name[name], protected=protected)
        tool, found = parse_tool(entry, f"tool {name!r}")
        if tool is None:
            problems += found  # a schema of the server's that no validator would take
            continue
        entries.append(entry)
    return entries, problems
