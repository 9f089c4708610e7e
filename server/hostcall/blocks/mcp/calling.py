"""One call of an MCP tool: the environment's check, then the pooled session, then the
result in the form the model reads (results.py), with the server's secrets taken out."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hostcall.blocks import BlockFailed, NotAuthorized, redact
from hostcall.blocks.mcp.pool import (
    McpBadResult,
    McpPool,
    McpRefused,
    McpTooLarge,
    McpUnavailable,
)
from hostcall.blocks.mcp.results import content_output, error_text
from hostcall.blocks.mcp.servers import McpServer

if TYPE_CHECKING:
    from hostcall.blocks.kinds.mcp import McpBlock


def allowed_server(
    name: str, declared: Mapping[str, McpServer], allowed: frozenset[str]
) -> McpServer:
    """The server, if the environment allows it; ``NotAuthorized`` before any connection."""
    server = declared.get(name)
    if server is None or name not in allowed:
        raise NotAuthorized(f"the MCP server {name!r}")
    return server


async def call_mcp_tool(
    pool: McpPool,
    server: McpServer,
    block: McpBlock,
    arguments: Mapping[str, Any],
    *,
    timeout: float,
) -> Any:
    secrets = server.secrets()
    try:
        async with asyncio.timeout(timeout):
            result = await pool.call_tool(server, block.tool, arguments)
    except TimeoutError:
        raise BlockFailed(f"timeout after {timeout:g} s") from None
    except McpTooLarge as exc:
        reason = (
            f"{server.where} sent a message over {exc.limit_mb:g} MB (its 'max_message_mb'); "
            "it was not read" + (", and the server was started again" if exc.restarted else "")
        )
        raise BlockFailed(reason) from None
    except McpUnavailable as exc:
        raise BlockFailed(f"{server.where} is unavailable ({exc.reason})") from None
    except McpBadResult as exc:
        reason = f"the result does not match the tool's output schema: {exc.message}"
        raise BlockFailed(reason) from None
    except McpRefused as exc:
        raise BlockFailed(f"{server.where} refused the call: {exc.message}") from None
    if result.is_error:
        raise BlockFailed(redact(error_text(result.content), secrets))
    if block.structured and result.structured_content is None:
        raise BlockFailed("the tool returned no structured content for its output schema")
    output = content_output(
        result.content, result.structured_content, limit=int(block.max_response_kb * 1024)
    )
    return redact(output, secrets)
