"""What an installed node's author writes: a ``Node`` named by an entry point.

A package provides a block by naming a ``Node`` subclass (or an instance of one) in the
``hostcall.blocks`` entry-point group; the entry point's name is the block's name, which
agent files use (docs/agents.md, "Installed nodes")::

    [project.entry-points."hostcall.blocks"]
    "acme.crm_lookup" = "acme_nodes:CrmLookup"

The server reads ``description``, ``config_schema`` and ``output_schema`` when an agent
loads, checks each tool's ``config`` against ``config_schema``, and for each call awaits
``run`` with the config, its ``{{ $fromAI.key }}`` references replaced by the model's
arguments (values, never evaluated), checked against ``config_schema`` again. ``run`` is
cancelled at the tool's deadline: it must not block the event loop (hand blocking work to
``asyncio.to_thread``). Raise ``NodeError`` with a message for the model; any other exception
is reported to the model by its type alone and logged for the operator. A node that reaches
hosts names them in ``targets``: the environment's ``allowed_hosts`` rule them, as they rule
the HTTP block's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

__all__ = ["Node", "NodeError"]


class NodeError(Exception):
    """A failure the node explains: the model reads ``message`` (a ``block_failed`` error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Node:
    """The base class of an installed node (subclass it; one instance serves every call).

    ``description``: one line, shown by ``hostcall blocks`` and the designer.
    ``config_schema``: the JSON Schema (an object at its root) a tool's ``config`` must fit.
    ``output_schema``: what ``run`` returns (an object at its root), or ``None`` for any JSON
    value; an agent file's ``output_schema`` replaces it.
    """

    description: ClassVar[str] = ""
    config_schema: ClassVar[Mapping[str, Any]] = {"type": "object"}
    output_schema: ClassVar[Mapping[str, Any] | None] = None

    def targets(self, config: Mapping[str, Any]) -> Iterable[str]:
        """The hosts this config makes ``run`` reach, as URLs or ``host:port``: each must be
        in the ``allowed_hosts`` of the agent's environment. Asked when the agent loads (a
        target still holding a ``{{ $fromAI.key }}`` is skipped then) and again before each
        call, with the config the call runs with. A node that reaches no network says none."""
        return ()

    async def run(self, config: dict[str, Any]) -> Any:
        """The result the model reads: a JSON value (finite numbers, text keys)."""
        raise NotImplementedError
