"""Page tools: tools the host page registers itself (WebMCP's ``document.modelContext``, or
an AG-UI client's ``RunAgentInput.tools``), admitted by the agent file's ``page_tools`` block.

The block (docs/agents.md) says which names a page may offer (exact names, or a prefix ending
in ``*``), how many, how long a description and how large an input schema may be, and each
name's policies. Without it no page tool is admitted. Every offered tool is checked like an
agent file's (name rule, schema checks, sizes: ``admit``); one refused is named with a
reason (``PageToolRefusal``) and never stored. An admitted tool is stored with its surface,
and a run freezes the ones its conversation's present surfaces hold (``run_entries``),
each with the digest of its registration: a call goes only to a surface holding the same.

The page's hints are a claim nobody checked: ``readOnlyHint`` makes a tool a read only where
the block trusts hints and never in a protected environment; the agent file's own
``effect: read`` is the only other way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hostcall import strictjson
from hostcall.protocol.codes import PageToolRefusal
from hostcall.protocol.page_tool import PageTool
from hostcall.schemas import (
    pattern_problems,
    remote_refs,
    required_problems,
    schema_depth,
    schema_problem,
)
from hostcall.store.records import Surface
from hostcall.tools import MAX_NAME_LENGTH, MAX_TITLE_LENGTH, POLICY_KEYS, Tool, parse_tool

if TYPE_CHECKING:  # agents.py reads the block with this module
    from hostcall.agents import Agent

BLOCK_KEYS = {"allow", "trust_read_hints", "max_tools", "max_description_chars",
              "max_schema_bytes", "tools"}  # fmt: skip
# Only in a run's frozen definition: the page tools the run planned with.
ADMITTED = "admitted"
ENTRY_KEYS = {*POLICY_KEYS, "output"}
DEFAULT_TOOLS, MAX_TOOLS = 16, 64
DEFAULT_DESCRIPTION_CHARS, MAX_DESCRIPTION_CHARS = 1024, 4096
DEFAULT_SCHEMA_BYTES, MAX_SCHEMA_BYTES = 16 * 1024, 64 * 1024
# Nesting of an input schema's JSON: a form and a validator walk it, and no tool's
# parameters need more.
MAX_SCHEMA_DEPTH = 16
# A model API's rule for a function's name: a page's tool becomes one.
NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_-]{{0,{MAX_NAME_LENGTH - 1}}}")
_CEILINGS = {
    "max_tools": MAX_TOOLS,
    "max_description_chars": MAX_DESCRIPTION_CHARS,
    "max_schema_bytes": MAX_SCHEMA_BYTES,
}
# The stand-in output schema of a page tool the agent file gives none: the page's result is
# whatever JSON its ``execute`` returned, and no form can stand in for it.
ANY_OUTPUT: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class PageToolsPolicy:
    """An agent's ``page_tools`` block."""

    allow: tuple[str, ...]
    trust_read_hints: bool = False
    max_tools: int = DEFAULT_TOOLS
    max_description_chars: int = DEFAULT_DESCRIPTION_CHARS
    max_schema_bytes: int = DEFAULT_SCHEMA_BYTES
    # Per exact name: the policy keys a client tool takes, and ``output`` (a schema).
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def allows(self, name: str) -> bool:
        return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in self.allow)

    def never_asked_writes(self, environment: str) -> list[str]:
        """In a protected ``environment`` a page tool is a write unless its entry says
        ``read``: ``approval: never`` is refused for it, as for any write there."""
        return [
            f"page_tools: tools.{name}: 'approval': 'never' is refused in the protected "
            f"environment {environment!r}: a page tool is a write there (writes always need "
            "a person) unless the agent file says 'effect': 'read'"
            for name, said in self.tools.items()
            if said.get("approval") == "never" and said.get("effect") != "read"
        ]

    def exact_names(self) -> list[str]:
        return [p for p in self.allow if not p.endswith("*")]

    def has_prefix(self) -> bool:
        return any(p.endswith("*") for p in self.allow)

    def to_wire(self) -> dict[str, Any]:
        """The widget's config: it refuses early what the server would refuse."""
        return {
            "allow": list(self.allow),
            "maxTools": self.max_tools,
            "maxDescriptionChars": self.max_description_chars,
            "maxSchemaBytes": self.max_schema_bytes,
        }


@dataclass(frozen=True, slots=True)
class Refused:
    name: str
    reason: PageToolRefusal


