"""A signed-in person's data with one agent, as the console's admins reach it: their
conversations listed, exported, erased (hostcall/personal_data.py does the reads and writes;
docs/console.md "A person's data")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hostcall.engine import Engine
from hostcall.quotas import Quotas
from hostcall.store.console_records import KnownPerson, PersonConversation
from hostcall.visitors.personal_data import (
    AuditedExport,
    Erased,
    PersonErasure,
    erase_person,
    export_person,
)


class _PeopleStore(AuditedExport, PersonErasure, Protocol):
    """What a person's page reads, exports and erases."""


class PeopleService:
    def __init__(
        self, engine: Engine, quotas: Quotas, *, store: _PeopleStore, clock: Callable[[], float]
    ) -> None:
        self.store = store
        self.agents = engine.agents
        self.quotas = quotas
        self.clock = clock

    async def conversations(
        self, agent_id: str, person: str, *, limit: int, before: tuple[float, str] | None
    ) -> list[PersonConversation]:
        """A page of the person's conversations with the agent, last written in first."""
        return await self.store.person_conversations(agent_id, person, limit=limit, before=before)

    async def known(self, agent_id: str, *, limit: int, offset: int) -> list[KnownPerson]:
        """The signed-in people (of the agent, else of every agent), last written to first."""
        return await self.store.known_people(agent_id, limit=limit, offset=offset)

    async def export(self, agent_id: str, person: str, *, actor: str) -> dict[str, Any]:
        """``export_person``: the person's data as one document, audited."""
        return await export_person(self.store, agent_id, person, actor=actor, clock=self.clock)

    async def erase(self, agent_id: str, person: str, *, actor: str) -> Erased:
        """``erase_person``, then the counters kept outside the store (memory, the operator's
        storage) that name the person or their conversations."""
        erased = await erase_person(self.store, agent_id, person, actor=actor, clock=self.clock)
        limits = self.agents.loaded[agent_id].limits
        await self.quotas.forget(agent_id, limits, conversation_ids=erased.ids, person=person)
        return erased
