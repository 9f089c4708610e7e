"""A conversation's surfaces as use cases: a page declares the tools it handles, is active,
leaves, and its stream attaches and detaches. What changes where calls may go moves them
(``Rehoming``) in the same method, so a call never waits on a page that is gone.
"""

from __future__ import annotations

from typing import Any, Protocol

from hostcall.calls.outcomes import Moved, Settled
from hostcall.engine import Engine
from hostcall.store.interfaces import Database, Surfaces
from hostcall.store.records import ANONYMOUS_SURFACE


class _SurfaceStore(Database, Surfaces, Protocol):
    """What the surface use cases write: surfaces, in a transaction."""


class SurfaceService:
    def __init__(self, engine: Engine, *, store: _SurfaceStore) -> None:
        self.engine = engine
        self.store = store
        self.ledger = engine.ledger
        # The ledger's clock: a surface's presence is judged on it (``Surface.present``).
        self.clock = engine.ledger.moves.clock

    async def declare(
        self,
        conversation_id: str,
        surface: str | None,
        tools: tuple[str, ...],
        page_tools: tuple[dict[str, Any], ...] = (),
    ) -> str:
        """The tools a page handles now, and the page tools its agent admitted; the surface
        they were saved for."""
        surface = surface or ANONYMOUS_SURFACE
        # One statement on PostgreSQL: the tools saved, and whether a call could move.
        may_move = await self.store.save_surface_tools(
            conversation_id, surface, tools, self.clock(), page_tools
        )
        if may_move:
            # A read left on the form (its page reloaded) may now have a handler again.
            self._resume(await self.ledger.rehoming.rehome(conversation_id))
        return surface

    async def touch(self, conversation_id: str, surface: str) -> None:
        """The person did something on this surface (focus, typing, a click): calls go here."""
        async with self.store.transaction():
            await self.store.touch_surface(conversation_id, surface, self.clock())

    async def leave(self, conversation_id: str, surface: str) -> None:
        """The page is going away: its calls move on now, without waiting out the grace
        period."""
        async with self.store.transaction():
            await self.store.leave_surface(conversation_id, surface, self.clock())
        self._resume(await self.ledger.rehoming.rehome(conversation_id))

    def _resume(self, moved: list[Moved]) -> None:
        """Page tools' calls that failed for want of a page: their runs go on."""
        for settled in moved:
            if isinstance(settled, Settled):
                self.engine.resume(settled)

    async def claim(self, call_id: str, surface: str, assignment: int) -> bool:
        """``Rehoming.claim``: whether a dispatch is still this surface's to run."""
        return await self.ledger.rehoming.claim(call_id, surface, assignment)

    async def attach(self, conversation_id: str, surface: str, owner: str) -> None:
        """A stream of this surface opened (in the process ``owner``): it is present."""
        async with self.store.transaction():
            await self.store.attach_surface(
                conversation_id, surface, self.ledger.moves.clock(), owner
            )

    async def detach(self, conversation_id: str, surface: str, owner: str) -> None:
        async with self.store.transaction():
            await self.store.detach_surface(
                conversation_id, surface, self.ledger.moves.clock(), owner
            )
