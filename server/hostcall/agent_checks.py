"""What the parts of an agent file must agree on, checked once each part has parsed: its
tools with its environment and the MCP servers it allows, its view buttons with its tools,
its reply templates with its tools' output schemas, ``$user`` with an ``identity`` block. Each
gives one line per problem, naming the file (``where``) and the tool."""

from __future__ import annotations

from typing import Any

from hostcall.blocks.kind import Block
from hostcall.blocks.kinds.mcp import server_problems
from hostcall.blocks.mcp.binding import McpBinding
from hostcall.blocks.mcp.results import CONTENT_OUTPUT_SCHEMA
from hostcall.platform import PLATFORM_FILE, Environment, Platform
from hostcall.tools import Tool


def view_tool_problems(where: str, tools: list[Tool], names: set[str] | None) -> list[str]:
    """A view's button asks the model for a tool: one of the agent's (``names``; None while
    an MCP server's ``"all"`` is unread)."""
    return [
        f"{where}: tool {t.name!r}: 'view' has a button for tool {name!r}, which the agent lacks"
        for t in tools
        if t.view is not None and names is not None
        for name in sorted(t.view.tools - names)
    ]


def user_without_identity(where: str, tools: list[Tool]) -> list[str]:
    """A tool that acts for the signed-in person, in an agent where nobody signs in."""
    problems = []
    for tool in tools:
        uses = bool(tool.block and tool.block.user_keys()) or any(
            c.path.startswith("$user") for rule in tool.guardrails for c in rule.when
        )
        if uses:
            problems.append(
                f"{where}: tool {tool.name!r} uses $user, but the agent has no 'identity' "
                "block: nobody would ever be signed in (docs/identity.md)"
            )
    return problems


def template_problems(
    where: str, model: Any, tools: list[Tool], bindings: list[McpBinding], names: set[str]
) -> list[str]:
    """Reply templates checked against the tools' output schemas: a mistake is
    reported by ``hostcall check``, not met by a visitor. An MCP server's tools are not
    listed until a run starts, but every result of theirs has one shape (``content``,
    ``structuredContent``): a rule is held to it, and to the server's own schema when a run
    reads it (``RunAgents.freeze``)."""
    from hostcall.models.reply_check import reply_problems

    schemas: dict[str, Any] = {}
    for tool in tools:  # a duplicate name is reported once, as such
        schemas.setdefault(tool.name, tool.output_schema)
    for binding in bindings:
        for name in binding.known_names():
            schemas.setdefault(name, CONTENT_OUTPUT_SCHEMA)
    for name in names:  # a tool that did not parse: reported once, for itself
        schemas.setdefault(name, None)
    # A rule naming no declared tool, beside a server's "all", names one of its tools.
    other = CONTENT_OUTPUT_SCHEMA if any(b.tools is None for b in bindings) else None
    found = reply_problems(model, schemas, other=other)
    return [f"{where}: model: {problem}" for problem in found]


def environment_problems(where: str, name: str, tools: list[Tool], platform: Platform) -> list[str]:
    if name not in platform.environments:
        known = ", ".join(sorted(platform.environments))
        return [f"{where}: environment {name!r} is not defined in {PLATFORM_FILE} ({known})"]
    env = platform.environments[name]
    problems = []
    for tool in tools:
        if env.protected and tool.effect == "write" and tool.approval == "never":
            problems.append(
                f"{where}: tool {tool.name!r}: 'approval': 'never' is refused for a write tool "
                f"in the protected environment {name!r} (writes there always need a person)"
            )
        if tool.block is not None:
            found = _block_problems(tool.block, env, platform)
            problems += [f"{where}: tool {tool.name!r}: {p}" for p in found]
    return problems


def _block_problems(block: Block, env: Environment, platform: Platform) -> list[str]:
    """What the environment does not allow of a block: refused here, where the designer
    shows it beside the field, since every call would otherwise fail as not_authorized."""
    try:
        targets = block.targets()
    except ValueError as exc:
        return [str(exc)]
    problems = [
        f"{target.via} {target.host}, which environment {env.name!r} does not allow (its "
        f"'allowed_hosts' in {PLATFORM_FILE}: {', '.join(sorted(env.allowed_hosts)) or 'none'})"
        for target in targets
        if target.host not in env.allowed_hosts
    ]
    return problems + block.platform_problems(env, platform)


def server_problems_of(
    where: str, name: str, bindings: list[McpBinding], platform: Platform
) -> list[str]:
    """MCP servers the agent's environment does not allow: said at load, never met by a
    run (which refuses them too, before any connection, if the platform changed since)."""
    env = platform.environments.get(name)
    if env is None:
        return []  # reported once, as an unknown environment
    problems = [
        f"{where}: {problem}"
        for server in sorted({b.server for b in bindings})
        for problem in server_problems(server, env, platform)
    ]
    if env.protected:
        problems += [f"{where}: {p}" for b in bindings for p in b.never_asked_writes(name)]
    return problems
