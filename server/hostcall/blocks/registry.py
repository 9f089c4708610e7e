"""The kinds of server-side tool, by name: the built-ins, registered as any kind would be.

A new kind is one file (a ``BlockKind`` and its ``Block``: hostcall/blocks/kind.py) and one
line in ``BUILT_IN``. Nothing else names a kind: ``hostcall.tools`` parses a definition with
the kind it names, the engine runs its block, and an agents directory asks the block what
it reaches. What a package adds is a node (``"kind": "block"``, hostcall/blocks/node.py),
found through its entry point.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hostcall.blocks.kind import BlockKind
from hostcall.blocks.kinds.http import HttpKind
from hostcall.blocks.kinds.installed import NodeKind
from hostcall.blocks.kinds.mcp import McpKind
from hostcall.blocks.kinds.person import PersonKind

# In the order the wire's ``kind`` enum lists them, after ``client`` (the page's).
BUILT_IN: tuple[BlockKind, ...] = (HttpKind(), McpKind(), PersonKind(), NodeKind())

_KINDS: dict[str, BlockKind] = {kind.name: kind for kind in BUILT_IN}


def kind(name: str) -> BlockKind | None:
    return _KINDS.get(name)


def names() -> tuple[str, ...]:
    return tuple(_KINDS)


@contextmanager
def registered(extra: BlockKind) -> Iterator[None]:
    """``extra`` known beside the built-ins while the block lasts (a test's kind)."""
    if extra.name in _KINDS or extra.name == "client":
        raise ValueError(f"a kind named {extra.name!r} is already registered")
    _KINDS[extra.name] = extra
    try:
        yield
    finally:
        del _KINDS[extra.name]
