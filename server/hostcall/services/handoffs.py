"""Human handoff from the console as use cases: a member of the operator's team takes a
conversation over (the agent's run stopped first), writes to the visitor as themselves, and
hands it back. Each action is audited in the unit that makes it (hostcall/handoff.py does
the writes; docs/console.md, "Human handoff")."""

from __future__ import annotations

from collections.abc import Callable

from hostcall.handoff import HumanHandoff
from hostcall.services.runs import RunService
from hostcall.store.console_records import AuditEntry, Handoff
from hostcall.store.interfaces import Handoffs


class HandoffService:
    def __init__(
        self,
        runs: RunService,
        handoff: HumanHandoff,
        *,
        store: Handoffs,
        clock: Callable[[], float],
    ) -> None:
        self.handoff = handoff
        self.store = store
        self.runs = runs
        self.clock = clock

    def _did(self, member: str, action: str, conversation_id: str, **details: object) -> AuditEntry:
        return AuditEntry(self.clock(), member, action, conversation_id, details=details)

    async def take_over(self, conversation_id: str, member: str) -> Handoff | None:
        """``member`` holds the conversation now: the agent's run, if one goes on, ends as an
        operator's cancel ends it. The handoff as it stands after."""
        cancelled = await self.runs.cancel_latest(conversation_id)
        audit = self._did(
            member, "conversation.take_over", conversation_id, cancelled_run=cancelled
        )
        await self.handoff.take_over(conversation_id, member, audit=audit)
        return await self.store.get_handoff(conversation_id)

    async def hand_back(self, conversation_id: str, member: str) -> None:
        """The agent answers again; it reads the exchange with the next message."""
        audit = self._did(member, "conversation.hand_back", conversation_id)
        await self.handoff.hand_back(conversation_id, member, audit=audit)

    async def say(self, conversation_id: str, member: str, text: str) -> str:
        """The member holding the conversation writes to the visitor; the message's id."""
        audit = self._did(member, "conversation.message", conversation_id, text=text)
        return await self.handoff.say(conversation_id, member, text, audit=audit)
