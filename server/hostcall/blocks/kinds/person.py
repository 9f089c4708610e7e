"""``"kind": "person"``: the built-in tool by which the agent asks for a person of the team,
which queues the conversation in the console (hostcall/handoff.py). Its schemas are ours."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hostcall.blocks.kind import Block, BlockKind, CallContext, Parsed

INPUT_SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 500,
                              "description": "Why the visitor needs a person, in a sentence"}},
    "additionalProperties": False,
}  # fmt: skip
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"queued": {"type": "boolean"}},
    "required": ["queued"],
}


@dataclass(frozen=True, slots=True)
class PersonBlock(Block):
    async def run(self, ctx: CallContext) -> Any:
        # False when it already waits, or a person holds it: the model is told either way.
        return {"queued": await ctx.people.ask_for_person(ctx.conversation_id)}


class PersonKind(BlockKind):
    name = "person"

    def parse(self, raw: Mapping[str, Any]) -> tuple[Parsed | None, list[str]]:
        # Queueing changes nothing a person must approve: a read unless the file says.
        return Parsed(PersonBlock(), INPUT_SCHEMA, OUTPUT_SCHEMA, effect="read"), []
