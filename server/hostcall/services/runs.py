"""A conversation's runs as use cases: the visitor's message starts one (or is kept for the
person of the team who holds the conversation), Retry starts one over the history as it is,
Stop and an operator's cancel end one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hostcall.engine import Engine
from hostcall.errors import Conflict, HeldByPerson, NotFound
from hostcall.handoff import HumanHandoff
from hostcall.protocol.codes import ErrorCode, RunErrorCode
from hostcall.store.console_records import AuditEntry
from hostcall.store.interfaces import Audit, Runs
from hostcall.store.records import AttachmentRef, Conversation, Run, RunStatus, Surface
from hostcall.visitors.visitor import Visitor


@dataclass(frozen=True, slots=True)
class Held:
    """A visitor's message while ``member`` of the operator's team holds the conversation:
    kept for them, no run started (the wire calls them ``person``: ``MessageHeld``)."""

    message_id: str
    member: str


class _RunStore(Audit, Runs, Protocol):
    """What the run use cases touch: the runs, and the audit of an operator's cancel."""


class RunService:
    def __init__(
        self,
        engine: Engine,
        handoff: HumanHandoff,
        *,
        store: _RunStore,
        clock: Callable[[], float],
    ) -> None:
        self.engine = engine
        # Where a visitor's message goes while a team member holds the conversation.
        self.handoff = handoff
        self.store = store
        self.clock = clock

    async def start(
        self,
        conversation: Conversation,
        text: str,
        *,
        simulate: bool = False,
        visitor: Visitor | None = None,
        context: dict[str, Any] | None = None,
        attachments: tuple[AttachmentRef, ...] = (),
        surfaces: list[Surface] | None = None,
    ) -> Run:
        """A run for the message ``text`` (and the page's ``context``, admitted by its
        agent: hostcall/page_context.py, and the files it sends); ``HeldByPerson`` while a
        member of the team holds the conversation (an AG-UI client is told so).
        ``surfaces``: the conversation's, if read with it (``Engine.start_run``)."""
        return await self.engine.start_run(
            conversation, text, simulate=simulate, visitor=visitor, context=context,
            attachments=attachments, surfaces=surfaces,
        )  # fmt: skip

    async def send(
        self,
        conversation: Conversation,
        text: str,
        *,
        simulate: bool = False,
        visitor: Visitor | None = None,
        context: dict[str, Any] | None = None,
        attachments: tuple[AttachmentRef, ...] = (),
        surfaces: list[Surface] | None = None,
    ) -> Run | Held:
        """The visitor's message: a run for it, or, while a team member holds the conversation,
        the message kept for them to read."""
        try:
            return await self.start(
                conversation, text, simulate=simulate, visitor=visitor, context=context,
                attachments=attachments, surfaces=surfaces,
            )  # fmt: skip
        except HeldByPerson as held:
            message_id = await self.handoff.keep_for_person(
                conversation, text, context=context, attachments=attachments
            )
            return Held(message_id, held.person)

    async def retry(
        self, conversation: Conversation, *, simulate: bool, visitor: Visitor | None
    ) -> Run:
        """After a failed run: a new run over the history as it is; nothing is re-sent."""
        return await self.engine.start_run(conversation, None, simulate=simulate, visitor=visitor)

    async def stop(self, conversation_id: str, run_id: str) -> Run:
        """The visitor's Stop: the run of this conversation and its open calls end as
        ``cancelled``."""
        run = await self.store.get_run(run_id)
        if run is None or run.conversation_id != conversation_id:
            raise NotFound(f"no run {run_id} in {conversation_id}", code=ErrorCode.UNKNOWN_RUN)
        return await self.engine.stop_run(run_id, RunErrorCode.CANCELLED)

    async def cancel(self, run_id: str, *, operator: str) -> Run:
        """An operator's cancel: the run fails with ``operator_cancelled``; audited."""
        run = await self.engine.stop_run(run_id, RunErrorCode.OPERATOR_CANCELLED)
        entry = AuditEntry(self.clock(), operator, "run.cancel", run.conversation_id,
                           details={"run_id": run_id})  # fmt: skip
        await self.store.add_audit(entry)
        return run

    async def cancel_latest(self, conversation_id: str) -> bool:
        """An operator takes the conversation over: the agent stops answering, its run
        ending as an operator's cancel ends it (a reply being written is ended where it is;
        open calls end too). Whether a run was cancelled."""
        return await self._stop_latest(conversation_id, RunErrorCode.OPERATOR_CANCELLED)

    async def stop_abandoned(self, conversation_id: str) -> None:
        """The conversation's run, if it still goes on, stopped as the visitor's Stop does:
        its client went away (an AG-UI run lives only as long as its request)."""
        await self._stop_latest(conversation_id, RunErrorCode.CANCELLED)

    async def active(self, conversation_id: str) -> bool:
        """Whether the conversation's latest run still goes on (running, or waiting)."""
        run = await self.store.latest_run(conversation_id)
        return run is not None and run.status in (RunStatus.RUNNING, RunStatus.WAITING)

    def abandon(self, conversation_id: str) -> None:
        """``stop_abandoned``, in a task of the engine's own: the request whose client went
        away is being cancelled, and the stop must outlive it."""
        self.engine.tasks.spawn(self.stop_abandoned(conversation_id))

    async def _stop_latest(self, conversation_id: str, code: RunErrorCode) -> bool:
        run = await self.store.latest_run(conversation_id)
        if run is None or run.status not in (RunStatus.RUNNING, RunStatus.WAITING):
            return False
        try:
            await self.engine.stop_run(run.id, code)
        except Conflict:  # it ended first (answered, stopped): nothing left to stop
            return False
        return True
