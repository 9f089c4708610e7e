"""``"kind": "mcp"``: one tool of an MCP server, as a run froze it (hostcall/blocks/mcp/): its
schemas are the server's, and a call goes through the process's pooled session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from hostcall.blocks.kind import Block, BlockKind, CallContext, Parsed, positive
from hostcall.blocks.mcp.results import redacted_texts, result_schema
from hostcall.platform import PLATFORM_FILE
from hostcall.schemas import pattern_problems, schema_problem

if TYPE_CHECKING:
    from hostcall.platform import Environment, Platform

# What of an MCP tool's texts reaches the model by default (blocks/mcp/results.py).
RESPONSE_KB = 256.0


@dataclass(frozen=True, slots=True)
class McpBlock(Block):
    subject: ClassVar[str] = "The request"
    server: str
    tool: str
    # The tool declared an outputSchema: its result must carry structured content.
    structured: bool = False
    max_response_kb: float = RESPONSE_KB
    # The tool's MCP App view, a ui:// resource of the same server (hostcall/apps/), and
    # whether the tool is its views' alone: never offered to the model.
    app_resource: str | None = None
    app_only: bool = False
    # The agent file lets its views ask for writes, each confirmed by the visitor.
    app_writes: bool = False

    def platform_problems(self, environment: Environment, platform: Platform) -> list[str]:
        return server_problems(self.server, environment, platform)

    def shown_output(self, output: Any, redacted: Any) -> Any:
        # A result's texts may repeat its structured content: redacted there too.
        return redacted_texts(output, redacted)

    async def run(self, ctx: CallContext) -> Any:
        # Imported by the call: the session pool reads an agent's bindings, which are made
        # of tool definitions, which the registry of kinds (this one among them) parses.
        from hostcall.blocks.mcp.calling import allowed_server, call_mcp_tool

        server = allowed_server(self.server, ctx.platform.mcp_servers, ctx.environment.mcp_servers)
        return await call_mcp_tool(ctx.mcp, server, self, ctx.arguments, timeout=ctx.timeout)


def server_problems(server: str, environment: Environment, platform: Platform) -> list[str]:
    """The server, undeclared or not allowed: said at load, never met by a run (which
    refuses it too, before any connection, if the platform changed since)."""
    if server not in platform.mcp_servers:
        return [
            f"MCP server {server!r} is not declared in {PLATFORM_FILE}'s 'mcp_servers' "
            f"({', '.join(sorted(platform.mcp_servers)) or 'none'})"
        ]
    if server not in environment.mcp_servers:
        return [
            f"MCP server {server!r} is not allowed in environment {environment.name!r} "
            f"(its 'mcp_servers' in {PLATFORM_FILE}: "
            f"{', '.join(sorted(environment.mcp_servers)) or 'none'})"
        ]
    return []


class McpKind(BlockKind):
    name = "mcp"
    keys = frozenset(
        {
            "server",
            "tool",
            "input_schema",
            "output_schema",
            "max_response_kb",
            "effect_by_hint",
            "app_resource",
            "app_only",
            "app_writes",
        }
    )

    def parse(self, raw: Mapping[str, Any]) -> tuple[Parsed | None, list[str]]:
        problems: list[str] = []
        server, tool = raw.get("server"), raw.get("tool")
        if not isinstance(server, str) or not isinstance(tool, str) or not server or not tool:
            problems.append("'server' and 'tool' must name an MCP server and its tool")
        schemas: dict[str, dict[str, Any]] = {}
        for key in ("input_schema", "output_schema"):
            value = raw.get(key, {"type": "object"})
            if problem := schema_problem(value):
                problems.append(f"{key!r} {problem}")
            else:
                problems += [f"{key!r} {p}" for p in pattern_problems(value)]
            schemas[key] = value
        size = raw.get("max_response_kb", RESPONSE_KB)
        if not positive(size):
            problems.append("'max_response_kb' must be a positive number")
        hinted = raw.get("effect_by_hint", False)
        if not isinstance(hinted, bool):
            problems.append("'effect_by_hint' must be true or false")
        resource = raw.get("app_resource")
        if resource is not None and (
            not isinstance(resource, str) or not resource.startswith("ui://")
        ):
            problems.append("'app_resource' must be a ui:// URI of the server's")
        app_only, app_writes = raw.get("app_only", False), raw.get("app_writes", False)
        if not isinstance(app_only, bool) or not isinstance(app_writes, bool):
            problems.append("'app_only' and 'app_writes' must be true or false")
        if problems:
            return None, problems
        structured = "output_schema" in raw
        block = McpBlock(
            str(server), str(tool), structured, float(size),
            app_resource=resource, app_only=app_only, app_writes=app_writes,
        )  # fmt: skip
        # An entry's output_schema is the server's, for its structured content: the result
        # itself always has the one shape blocks/mcp/results.py describes.
        output = result_schema(schemas["output_schema"] if structured else None)
        return Parsed(block, schemas["input_schema"], output, effect_by_hint=hinted), []
