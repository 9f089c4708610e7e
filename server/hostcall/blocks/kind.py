"""The one shape of every server-side tool kind: HTTP, MCP, the person tool, installed nodes.

A ``BlockKind`` reads the keys of a tool definition that are its own and returns the tool's
``Block``; the name, the description and the policies (deadline, approval, calls per pass,
guardrails…) are every tool's, read by ``hostcall.tools`` and applied by the engine around
``Block.run``. The built-in kinds are registered in ``hostcall.blocks.registry`` exactly as a
new one would be: a new kind is one file and one line there (docs/architecture.md).

A block says, without running, what an agents directory checks at load: the hosts it
targets, the ``$user`` values it reads, and anything else the platform must provide for it.
For a call it gets a ``CallContext``: the model's arguments, the visitor the run acts for,
the call's environment and deadline, and the process's services a block may use.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from hostcall.blocks import user_values
from hostcall.visitors.visitor import Visitor

if TYPE_CHECKING:
    from hostcall.blocks.mcp.pool import McpPool
    from hostcall.platform import Environment, Platform


@dataclass(frozen=True, slots=True)
class Target:
    """A ``host:port`` a block's requests go to, and how the agent file makes it go there
    (``"'url' goes to"``): the words a refusal quotes beside the host."""

    host: str
    via: str


class PersonQueue(Protocol):
    """Queues a conversation for a member of the operator's team (hostcall/handoff.py)."""

    async def ask_for_person(self, conversation_id: str) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """What one call of a block runs with: the model's ``arguments`` as the call holds them,
    the signed-in ``visitor`` the run acts for or None (anonymous), and the services of
    the process a block may use."""

    arguments: Any
    visitor: Visitor | None
    conversation_id: str
    # Live: an environment narrowed since the run started applies to its next call.
    environment: Environment
    platform: Platform
    timeout: float
    mcp: McpPool
    people: PersonQueue

    def values(self, user_keys: Collection[str]) -> dict[str, Any]:
        """The arguments to place in a template, with the ``$user`` values it names, from
        the visitor; ``MissingUser`` if nobody is signed in, or a named claim is missing.
        The model's arguments never hold those keys (nor could they: a ``$``-key of theirs
        is dropped here, see hostcall/blocks/__init__.py)."""
        given = self.arguments if isinstance(self.arguments, dict) else {}
        values = {k: v for k, v in given.items() if not k.startswith("$")}
        return values | user_values(self.visitor, user_keys)


class Block:
    """A tool's server-side block, parsed once from its definition (subclass it)."""

    # What the model is told failed ("The block failed: timeout after 2 s").
    subject: ClassVar[str] = "The block"

    def targets(self) -> tuple[Target, ...]:
        """The hosts its calls reach, as known when the agent loads: each must be in the
        ``allowed_hosts`` of the agent's environment. ``ValueError`` says what is wrong."""
        return ()

    def user_keys(self) -> frozenset[str]:
        """The ``$user.…`` values its calls read: an agent without identity is refused."""
        return frozenset()

    def platform_problems(self, environment: Environment, platform: Platform) -> list[str]:
        """What else the environment or ``_platform.json`` lacks for it (a connection, an
        MCP server), each a sentence naming the field."""
        return []

    def shown_output(self, output: Any, redacted: Any) -> Any:
        """The model's view of ``output`` once guardrails ``redacted`` fields of it: a
        kind whose result repeats a field elsewhere (an MCP result's texts) redacts there
        too."""
        return redacted

    async def run(self, ctx: CallContext) -> Any:
        """The result the model reads, a JSON value; a ``BlockError`` for what it is told."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a kind read of a tool definition: its block and schemas, and what the kind
    decides for a tool that does not say (a description, the effect)."""

    block: Block
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    description: str | None = None
    effect: str | None = None
    # The effect is a read only because the server's annotations say so: a claim which a
    # protected environment does not take (``Tool.protected_write``).
    effect_by_hint: bool = False


class BlockKind:
    """One ``kind`` of server-side tool (subclass it, and register an instance)."""

    name: ClassVar[str]
    # The definition keys that are the kind's own, beside every tool's.
    keys: ClassVar[frozenset[str]] = frozenset()
    # Whether a tool of this kind must say its description (a node has its own).
    needs_description: ClassVar[bool] = True

    def parse(self, raw: Mapping[str, Any]) -> tuple[Parsed | None, list[str]]:
        """The tool's block, or every problem, each naming its field (the caller adds the
        file and the tool)."""
        raise NotImplementedError


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
