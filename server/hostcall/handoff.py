"""Human handoff: a person of the operator's team takes a conversation over from the agent,
writes to the visitor as themselves, and hands it back (docs/console.md).

A conversation has at most one handoff row (store ``Handoffs``): ``waiting`` (the agent's
built-in ``ask_for_person`` queued it) or ``taken`` by one person. While it is taken, the
visitor's messages are kept for the person and start no run (``Engine.start_run`` refuses
with ``HeldByPerson``); the person's messages are stored with role ``operator`` and their
name, so that once the conversation is handed back the agent reads the exchange in its
history.

Every change writes the conversation's event first: the append locks the conversation (its
row on PostgreSQL, to the end of the transaction; the whole file on SQLite), so a takeover
and a visitor's message starting a run, in any two processes, happen one after the other,
never both on the state before. The console's audit entry is written in the same unit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hostcall.attachments.claims import take_attachments
from hostcall.attachments.wire import user_message
from hostcall.errors import Conflict
from hostcall.journal import Journal
from hostcall.ledger import new_id
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.events import (
    PersonJoined,
    PersonLeft,
    PersonMessage,
    PersonRequested,
)
from hostcall.store.console_records import AuditEntry
from hostcall.store.interfaces import Attachments, Audit, Handoffs, Messages, Runs
from hostcall.store.records import AttachmentRef, Conversation, RunStatus, StoredMessage


class _HandoffStore(Attachments, Audit, Handoffs, Messages, Runs, Protocol):
    """What a handoff writes: its row, the person's messages, the audit log; and reads the
    latest run."""


class HumanHandoff:
    def __init__(
        self, journal: Journal, *, store: _HandoffStore, clock: Callable[[], float]
    ) -> None:
        self.journal = journal
        self.clock = clock
        self.store = store

    async def take_over(self, conversation_id: str, person: str, *, audit: AuditEntry) -> None:
        """``person`` holds the conversation now. Refused while a run is running or waiting
        (its reply would come after the person joined): the caller stops it first
        (``Engine.stop_run``), and one that started since is refused. Refused too while
        another person holds it."""
        async with self.journal.unit() as unit:
            await unit.emit(conversation_id, PersonJoined(person))
            run = await self.store.latest_run(conversation_id)
            if run is not None and run.status in (RunStatus.RUNNING, RunStatus.WAITING):
                raise Conflict(
                    f"run {run.id} is still {run.status.value}; take over once it has answered",
                    code=ErrorCode.RUN_IN_PROGRESS,
                    runId=run.id,
                )
            if not await self.store.take_over(conversation_id, person, self.clock()):
                held = await self.store.get_handoff(conversation_id)
                holder = held.person if held is not None else ""
                raise Conflict(
                    f"{holder or 'someone'} already holds conversation {conversation_id}",
                    code=ErrorCode.CONVERSATION_TAKEN,
                    person=holder,
                )
            await self.store.add_audit(audit)

    async def hand_back(self, conversation_id: str, person: str, *, audit: AuditEntry) -> None:
        """The agent answers again; it reads the exchange with the next message."""
        async with self.journal.unit() as unit:
            await unit.emit(conversation_id, PersonLeft(person))
            if not await self.store.hand_back(conversation_id, person):
                raise _not_held(conversation_id, person)
            await self.store.add_audit(audit)

    async def say(self, conversation_id: str, person: str, text: str, *, audit: AuditEntry) -> str:
        """The person holding the conversation writes to the visitor; the message's id."""
        message_id = new_id("m")
        async with self.journal.unit() as unit:
            await unit.emit(conversation_id, PersonMessage(message_id, person, text))
            held = await self.store.get_handoff(conversation_id)
            if held is None or not held.taken or held.person != person:
                raise _not_held(conversation_id, person)
            await self.store.add_message(
                StoredMessage(message_id, conversation_id, "", "operator", text, author=person)
            )
            await self.store.add_audit(audit)
        return message_id

    async def keep_for_person(
        self,
        conversation: Conversation,
        text: str,
        *,
        context: dict[str, Any] | None = None,
        attachments: tuple[AttachmentRef, ...] = (),
    ) -> str:
        """A visitor's message while ``person`` holds the conversation (``HeldByPerson``):
        stored and shown like any (with the page's ``context`` and its files), and no run
        starts. Its id."""
        message_id = new_id("m")
        cid = conversation.id
        message = StoredMessage(message_id, cid, "", "user", text, context=context or None,
                                attachments=attachments)  # fmt: skip
        async with self.journal.unit() as unit:
            await self.store.add_message(message)
            await unit.emit_all(cid, user_message(cid, message_id, text, attachments))
            await take_attachments(self.store, cid, attachments, message_id)
        return message_id

    async def ask_for_person(self, conversation_id: str) -> bool:
        """Queue the conversation in the console's list of those waiting for a person;
        False if it already waits, or a person holds it."""
        try:
            async with self.journal.unit() as unit:
                await unit.emit(conversation_id, PersonRequested())
                if not await self.store.request_person(conversation_id, self.clock()):
                    raise _Unchanged
        except _Unchanged:
            return False
        return True


def _not_held(conversation_id: str, person: str) -> Conflict:
    return Conflict(
        f"{person} does not hold conversation {conversation_id}; take it over first",
        code=ErrorCode.NOT_TAKEN_OVER,
    )


class _Unchanged(Exception):
    """Rolls back a unit that found nothing to change (its event is not published)."""
