"""Agent definitions: one JSON file per agent, checked completely when the server starts.

A bad file stops the server with one line per problem, naming the file, the tool and the
field. The format is documented in docs/agents.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostcall.agent_checks import (
    environment_problems,
    server_problems_of,
    template_problems,
    user_without_identity,
    view_tool_problems,
)
from hostcall.attachments.policy import AttachmentPolicy, parse_attachments
from hostcall.blocks.mcp.binding import McpBinding, is_binding, parse_binding
from hostcall.env_bindings import Use, agent_uses, refused_as_second_use, second_uses
from hostcall.errors import AgentConfigError
from hostcall.origins import BadOrigin, normalize_origin
from hostcall.page_context import PageContextCaps, parse_caps
from hostcall.page_tools import PageToolsPolicy, parse_block, parse_entries
from hostcall.platform import (
    DEFAULT_ENVIRONMENT,
    Platform,
    load_platform,
)
from hostcall.pricing import Price, parse_prices
from hostcall.quotas import DEFAULT_LIMITS, Limits, parse_limits
from hostcall.store.definitions import definition_digest
from hostcall.suggestions import RatingAsk, Suggestions, parse_rating, parse_suggestions
from hostcall.tools import Tool, parse_tool
from hostcall.visitors.identity import IdentityConfig, parse_identity

AGENT_KEYS = {
    "id",
    "environment",
    "name",
    "greeting",
    "instructions",
    "allowed_origins",
    "max_steps",
    "history_turns",
    "model",
    "tools",
    "limits",
    "prices",
    "identity",
    "retention_days",
    "page_context",
    "page_tools",
    "suggestions",
    "rating",
    "show_reasoning",
    "attachments",
}

# A step sends the model the conversation's last 20 turns: enough for a chat to keep its
# thread, and a cost per turn that does not grow with the conversation.
HISTORY_TURNS = 20
MAX_HISTORY_TURNS = 1000
# A hundred years: any longer is "keep forever", which leaving ``retention_days`` out says.
MAX_RETENTION_DAYS = 36500


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
    environment: str = DEFAULT_ENVIRONMENT
    digest: str = ""
    limits: Limits = DEFAULT_LIMITS
    # The turns of the conversation a model step is sent (hostcall/transcript.py).
    history_turns: int = HISTORY_TURNS
    # Per model name, per million tokens (hostcall/pricing.py).
    prices: Mapping[str, Price] = field(default_factory=dict)
    # Who the site says the visitor is (hostcall/visitors/identity.py); None: visitors are
    # anonymous.
    identity: IdentityConfig | None = None
    # MCP servers whose tools a run reads when it starts (hostcall/blocks/mcp/binding.py).
    mcp: tuple[McpBinding, ...] = ()
    # Conversations idle this many days are deleted whole by the sweeper
    # (hostcall/retention.py); None keeps them.
    retention_days: int | None = None
    # What a message's page context may weigh (hostcall/page_context.py); None: the agent
    # admits none.
    page_context: PageContextCaps | None = None
    # Which tools a page may offer, and their policies (hostcall/page_tools.py); None: the
    # agent admits none. A run's frozen definition has the ones it planned with in ``tools``.
    page_tools: PageToolsPolicy | None = None
    # What the widget offers to click, and when it asks for a rating (hostcall/suggestions.py).
    suggestions: Suggestions | None = None
    rating: RatingAsk | None = None
    # Whether the model's reasoning is relayed (REASONING_* events) and so kept in the log.
    show_reasoning: bool = True
    # Which files a visitor may attach (hostcall/attachments/policy.py); None: none.
    attachments: AttachmentPolicy | None = None

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def callable_names(self) -> list[str] | None:
        """The tools a model's rules may name: None while an MCP server's ``"all"`` is
        unread (a name the server does not list is answered ``unknown_tool``)."""
        if any(b.tools is None for b in self.mcp):
            return None
        if self.page_tools is not None and self.page_tools.has_prefix():
            return None
        names = [t.name for t in self.tools] + [n for b in self.mcp for n in b.known_names()]
        return names + list(self.page_tools.exact_names() if self.page_tools else ())


def check_allowed_origins(origins: Any, where: str) -> tuple[list[str], list[str]]:
    """The allowed origins normalised as browsers send them, and a problem per bad one."""
    if not isinstance(origins, list):
        return [], [f"{where}: 'allowed_origins' must be a list of origins"]
    normalised: list[str] = []
    problems: list[str] = []
    for origin in origins:
        try:
            normalised.append(normalize_origin(origin))
        except BadOrigin as exc:
            problems.append(f"{where}: allowed origin {exc}")
    return list(dict.fromkeys(normalised)), problems


def parse_agent(
    data: Any,
    where: str,
    environ: Mapping[str, str],
    platform: Platform | None = None,
    *,
    check_replies: bool = True,
    frozen: bool = False,
) -> tuple[Agent | None, list[str]]:
    """Check one agent definition; return it, or the problems found (all of them).

    With ``platform``, also check the agent against its environment (a definition frozen in
    a run is re-read without it: the engine enforces the environment at run time). Without
    ``check_replies``, a scripted model's reply templates are not held to the output
    schemas: a run's stored definition had them checked when it was frozen, and a reply
    renders leniently at run time whatever a later check would say of it. ``frozen``: a
    run's definition, which may hold the page tools it planned with (an agent file may not).
    """
    # Imported here: the model factory imports adapters that import this module's types.
    from hostcall.models.factory import model_problems

    if not isinstance(data, dict):
        return None, [f"{where}: an agent file must hold a JSON object"]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(data) - AGENT_KEYS)]
    agent_id = data.get("id")
    if not isinstance(agent_id, str) or not agent_id.replace("-", "").replace("_", "").isalnum():
        problems.append(f"{where}: 'id' must be a non-empty string of letters, digits, - and _")
    for key in ("name", "greeting", "instructions"):
        if key in data and not isinstance(data[key], str):
            problems.append(f"{where}: {key!r} must be a string")
    origins, origin_problems = check_allowed_origins(data.get("allowed_origins", []), where)
    problems += origin_problems
    limits, limit_problems = parse_limits(data.get("limits"), where)
    problems += limit_problems
    prices, price_problems = parse_prices(data.get("prices"), where)
    problems += price_problems
    max_steps = data.get("max_steps", 8)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or not 1 <= max_steps <= 100:
        problems.append(f"{where}: 'max_steps' must be an integer from 1 to 100")
    history_turns = data.get("history_turns", HISTORY_TURNS)
    if (
        not isinstance(history_turns, int)
        or isinstance(history_turns, bool)
        or not 1 <= history_turns <= MAX_HISTORY_TURNS
    ):
        problems.append(
            f"{where}: 'history_turns' must be an integer from 1 to {MAX_HISTORY_TURNS}"
        )
    retention_days = data.get("retention_days")
    if retention_days is not None and (
        not isinstance(retention_days, int)
        or isinstance(retention_days, bool)
        or not 1 <= retention_days <= MAX_RETENTION_DAYS
    ):
        problems.append(
            f"{where}: 'retention_days' must be a whole number of days from 1 to "
            f"{MAX_RETENTION_DAYS}, or left out to keep conversations"
        )
    if not isinstance(data.get("show_reasoning", True), bool):
        problems.append(f"{where}: 'show_reasoning' must be true or false")
    page_context: PageContextCaps | None = None
    if "page_context" in data:
        page_context, context_problems = parse_caps(data["page_context"], where)
        problems += context_problems
    page_tools: PageToolsPolicy | None = None
    page_entries: list[dict[str, Any]] = []
    if "page_tools" in data:
        page_tools, page_entries, found = parse_block(data["page_tools"], where, frozen=frozen)
        problems += found
    suggestions, suggestion_problems = (
        parse_suggestions(data["suggestions"], where) if "suggestions" in data else (None, [])
    )
    rating, rating_problems = (
        parse_rating(data["rating"], where) if "rating" in data else (None, [])
    )
    problems += suggestion_problems + rating_problems
    attachments, attachment_problems = (
        parse_attachments(data["attachments"], where) if "attachments" in data else (None, [])
    )
    problems += attachment_problems
    tools_data = data.get("tools", [])
    if not isinstance(tools_data, list):
        problems.append(f"{where}: 'tools' must be a list")
        tools_data = []
    tools: list[Tool] = []
    bindings: list[McpBinding] = []
    seen: set[str] = set()
    for index, raw in enumerate(tools_data):
        if is_binding(raw):
            binding, found = parse_binding(raw, f"{where}: tool #{index + 1}")
            problems += found
            bindings += [binding] if binding else []
            continue
        tool, tool_problems = parse_tool(raw, f"{where}: tool #{index + 1}")
        problems += tool_problems
        if tool is None:
            continue
        if tool.name in seen:
            problems.append(f"{where}: tool {tool.name!r}: duplicate name")
        seen.add(tool.name)
        tools.append(tool)
    planned, found = parse_entries(page_entries, where)
    problems += found
    for tool in planned:
        if tool.name in seen:
            problems.append(f"{where}: page tool {tool.name!r}: duplicate name")
        seen.add(tool.name)
        tools.append(tool)
    environment = data.get("environment", DEFAULT_ENVIRONMENT)
    if not isinstance(environment, str):
        problems.append(f"{where}: 'environment' must be the name of an environment")
    elif platform is not None:
        problems += environment_problems(where, environment, tools, platform)
        problems += server_problems_of(where, environment, bindings, platform)
        if page_tools is not None and environment in platform.environments:
            protected = platform.environments[environment].protected
            problems += [f"{where}: {p}" for p in page_tools.never_asked_writes(environment)
                         if protected]  # fmt: skip
    identity: IdentityConfig | None = None
    if "identity" in data:
        env_allowed = platform.allowed_env if platform is not None else None
        hosts_allowed = None
        if platform is not None and isinstance(environment, str):
            known = platform.environments.get(environment)
            hosts_allowed = (lambda: known.allowed_hosts) if known else (lambda: frozenset())
        identity, identity_problems = parse_identity(
            data["identity"], where, environ, allowed_env=env_allowed, allowed_hosts=hosts_allowed
        )
        problems += identity_problems
    if "identity" not in data:
        problems += user_without_identity(where, tools)
    model = data.get("model", {"kind": "scripted", "rules": []})
    # Rules may name any declared tool: a broken tool is reported once, for itself.
    declared = {t.get("name", t.get("toolName")) for t in tools_data if isinstance(t, dict)}
    names = {n for n in declared if isinstance(n, str)}
    names |= {n for b in bindings for n in b.known_names()}
    # A server's "all" is known when a run starts: its rules may name any tool until then
    # (one the server does not list is answered unknown_tool).
    checked = None if any(b.tools is None for b in bindings) else names
    if page_tools is not None:
        # A page's tools are known when a run starts; its rules may name an allowed one.
        names |= set(page_tools.exact_names())
        checked = None if page_tools.has_prefix() or checked is None else names
    problems += view_tool_problems(where, tools, checked)
    limits_of_model: dict[str, Any] = {}
    if platform is not None:
        # What an agents directory's model may reach and read; a frozen definition, re-read
        # without its platform, is held to the live lists when its model is built instead.
        limits_of_model["allowed_env"] = platform.allowed_env
        env = platform.environments.get(environment) if isinstance(environment, str) else None
        if env is not None:  # an unknown environment is reported once, above
            limits_of_model["allowed_hosts"] = lambda: env.allowed_hosts
    for problem in model_problems(model, tools=checked, environ=environ, **limits_of_model):
        problems.append(f"{where}: model: {problem}")
    if platform is not None:
        problems += platform.secret_problems(data, where)
    if check_replies:
        problems += template_problems(where, model, tools, bindings, names)
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
        environment=environment,
        digest=definition_digest(data),
        limits=limits,
        history_turns=history_turns,
        prices=prices,
        identity=identity,
        mcp=tuple(bindings),
        retention_days=retention_days,
        page_context=page_context,
        page_tools=page_tools,
        suggestions=suggestions,
        rating=rating,
        show_reasoning=data.get("show_reasoning", True),
        attachments=attachments,
    ), []


def load_agents(
    directory: Path, environ: Mapping[str, str], platform: Platform | None = None
) -> dict[str, Agent]:
    """Every ``*.json`` agent in ``directory``; raises ``AgentConfigError`` listing all problems.

    Files whose name starts with ``_`` are not agents (``_platform.json``).
    """
    if not directory.is_dir():
        raise AgentConfigError([f"{directory}: agents directory not found"])
    if platform is None:
        platform = load_platform(directory, environ)
    agents: dict[str, Agent] = {}
    problems: list[str] = []
    uses: list[tuple[str, Use]] = []
    files = sorted(p for p in directory.glob("*.json") if not p.name.startswith("_"))
    if not files:
        problems.append(f"{directory}: no agent files (*.json) found")
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(f"{path.name}: not valid JSON: {exc}")
            continue
        agent, found = parse_agent(data, path.name, environ, platform)
        problems += found
        if agent is None:
            continue
        uses += agent_uses(data, path.name)
        if agent.id in agents:
            problems.append(f"{path.name}: agent id {agent.id!r} is already used by another file")
        agents[agent.id] = agent
    problems += _second_use_problems(uses, platform)
    if problems:
        raise AgentConfigError(problems)
    return agents


def _second_use_problems(uses: list[tuple[str, Use]], platform: Platform) -> list[str]:
    """A list-form variable given more than one purpose or destination by the agent files."""
    unbound = platform.unbound()
    return [
        f"{use.where}: {refused_as_second_use(name, first, use)}"
        for name, first, use in second_uses((n, u) for n, u in uses if n in unbound)
    ]