def parse_block(
    data: Any, where: str, *, frozen: bool = False
) -> tuple[PageToolsPolicy | None, list[dict[str, Any]], list[str]]:
    """An agent file's ``page_tools`` block; with ``frozen`` (a run's stored definition), the
    tool entries it admitted too. The block, those entries, and every problem found."""
    if not isinstance(data, dict):
        return None, [], [f"{where}: 'page_tools' must be an object"]
    known = BLOCK_KEYS | ({ADMITTED} if frozen else set())
    problems = [f"{where}: page_tools: unknown key {k!r}" for k in sorted(set(data) - known)]
    allow = data.get("allow")
    if (
        not isinstance(allow, list)
        or not allow
        or not all(isinstance(p, str) and NAME.fullmatch(p.removesuffix("*")) for p in allow)
    ):
        problems.append(
            f"{where}: page_tools: 'allow' must list tool names, or prefixes ending in '*' "
            "(letters, digits, '_' and '-')"
        )
        allow = []
    trust = data.get("trust_read_hints", False)
    if not isinstance(trust, bool):
        problems.append(f"{where}: page_tools: 'trust_read_hints' must be true or false")
    caps: dict[str, int] = {}
    for key in sorted(set(data) & set(_CEILINGS)):
        value, ceiling = data[key], _CEILINGS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= ceiling:
            problems.append(
                f"{where}: page_tools: {key!r} must be a whole number from 1 to {ceiling}"
            )
        else:
            caps[key] = value
    tools = data.get("tools", {})
    if not isinstance(tools, dict) or not all(isinstance(v, dict) for v in tools.values()):
        problems.append(f"{where}: page_tools: 'tools' must map a tool's name to its policies")
        tools = {}
    policy = PageToolsPolicy(
        tuple(allow), trust is True, tools={n: dict(v) for n, v in tools.items()}, **caps
    )
    for name, entry in tools.items():
        problems += _entry_problems(policy, name, entry, f"{where}: page_tools: tools.{name}")
    admitted = data.get(ADMITTED, []) if frozen else []
    if not isinstance(admitted, list):
        problems.append(f"{where}: page_tools: {ADMITTED!r} must be a list")
    if problems:
        return None, [], problems
    return policy, admitted, []


def _entry_problems(
    policy: PageToolsPolicy, name: str, entry: dict[str, Any], where: str
) -> list[str]:
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(entry) - ENTRY_KEYS)]
    if not NAME.fullmatch(name) or not policy.allows(name):
        problems.append(f"{where}: names no tool that 'allow' admits")
    probe = _probe(_as_client(name), "stand-in", {"type": "object"}, entry)
    _, found = parse_tool(probe, where)
    problems += [p for p in found if ": unknown key " not in p]
    return problems


def _probe(
    name: str, description: str, input_schema: dict[str, Any], entry: Mapping[str, Any]
) -> dict[str, Any]:
    """A client tool's entry for a page tool, as parse_tool reads it."""
    raw: dict[str, Any] = {k: v for k, v in entry.items() if k != "output"}
    return {
        **raw,
        "name": name,
        "description": description,
        "input_schema": input_schema,
        "output_schema": entry.get("output", {"type": "object"}),
    }


def _as_client(name: str) -> str:
    """A page tool's name as a client tool's rule takes it (which has no ``-``), for the
    checks of ``parse_tool``: the tool keeps its own."""
    return name.replace("-", "_")


def agent_names(agent: Agent) -> list[str]:
    """The names an agent file's own tools take (a page's tool of one is ``shadowed``)."""
    own = [t.name for t in agent.tools if not t.page_digest]
    return own + [n for b in agent.mcp for n in b.known_names()]


def admit(
    policy: PageToolsPolicy | None,
    offered: Sequence[PageTool],
    *,
    taken: Iterable[str],
) -> tuple[list[PageTool], list[Refused]]:
    """The tools a page offers, checked against the agent's block: the admitted ones, and a
    reason for each refused. ``taken``: the agent file's own tool names (they win)."""
    if policy is None:
        return [], [Refused(t.name, PageToolRefusal.NOT_ADMITTED) for t in offered]
    names = set(taken)
    admitted: list[PageTool] = []
    refused: list[Refused] = []
    for tool in offered:
        reason = _refusal(policy, tool, names)
        if reason is None and len(admitted) >= policy.max_tools:
            reason = PageToolRefusal.TOO_MANY
        if reason is None:
            admitted.append(tool)
        else:
            refused.append(Refused(tool.name, reason))
    return admitted, refused


