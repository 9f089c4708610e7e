"""``hostcall check``'s word on MCP Apps: an agent whose MCP servers declare views for the
tools it uses, while no apps origin is set, would show none of them — said as a warning
(the tools still run, with their text results), never as a problem."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from hostcall.agents import Agent
from hostcall.apps.origin import APPS_ORIGIN_VARIABLE
from hostcall.blocks.mcp.pool import McpPool, McpUnavailable
from hostcall.platform import Platform

LIST_SECONDS = 10.0


async def unshown_views(agents: Mapping[str, Agent], platform: Platform) -> list[str]:
    """A warning per agent and server whose chosen tools declare a view."""
    used = {b.server for agent in agents.values() for b in agent.mcp}
    servers = {n: platform.mcp_servers[n] for n in sorted(used) if n in platform.mcp_servers}
    if not servers:
        return []
    pool = McpPool()
    warnings: list[str] = []
    declaring: dict[str, list[str]] = {}
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
    for agent in agents.values():
        for binding in agent.mcp:
            chosen = declaring.get(binding.server, [])
            if binding.tools is not None:
                chosen = [t for t in chosen if t in binding.tools]
            if chosen:
                warnings.append(
                    f"{agent.id}: MCP server {binding.server!r} declares views for "
                    f"{', '.join(chosen)}; none is shown while {APPS_ORIGIN_VARIABLE} is not "
                    "set (docs/deploy.md, 'The apps origin'): the tools run, with text only"
                )
    return warnings
