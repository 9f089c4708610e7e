"""``"kind": "http"``: an HTTP request the server sends (hostcall/blocks/http_request.py),
with a connection's credentials when the tool names one (``_platform.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from hostcall.blocks.http_request import (
    AiParam,
    HttpRequestSpec,
    ai_params_schema,
    execute,
    parse_ai_params,
    parse_request_spec,
    render_request,
    spec_target,
    user_keys,
)
from hostcall.blocks.kind import Block, BlockKind, CallContext, Parsed, Target, positive
from hostcall.platform import PLATFORM_FILE
from hostcall.schemas import pattern_problems, schema_problem

if TYPE_CHECKING:
    from hostcall.platform import Environment, Platform

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"status": {"type": "integer"}, "body": {}},
    "required": ["status"],
}
RESPONSE_KB = 1024.0


@dataclass(frozen=True, slots=True)
class HttpBlock(Block):
    subject: ClassVar[str] = "The request"
    spec: HttpRequestSpec
    params: tuple[AiParam, ...]
    connection: str | None = None
    max_response_kb: float = RESPONSE_KB

    def targets(self) -> tuple[Target, ...]:
        return (Target(spec_target(self.spec), "'url' goes to"),)

    def user_keys(self) -> frozenset[str]:
        return user_keys(self.spec)

    def platform_problems(self, environment: Environment, platform: Platform) -> list[str]:
        if not self.connection:
            return []
        connection = platform.connections.get(self.connection)
        if connection is None:
            return [f"connection {self.connection!r} is not defined in {PLATFORM_FILE}"]
        if (target := spec_target(self.spec)) not in connection.hosts:
            return [
                f"connection {self.connection!r} may not be sent to {target} (its 'hosts' in "
                f"{PLATFORM_FILE}: {', '.join(sorted(connection.hosts)) or 'none'})"
            ]
        return []

    async def run(self, ctx: CallContext) -> Any:
        connection = ctx.platform.connections.get(self.connection or "")
        result = await execute(
            render_request(self.spec, ctx.values(self.user_keys())),
            allowed_hosts=ctx.environment.allowed_hosts,
            extra_headers=connection.headers if connection else {},
            credential_hosts=connection.hosts if connection else (),
            timeout=ctx.timeout,
            max_response_bytes=int(self.max_response_kb * 1024),
        )
        return result.to_output()


class HttpKind(BlockKind):
    name = "http"
    keys = frozenset({"ai_params", "request", "connection", "output_schema", "max_response_kb"})

    def parse(self, raw: Mapping[str, Any]) -> tuple[Parsed | None, list[str]]:
        problems: list[str] = []
        try:
            params = parse_ai_params(raw.get("ai_params", []))
            spec = parse_request_spec(raw.get("request"), params)
        except ValueError as exc:
            problems.append(str(exc))
            spec = None
        connection = raw.get("connection")
        if connection is not None and not isinstance(connection, str):
            problems.append("'connection' must be the name of a connection")
        size = raw.get("max_response_kb", RESPONSE_KB)
        if not positive(size):
            problems.append("'max_response_kb' must be a positive number")
        output_schema = raw.get("output_schema", OUTPUT_SCHEMA)
        if problem := schema_problem(output_schema):
            problems.append(f"'output_schema' {problem}")
        else:
            problems += [f"'output_schema' {p}" for p in pattern_problems(output_schema)]
        if problems or spec is None:
            return None, problems
        block = HttpBlock(spec, params, connection, float(size))
        return Parsed(block, ai_params_schema(params), output_schema), []
