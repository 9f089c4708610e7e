"""A kind of server-side tool that Hostcall does not ship, for the tests: ``"kind": "tally"``
says a fixed word and counts its calls. It is written as any new kind is (one file, a
``BlockKind`` and its ``Block``) and registered beside the built-ins with
``registry.registered``, to show the engine and the agents directory need nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hostcall.blocks.kind import Block, BlockKind, CallContext, Parsed, Target

INPUT_SCHEMA = {
    "type": "object",
    "properties": {"what": {"type": "string"}},
    "additionalProperties": False,
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"said": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["said", "count"],
}


@dataclass(frozen=True, slots=True)
class TallyBlock(Block):
    say: str
    # A host the tally says it reaches (it never does), for the environment's check.
    reach: str | None
    # Whether it reads the signed-in visitor's id.
    as_visitor: bool
    # Whether it ignores its deadline and waits forever.
    hang: bool
    # Every call's values, as the block got them (shared with its kind).
    calls: list[dict[str, Any]] = field(compare=False)

    def targets(self) -> tuple[Target, ...]:
        return (Target(self.reach, "'reach' names"),) if self.reach else ()

    def user_keys(self) -> frozenset[str]:
        return frozenset({"$user.sub"}) if self.as_visitor else frozenset()

    async def run(self, ctx: CallContext) -> Any:
        if self.hang:
            await asyncio.Event().wait()
        self.calls.append(ctx.values(self.user_keys()))
        return {"said": self.say, "count": len(self.calls)}


class TallyKind(BlockKind):
    name = "tally"
    keys = frozenset({"say", "reach", "as_visitor", "hang"})

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def parse(self, raw: Mapping[str, Any]) -> tuple[Parsed | None, list[str]]:
        say = raw.get("say")
        if not isinstance(say, str):
            return None, ["'say' must be text"]
        block = TallyBlock(
            say,
            raw.get("reach"),
            raw.get("as_visitor") is True,
            raw.get("hang") is True,
            self.calls,
        )
        return Parsed(block, INPUT_SCHEMA, OUTPUT_SCHEMA), []
