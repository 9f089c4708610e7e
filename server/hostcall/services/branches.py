"""Branches of a conversation as use cases: the visitor edits their last message, or has the
last answer written again (docs/protocol.md ``POST .../messages/{id}/edit`` and
``.../regenerate``). Either starts a new run on a branch: the messages it replaces are
superseded, never deleted (the console and export keep them), and its ``RUN_STARTED``
names the run it replaces as AG-UI's ``parentRunId``.

What already happened stays: a write tool's call that was delivered to a page or answered in
a run being replaced refuses the branch (``write_already_ran``), since running the turn
again cannot take the write back, and the visitor is offered a new message instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hostcall.calls.transitions import CallState
from hostcall.engine import Engine
from hostcall.errors import Conflict, NotFound, ToolErrorCode
from hostcall.protocol.codes import ErrorCode
from hostcall.store.interfaces import Calls, Messages, Runs
from hostcall.store.records import Branch, Call, Conversation, Run, RunStatus, StoredMessage
from hostcall.tools import Tool
from hostcall.visitors.visitor import Visitor


@dataclass(frozen=True, slots=True)
class BranchPlan:
    """A branch found possible: the visitor's message it starts from, and what it sends."""

    conversation: Conversation
    asked: StoredMessage
    text: str
    context: dict[str, Any] | None


class _BranchStore(Calls, Messages, Runs, Protocol):
    """What a branch reads before its run starts: the thread, its runs and their calls."""


class BranchService:
    def __init__(self, engine: Engine, *, store: _BranchStore) -> None:
        self.engine = engine
        self.store = store

    async def edit(
        self,
        conversation: Conversation,
        message_id: str,
        text: str,
        *,
        context: dict[str, Any] | None = None,
    ) -> BranchPlan:
        """The branch for ``text`` in place of the visitor's last message ``message_id``,
        checked; ``start`` runs it."""
        current = await self._current(conversation, message_id)
        asked = _last(current, "user")
        if asked is None or asked.id != message_id:
            raise _not_last(message_id, "the visitor's last message")
        return await self._plan(conversation, asked, text, context)

    async def regenerate(self, conversation: Conversation, message_id: str) -> BranchPlan:
        """The branch that answers the visitor's last message again, in place of the last
        answer ``message_id`` (with the page's context the message was sent with), checked;
        ``start`` runs it."""
        current = await self._current(conversation, message_id)
        answer = _last(current, "assistant")
        asked = _last(current, "user")
        if answer is None or answer.id != message_id or asked is None:
            raise _not_last(message_id, "the agent's last answer")
        if current.index(answer) < current.index(asked):
            raise _not_last(message_id, "the answer to the visitor's last message")
        return await self._plan(conversation, asked, asked.text, asked.context)

    async def start(
        self, plan: BranchPlan, *, simulate: bool = False, visitor: Visitor | None = None
    ) -> Run:
        """Run a checked branch. Checked before the visitor's message is counted, so a
        refused one costs nothing; the engine checks the turn again as the run starts."""
        return await self.engine.start_run(
            plan.conversation,
            plan.text,
            simulate=simulate,
            visitor=visitor,
            context=dict(plan.context) if plan.context else None,
            branch=Branch(parent_run_id=plan.asked.run_id, first_message_id=plan.asked.id),
        )

    async def _current(self, conversation: Conversation, message_id: str) -> list[StoredMessage]:
        """The current branch's messages; ``NotFound`` unless ``message_id`` is one of the
        conversation's (another conversation's is as unknown as one that does not exist),
        ``Conflict`` while a run is in progress."""
        listed = await self.store.list_messages(conversation.id)
        if not any(m.id == message_id for m in listed):
            raise NotFound(
                f"no message {message_id[:80]!r} in this conversation",
                code=ErrorCode.UNKNOWN_MESSAGE,
            )
        # Refused as a message is, before what the turn holds: a run in progress has no
        # last answer yet, and may yet deliver a call. The engine checks again in the unit
        # that starts the run (two tabs at once).
        latest = await self.store.latest_run(conversation.id)
        if latest is not None and latest.status in (RunStatus.RUNNING, RunStatus.WAITING):
            raise Conflict(
                f"run {latest.id} is still {latest.status.value}; wait for it to finish",
                code=ErrorCode.RUN_IN_PROGRESS,
                runId=latest.id,
            )
        return [m for m in listed if m.superseded_by is None]

    async def _plan(
        self,
        conversation: Conversation,
        asked: StoredMessage,
        text: str,
        context: dict[str, Any] | None,
    ) -> BranchPlan:
        runs = await self.store.list_runs(conversation.id)
        first = next((i for i, r in enumerate(runs) if r.id == asked.run_id), len(runs))
        replaced = runs[first:]
        ran = await self._writes_that_ran(conversation.id, replaced)
        if ran:
            raise Conflict(
                f"tool {ran[0].tool_name!r} already ran (call {ran[0].id}); running the turn"
                " again cannot take it back: send a new message instead",
                code=ErrorCode.WRITE_ALREADY_RAN,
                callId=ran[0].id,
                tool=ran[0].tool_name,
            )
        return BranchPlan(conversation, asked, text, context)

    async def _writes_that_ran(self, conversation_id: str, runs: list[Run]) -> list[Call]:
        """The calls of ``runs`` of a tool that may write which a page was given or which
        were answered: what running the turn again would do twice. A simulated run's calls
        are answered with simulation results: nothing ran."""
        real = {r.id for r in runs if not r.simulate}
        ran: list[Call] = []
        for call in await self.store.list_calls(conversation_id):
            if call.run_id not in real:
                continue
            agent = await self.engine.agents.run_agent(call.run_id)
            tool = agent.tool(call.tool_name) if agent is not None else None
            # A tool the run's definition does not describe is taken for a write.
            if (tool is None or tool.effect != "read") and _may_have_run(call, tool):
                ran.append(call)
        return ran


# What a failed call's code says never reached its tool: refused, rejected or never sent.
_NEVER_RAN = frozenset({
    ToolErrorCode.INVALID_ARGUMENTS, ToolErrorCode.UNKNOWN_TOOL, ToolErrorCode.NO_HANDLER,
    ToolErrorCode.APPROVAL_REJECTED, ToolErrorCode.APPROVAL_EXPIRED,
    ToolErrorCode.NOT_AUTHORIZED, ToolErrorCode.CALL_LIMIT_REACHED,
    ToolErrorCode.BLOCKED_BY_GUARDRAIL,
})  # fmt: skip


def _may_have_run(call: Call, tool: Tool | None) -> bool:
    """A page was given the call, or it was answered; or the server's block ran it and it
    failed or timed out after it was sent (the write may have happened all the same)."""
    if call.delivered or call.state is CallState.ANSWERED:
        return True
    on_server = tool is not None and tool.kind != "client"
    if not on_server or call.state not in (CallState.FAILED, CallState.EXPIRED):
        return False
    error = (call.outcome or {}).get("error") or {}
    return error.get("code") not in _NEVER_RAN


def _last(messages: list[StoredMessage], role: str) -> StoredMessage | None:
    return next((m for m in reversed(messages) if m.role == role), None)


def _not_last(message_id: str, what: str) -> Conflict:
    return Conflict(
        f"message {message_id[:80]!r} is not {what}; only the last turn can be edited or"
        " regenerated",
        code=ErrorCode.NOT_LAST_MESSAGE,
    )
