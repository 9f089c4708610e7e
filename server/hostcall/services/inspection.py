"""The console's view of conversations: the list an operator filters, and everything of one
conversation read in one place (its page shapes it: hostcall/console/instances.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hostcall.engine import Engine
from hostcall.errors import NotFound
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.frames import Event
from hostcall.protocol.responses import CallView
from hostcall.store.console_records import (
    AuditEntry,
    ConversationQuery,
    ConversationSummary,
    Feedback,
    Handoff,
    Rating,
)
from hostcall.store.interfaces import (
    Audit,
    Calls,
    Conversations,
    Events,
    Feedbacks,
    Handoffs,
    Messages,
    Runs,
)
from hostcall.store.records import Call, Conversation, Run, StoredMessage


class _InspectionStore(
    Audit, Calls, Conversations, Events, Feedbacks, Handoffs, Messages, Runs, Protocol
):
    """What a conversation's page shows: everything of the conversation, and its audit."""


@dataclass(frozen=True, slots=True)
class InspectedCall:
    """A call with its operator's view, and, for a page's own tool, the digest of the
    registration its run planned with ("" for an agent file's tool)."""

    call: Call
    view: CallView
    page_digest: str = ""


@dataclass(frozen=True, slots=True)
class Inspected:
    """One conversation as an operator inspects it: the newest events and audit entries, all
    of the rest."""

    conversation: Conversation
    audit: tuple[AuditEntry, ...]  # newest first
    calls: tuple[InspectedCall, ...]
    feedback: tuple[Feedback, ...]
    rating: Rating | None  # of the whole conversation, asked at its end
    handoff: Handoff | None
    last_seq: int
    events: tuple[Event, ...]
    messages: tuple[StoredMessage, ...]
    runs: tuple[Run, ...]  # oldest first


class InspectionService:
    def __init__(self, engine: Engine, *, store: _InspectionStore) -> None:
        self.store = store
        self.views = engine.ledger.views

    async def list(self, query: ConversationQuery) -> list[ConversationSummary]:
        """``Conversations.list_conversations``: newest first, as ``query`` filters."""
        return await self.store.list_conversations(query)

    async def inspect(self, conversation_id: str, *, audit: int, events: int) -> Inspected:
        """The conversation with its last ``audit`` entries and ``events`` events."""
        store = self.store
        conversation = await store.get_conversation(conversation_id)
        if conversation is None:
            raise NotFound(
                f"no conversation {conversation_id}", code=ErrorCode.UNKNOWN_CONVERSATION
            )
        entries = await store.list_audit(conversation_id=conversation_id, limit=audit)
        calls = [await self._call(call) for call in await store.list_calls(conversation_id)]
        feedback = await store.feedback_of(conversation_id)
        handoff = await store.get_handoff(conversation_id)
        last = await store.last_seq(conversation_id)
        logged = await store.events_after(conversation_id, max(0, last - events), limit=events)
        return Inspected(
            conversation=conversation,
            audit=tuple(entries),
            calls=tuple(calls),
            feedback=tuple(feedback),
            rating=await store.rating_of(conversation_id),
            handoff=handoff,
            last_seq=last,
            events=tuple(logged),
            messages=tuple(await store.list_messages(conversation_id)),
            runs=tuple(await store.list_runs(conversation_id)),
        )

    async def _call(self, call: Call) -> InspectedCall:
        tool = await self.views.tool_of(call)
        digest = tool.page_digest if tool else ""
        return InspectedCall(call, await self.views.view(call, operator=True), digest)