def _refusal(policy: PageToolsPolicy, tool: PageTool, taken: set[str]) -> PageToolRefusal | None:
    if not NAME.fullmatch(tool.name):
        return PageToolRefusal.BAD_NAME
    if tool.name in taken:
        return PageToolRefusal.SHADOWED
    if not policy.allows(tool.name):
        return PageToolRefusal.NOT_ALLOWED
    if len(tool.description) > policy.max_description_chars:
        return PageToolRefusal.DESCRIPTION_TOO_LONG
    if len(strictjson.dumps(tool.input_schema).encode()) > policy.max_schema_bytes:
        return PageToolRefusal.TOO_LARGE
    if schema_bad(tool.input_schema):
        return PageToolRefusal.BAD_SCHEMA
    return None


def schema_bad(schema: dict[str, Any]) -> bool:
    """Whether an agent file would refuse ``schema`` as an input schema, or it is nested past
    ``MAX_SCHEMA_DEPTH`` or names a ``$ref`` outside itself (nothing fetches one)."""
    return bool(
        schema_problem(schema)
        or required_problems(schema)
        or pattern_problems(schema)
        or schema_depth(schema) > MAX_SCHEMA_DEPTH
        or remote_refs(schema)
    )


def run_entries(
    policy: PageToolsPolicy, tools: Iterable[PageTool], *, protected: bool
) -> list[dict[str, Any]]:
    """The admitted page tools as a run's frozen definition keeps them: name, digest,
    schema and the effective policy. ``protected``: the run's environment is, and the
    page's ``readOnlyHint`` is not taken."""
    entries = []
    for tool in tools:
        said = policy.tools.get(tool.name, {})
        # The model needs a description (an AG-UI client's may be empty): the title, or name.
        description = tool.description.strip() or tool.title.strip() or tool.name
        entry = _probe(tool.name, description, tool.input_schema, said)
        if "output" not in said:
            entry["output_schema"] = ANY_OUTPUT
        if "title" not in said and tool.title.strip():
            # What people see of the call: the page's title, when the agent file gives none.
            entry["title"] = tool.title.strip()[:MAX_TITLE_LENGTH]
        entry["digest"] = tool.digest
        entry["untrusted"] = tool.untrusted_content_hint
        if "effect" not in said:
            hinted = policy.trust_read_hints and tool.read_only_hint and not protected
            # Marked: should the environment become protected while a run holds this entry,
            # the call still goes to a person (Tool.protected_write).
            entry |= {"effect": "read", "effect_by_hint": True} if hinted else {"effect": "write"}
        entries.append(entry)
    return entries


def parse_entries(entries: Sequence[Any], where: str) -> tuple[list[Tool], list[str]]:
    """A frozen definition's page tool entries as tools (client tools marked as the page's)."""
    tools: list[Tool] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
            problems.append(f"{where}: page tool #{index + 1} must be an object with a digest")
            continue
        extra = {"digest", "untrusted", "effect_by_hint"}
        raw = {k: v for k, v in entry.items() if k not in extra}
        formless = raw.get("output_schema") == ANY_OUTPUT
        if formless:
            raw["output_schema"] = {"type": "object"}
        name = raw.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            problems.append(f"{where}: page tool #{index + 1} has no page tool's name")
            continue
        raw["name"] = _as_client(name)
        tool, found = parse_tool(raw, f"{where}: page tool #{index + 1}")
        problems += found
        if tool is None:
            continue
        tools.append(replace(
            tool,
            name=name,
            output_schema=ANY_OUTPUT if formless else tool.output_schema,
            page_digest=entry["digest"],
            untrusted=entry.get("untrusted") is True,
            effect_by_hint=entry.get("effect_by_hint") is True,
            has_form=not formless,
        ))  # fmt: skip
    return tools, problems


def planned(surfaces: Iterable[Surface], *, now: float, grace: float) -> list[PageTool]:
    """The page tools a run plans with: those of the conversation's present surfaces, most
    recently active first; for a name on several surfaces, that surface's registration."""
    chosen: dict[str, PageTool] = {}
    ordered = sorted(surfaces, key=lambda s: s.last_active, reverse=True)
    for surface in ordered:
        if not surface.present(now, grace):
            continue
        for stored in surface.page_tools:
            chosen.setdefault(stored["name"], PageTool.from_stored(stored))
    return list(chosen.values())
