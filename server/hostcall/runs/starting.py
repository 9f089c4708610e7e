"""A run's start: the visitor's message (or Retry) and the run, committed in one unit that
refuses a second run of the conversation; the engine (hostcall/engine.py) steps what it
returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hostcall.attachments.claims import take_attachments
from hostcall.attachments.wire import user_message
from hostcall.errors import Conflict, HeldByPerson, NotFound
from hostcall.journal import Journal
from hostcall.leases import Leases
from hostcall.ledger import Ledger, new_id
from hostcall.page_tools import planned
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.events import RunStarted
from hostcall.runs.agents import RunAgents
from hostcall.store.interfaces import Attachments, Conversations, Messages, Runs, Surfaces
from hostcall.store.records import (
    AttachmentRef,
    Branch,
    ClaimedRun,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
    Surface,
)
from hostcall.visitors.visitor import Visitor


class _StartStore(Attachments, Conversations, Messages, Runs, Surfaces, Protocol):
    """What a start reads and writes: the conversation's pages, the visitor's message and
    the files it sends, the run."""


@dataclass(frozen=True, slots=True)
class Started:
    """A run committed, with its first step's history (``ClaimedRun``); ``agent_id``: the
    agent it runs, for its metrics."""

    claimed: ClaimedRun
    agent_id: str


class Starts:
    def __init__(
        self,
        journal: Journal,
        leases: Leases,
        agents: RunAgents,
        ledger: Ledger,
        *,
        store: _StartStore,
    ) -> None:
        self.journal = journal
        self.leases = leases
        self.agents = agents
        self.ledger = ledger
        self.store = store

    async def start(
        self,
        conversation: Conversation,
        text: str | None,
        *,
        simulate: bool = False,
        visitor: Visitor | None = None,
        context: dict[str, Any] | None = None,
        branch: Branch | None = None,
        attachments: tuple[AttachmentRef, ...] = (),
        surfaces: list[Surface] | None = None,
    ) -> Started:
        """``Engine.start_run``'s unit (its docstring says what each option does)."""
        agent = self.agents.loaded.get(conversation.agent_id)
        if agent is None:
            raise NotFound(
                f"agent {conversation.agent_id!r} is no longer loaded", code=ErrorCode.UNKNOWN_AGENT
            )
        # Its MCP servers' tool lists, read now, and the page tools its conversation's
        # present pages hold: kept for the whole run.
        moves = self.ledger.moves
        if surfaces is None:
            surfaces = await self.store.list_surfaces(conversation.id)
        offered = planned(
            surfaces,
            now=moves.clock(),
            grace=moves.surface_grace,
        )
        agent = await self.agents.freeze(agent, offered)
        run = Run(
            new_id("r"),
            conversation.id,
            agent.source,
            RunStatus.RUNNING,
            simulate=simulate,
            agent_digest=agent.digest,
            visitor=visitor,
        )
        message_id = new_id("m")
        cid = conversation.id
        started = RunStarted(
            cid,
            run.id,
            simulated=True if simulate else None,
            parent_run_id=branch.parent_run_id if branch is not None else None,
        )
        async with self.journal.unit() as unit:
            # The run's message and first events go first: their append locks the
            # conversation (on PostgreSQL its row, to the end of the transaction; SQLite's
            # transaction holds the whole file), so the check for a run in progress that
            # follows, in a statement of its own, sees every run committed before: two
            # messages at once (two tabs, two processes) start one run, not two. A refused
            # start rolls them back, and nothing is published.
            # A person's (or a browser's) history lists what they wrote in last first, and
            # an agent's retention counts idle days from it (hostcall/retention.py). Before
            # the append: on PostgreSQL the append's UPDATE of the conversation sets it.
            await self.store.touch_conversation(cid, self.leases.clock())
            if text is None:
                await unit.emit(cid, started)
                last = await self.store.latest_run(cid)
                # A run in progress is refused below (``run_in_progress``), as for a message.
                if last is None or last.status is RunStatus.FINISHED:
                    raise Conflict(
                        f"the last run of {cid} did not fail; there is nothing to retry",
                        code=ErrorCode.NOTHING_TO_RETRY,
                        status=None if last is None else last.status.value,
                    )
            else:
                if branch is not None:
                    await self.store.supersede_messages(cid, branch.first_message_id, run.id)
                message = StoredMessage(
                    message_id, cid, run.id, "user", text, context=context or None,
                    attachments=attachments,
                )  # fmt: skip
                await self.store.add_message(message)
                # One append (one statement on PostgreSQL, with the message), not four.
                await unit.emit_all(cid, [started, *user_message(cid, message_id, text,
                                                                  attachments)])  # fmt: skip
                await take_attachments(self.store, cid, attachments, message_id)
            # Only the turns the model is sent: a step costs the same however long the
            # conversation has grown.
            start = await self.leases.create_run_alone(run, turns=agent.history_turns)
            if start.held is not None:
                # A person of the team holds the conversation (hostcall/handoff.py): no
                # run; the caller keeps the message for them. Read after the append's lock,
                # as the run in progress is: a takeover committing now is seen, or sees
                # this run.
                raise HeldByPerson(cid, start.held)
            if start.busy is not None:
                busy_id, status = start.busy
                raise Conflict(
                    f"run {busy_id} is still {status.value}; wait for it to finish",
                    code=ErrorCode.RUN_IN_PROGRESS,
                    runId=busy_id,
                )
            self.agents.remember(run.id, agent)
        # The first step's history, read with the run's start (its message is the last):
        # nothing else adds a message while the run is running.
        return Started(ClaimedRun(run, start.history), agent.id)
