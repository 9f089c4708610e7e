"""The visitor's conversation as use cases: start one, go on with a thread of an AG-UI
client's, choose the one a known visitor goes on with (docs/identity.md), open one of their
history, and leave one. Whose a conversation is — a person's, or a browser's anonymous one —
is decided here, never from a request's body (hostcall/history.py, hostcall/visitors/known.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hostcall.engine import Engine
from hostcall.errors import NotFound
from hostcall.ledger import new_id
from hostcall.protocol.codes import ErrorCode
from hostcall.quotas import Quotas
from hostcall.store.console_records import PersonConversation
from hostcall.store.interfaces import Conversations, Runs, Sessions, Surfaces
from hostcall.store.records import ANONYMOUS_SURFACE, Conversation, Surface
from hostcall.visitors.personal_data import ErasureWrites, erase, refuse_running


class _ConversationStore(ErasureWrites, Conversations, Runs, Sessions, Surfaces, Protocol):
    """What the visitor's conversations touch: the conversations, their sessions, the
    surface a thread starts with, the latest run (adoption, deletion) and the erasure."""


def owns(holder: Conversation, other: Conversation, *, browser: str | None) -> bool:
    """Whether ``other`` is in the history of whoever holds ``holder``'s session, issued to
    ``browser``."""
    if other.agent_id != holder.agent_id:
        return False
    if holder.person is not None:
        return other.person == holder.person
    return other.person is None and browser is not None and other.browser == browser


# Who the audit log names for a visitor's deletion (as for their answers:
# hostcall/services/calls.py).
VISITOR = "visitor"


class ConversationService:
    def __init__(
        self,
        engine: Engine,
        quotas: Quotas,
        *,
        store: _ConversationStore,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.agents = engine.agents
        self.quotas = quotas
        self.clock = clock

    async def start(
        self, agent_id: str, locale: str, *, person: str | None, browser: str | None
    ) -> Conversation:
        """A new conversation: an identified visitor's from the start, else the browser's
        (None: in no browser's history)."""
        conversation = Conversation(
            new_id("c"), agent_id, self.clock(), locale, person=person, browser=browser
        )
        await self.store.create_conversation(conversation)
        return conversation

    async def find(self, conversation_id: str) -> Conversation | None:
        return await self.store.get_conversation(conversation_id)

    async def get(self, conversation_id: str) -> Conversation:
        """The conversation; ``NotFound`` (``unknown_conversation``) if there is none."""
        conversation = await self.store.get_conversation(conversation_id)
        if conversation is None:
            raise NotFound(
                f"no conversation {conversation_id}", code=ErrorCode.UNKNOWN_CONVERSATION
            )
        return conversation

    async def with_surfaces(self, conversation_id: str) -> tuple[Conversation, list[Surface]]:
        """The conversation and its surfaces (``Store.conversation_with_surfaces``);
        ``NotFound`` as ``get``."""
        found = await self.store.conversation_with_surfaces(conversation_id)
        if found is None:
            raise NotFound(
                f"no conversation {conversation_id}", code=ErrorCode.UNKNOWN_CONVERSATION
            )
        return found

    async def thread(
        self,
        conversation_id: str,
        agent_id: str,
        person: str | None,
        tools: tuple[str, ...],
        page_tools: tuple[dict[str, Any], ...] = (),
        *,
        new: bool,
    ) -> Conversation:
        """An AG-UI thread's conversation, created if ``new``, with the client tools its
        client declares now, and the page tools of its that the agent admitted."""
        store = self.store
        if new:
            await store.create_conversation(
                Conversation(conversation_id, agent_id, self.clock(), person=person)
            )
        # The AG-UI client names no surface: it is the conversation's own, always present
        # (docs/protocol.md "Surfaces"), so its calls are assigned to it and never move.
        async with store.transaction():
            await store.save_surface_tools(
                conversation_id, ANONYMOUS_SURFACE, tools, self.clock(), page_tools
            )
        conversation = await store.get_conversation(conversation_id)
        assert conversation is not None
        return conversation

    async def of_agent(self, conversation_id: str, agent_id: str) -> Conversation | None:
        """The conversation, if it is there and the agent's."""
        conversation = await self.store.get_conversation(conversation_id)
        if conversation is None or conversation.agent_id != agent_id:
            return None
        return conversation

    async def choose(
        self, agent_id: str, person: str, current: Conversation | None
    ) -> tuple[Conversation, bool] | None:
        """The conversation a known visitor goes on with (hostcall/visitors/known.py's rule), and
        whether it was adopted; None if they have none yet."""
        store = self.store
        if current is not None and current.person == person:
            return current, False
        if current is not None and current.person is None:
            begun = await store.latest_run(current.id) is not None
            if begun or not await store.person_conversations(agent_id, person, limit=1):
                generation = current.session_generation
                async with store.transaction():
                    mine = await store.set_person(current.id, person)
                    if mine:
                        await store.rotate_session(current.id, generation)
                adopted = await store.get_conversation(current.id) if mine else None
                if adopted is not None:
                    return adopted, True
        latest = await store.person_conversations(agent_id, person, limit=1)
        found = await store.get_conversation(latest[0].id) if latest else None
        return (found, False) if found is not None else None  # (None: deleted since listed)

    async def persons(self, agent_id: str, person: str, conversation_id: str) -> Conversation:
        """One of the person's conversations with the agent, to open."""
        conversation = await self.of_agent(conversation_id, agent_id)
        if conversation is None or conversation.person != person:
            # Another person's conversation is as unknown as one that does not exist.
            raise NotFound(
                f"no conversation {conversation_id}", code=ErrorCode.UNKNOWN_CONVERSATION
            )
        return conversation

    async def owned(
        self, holder: Conversation, other_id: str, *, browser: str | None
    ) -> Conversation:
        """A conversation of the history of whoever holds ``holder``'s session (``owns``)."""
        other = await self.store.get_conversation(other_id)
        if other is None or not owns(holder, other, browser=browser):
            raise NotFound(f"no conversation {other_id}", code=ErrorCode.UNKNOWN_CONVERSATION)
        return other

    async def history(
        self,
        holder: Conversation,
        *,
        browser: str | None,
        limit: int,
        before: tuple[float, str] | None,
    ) -> list[PersonConversation]:
        """The history of whoever holds ``holder``'s session, last written in first: a
        person's on any browser, else the anonymous ones of the browser it was issued to."""
        if holder.person is not None:
            return await self.store.person_conversations(
                holder.agent_id, holder.person, limit=limit, before=before
            )
        if browser is not None:
            return await self.store.browser_conversations(
                holder.agent_id, browser, limit=limit, before=before
            )
        return []

    async def delete(self, holder: Conversation, other: Conversation) -> None:
        """Delete a conversation of the holder's history whole (hostcall/visitors/personal_data.py),
        audited as the visitor's, and its counters with it."""
        await refuse_running(self.store, [other.id])
        await erase(
            self.store, [other.id], actor=VISITOR, action="conversation.delete",
            agent_id=other.agent_id, details={"owner": "person" if holder.person else "browser"},
            clock=self.clock,
        )  # fmt: skip
        agent = self.agents.loaded.get(other.agent_id)
        if agent is not None:
            await self.quotas.forget(agent.id, agent.limits, conversation_ids=[other.id])

    async def leave(self, conversation: Conversation) -> None:
        """This browser leaves the conversation: every token of its session is refused."""
        async with self.store.transaction():
            await self.store.rotate_session(conversation.id, conversation.session_generation)
