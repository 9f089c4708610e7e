"""``hostcall check``'s word on MCP Apps, read from what the agents' MCP servers list.

- No apps origin set: an agent whose servers declare views for the tools it uses would show
  none of them — a warning (the tools still run, with their text results).
- A plain apps origin shared by two or more servers with views: a view of one can reach the
  other's (read its page, run script in it, speak through its proxy) — a warning, naming the
  template that gives each server an origin of its own.
- A template, and a server with views whose name is no DNS label: its views would have no
  origin — a problem (rename the server in ``_platform.json``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from hostcall.agents import Agent
from hostcall.apps.origin import APPS_ORIGIN_VARIABLE, SERVER, AppsOrigin, is_label
from hostcall.blocks.mcp.pool import McpPool, McpUnavailable
from hostcall.platform import Platform

LIST_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ViewsCheck:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


async def check_views(
    agents: Mapping[str, Agent], platform: Platform, apps: AppsOrigin | None
) -> ViewsCheck:
    """What ``check`` says of the views the agents' chosen tools declare."""
    found = ViewsCheck()
    declaring = await _declaring(agents, platform, found.warnings)
    chosen: dict[tuple[str, str], list[str]] = {}  # (agent, server) -> its tools with views
    for agent in agents.values():
        for binding in agent.mcp:
            tools = declaring.get(binding.server, [])
            if binding.tools is not None:
                tools = [t for t in tools if t in binding.tools]
            if tools:
                chosen[(agent.id, binding.server)] = tools
    servers = sorted({server for _, server in chosen})
    if apps is None:
        found.warnings.extend(
            f"{agent}: MCP server {server!r} declares views for {', '.join(tools)}; none is "
            f"shown while {APPS_ORIGIN_VARIABLE} is not set (docs/deploy.md, 'The apps "
            "origin'): the tools run, with text only"
            for (agent, server), tools in chosen.items()
        )
    elif not apps.template and len(servers) > 1:
        found.warnings.append(
            f"MCP servers {', '.join(map(repr, servers))} declare views and share the one "
            f"apps origin {apps.origin}: a view of one can reach another's (read it, run "
            f"script in it, call its tools). Give each its own: set {APPS_ORIGIN_VARIABLE} "
            f"to a template such as https://{SERVER}.apps.example.com (docs/deploy.md)"
        )
    elif apps.template:
        found.problems.extend(
            f"MCP server {server!r} declares views, but its name is not a DNS label "
            "(lowercase letters, digits and inner hyphens, at most 63): under "
            f"{APPS_ORIGIN_VARIABLE}={apps.origin} its views have no origin and are not "
            "shown; rename it in _platform.json"
            for server in servers
            if not is_label(server)
        )
    return found


async def _declaring(
    agents: Mapping[str, Agent], platform: Platform, warnings: list[str]
) -> dict[str, list[str]]:
    """Each used server's tools that declare a view, as its list says."""
    used = {b.server for agent in agents.values() for b in agent.mcp}
    servers = {n: platform.mcp_servers[n] for n in sorted(used) if n in platform.mcp_servers}
    declaring: dict[str, list[str]] = {}
    if not servers:
        return declaring
    pool = McpPool()
    try:
        for name, server in servers.items():
            try:
                async with asyncio.timeout(LIST_SECONDS):
                    listed = await pool.list_tools(server)
            except (McpUnavailable, TimeoutError) as exc:
                reason = exc.reason if isinstance(exc, McpUnavailable) else "no answer in time"
                warnings.append(f"MCP server {name!r} could not be listed to check for views "
                                f"({reason})")  # fmt: skip
                continue
            declaring[name] = [t.name for t in listed if t.app_resource is not None]
    finally:
        await pool.close()
    return declaring
