"""``"kind": "block"``: a node an installed package provides (hostcall/blocks/installed.py),
run with its config, the model's arguments placed in it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hostcall.blocks import AiParam, ai_params_schema, parse_ai_params
from hostcall.blocks.installed import (
    InstalledBlock,
    config_problems,
    config_user_keys,
    find_block,
    run_block,
    targets_of,
)
from hostcall.blocks.kind import Block, BlockKind, CallContext, Parsed, Target
from hostcall.schemas import schema_problem


@dataclass(frozen=True, slots=True)
class NodeBlock(Block):
    """The installed block, its config as written (with its references), and the
    parameters the model provides."""

    block: InstalledBlock
    config: Any
    params: tuple[AiParam, ...]

    def targets(self) -> tuple[Target, ...]:
        try:
            hosts = targets_of(self.block, self.config, placed=False)
        except ValueError as exc:
            raise ValueError(f"'block': {self.block.name!r} {exc}") from None
        return tuple(Target(host, "'config' reaches") for host in hosts)

    def user_keys(self) -> frozenset[str]:
        return config_user_keys(self.config)

    async def run(self, ctx: CallContext) -> Any:
        return await run_block(
            self.block, self.config, ctx.values(self.user_keys()),
            allowed_hosts=ctx.environment.allowed_hosts, timeout=ctx.timeout,
        )  # fmt: skip


class NodeKind(BlockKind):
    name = "block"
    keys = frozenset({"block", "config", "ai_params", "output_schema"})
    needs_description = False  # without one, the tool has its block's

    def parse(self, raw: Mapping[str, Any]) -> tuple[Parsed | None, list[str]]:
        name = raw.get("block")
        if not isinstance(name, str):
            return None, ["'block' must name an installed block (`hostcall blocks` lists them)"]
        try:
            block = find_block(name)
            params = parse_ai_params(raw.get("ai_params", []))
        except ValueError as exc:
            return None, [str(exc)]
        config = raw.get("config", {})
        if problems := config_problems(block, config, {p.key for p in params}):
            return None, problems
        declared = block.output_schema
        # No schema declared: any JSON value (the strict reader has already judged it).
        output_schema = raw.get("output_schema", dict(declared) if declared else {})
        if "output_schema" in raw and (problem := schema_problem(output_schema)):
            return None, [f"'output_schema' {problem}"]
        node = NodeBlock(block, config, params)
        return Parsed(node, ai_params_schema(params), output_schema, block.description), []
