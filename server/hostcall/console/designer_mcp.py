"""What the designer shows of an MCP server when a designer adds its tools: the servers each
environment allows (``_platform.json``), and a server's tools as it lists them now. A server
the environment does not allow is said so, and never contacted."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.blocks import NotAuthorized
from hostcall.blocks.mcp.calling import allowed_server
from hostcall.blocks.mcp.pool import McpRefused, McpUnavailable
from hostcall.console.accounts import Role
from hostcall.console.session import guarded
from hostcall.platform import DEFAULT_ENVIRONMENT, Platform
from hostcall.protocol.console import McpServerTools, McpToolItem
from hostcall.responses import WireResponse
from hostcall.runtime import runtime_of

# A stdio server's first listing starts its command, which on a busy host can take several
# seconds to import its SDK; the designer waits this long before saying it did not answer.
LIST_SECONDS = 15.0


def mcp_routes() -> list[BaseRoute]:
    return [Route("/console/api/mcp/{server}/tools", server_tools, methods=["GET"])]


def allowed_servers(platform: Platform) -> dict[str, list[str]]:
    """Each environment's MCP servers, for the designer's picker."""
    return {name: sorted(env.mcp_servers) for name, env in platform.environments.items()}


@guarded(Role.DESIGNER)
async def server_tools(request: Request) -> Response:
    runtime = runtime_of(request)
    name = request.path_params["server"]
    environment = request.query_params.get("environment") or DEFAULT_ENVIRONMENT
    platform = runtime.platform
    pool = runtime.mcp
    problem: str | None = None
    items: tuple[McpToolItem, ...] = ()
    try:
        server = allowed_server(
            name, platform.mcp_servers, platform.environment(environment).mcp_servers
        )
        async with asyncio.timeout(LIST_SECONDS):
            listed = await pool.list_tools(server)
        # The default effect as a run would freeze it (blocks/mcp/binding.py).
        hints = not platform.environment(environment).protected
        items = tuple(
            McpToolItem(t.name, t.title, t.description, hints and t.hinted_read) for t in listed
        )
    except NotAuthorized:
        problem = (
            f"MCP server {name!r} is not allowed in environment {environment!r} "
            "(its 'mcp_servers' in _platform.json)"
        )
    except McpUnavailable as exc:
        problem = f"MCP server {name!r} is unavailable: {exc.reason}"
    except McpRefused as exc:
        problem = f"MCP server {name!r} refused to list its tools: {exc.message}"
    except TimeoutError:
        problem = f"MCP server {name!r} did not list its tools within {LIST_SECONDS:g} s"
    return WireResponse(McpServerTools(name, environment, items, problem))
