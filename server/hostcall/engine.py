"""The run engine: a user message starts a run; the model steps until it stops calling tools.

A run waiting for a client holds no coroutine. Its state lives in the store (status
``waiting``, the calls of its current step); whoever settles the last open call of the step
claims the run (``waiting`` → ``running``, atomically) and starts the next step.

Several processes may share the store. A step, and a server-side call in flight, is owned
by a lease (hostcall/leases.py) taken in the transaction that starts it; ``sweep`` runs in
one process of the cluster at a time: it expires calls past their deadline, adopts the
work of processes whose leases lapsed (they died), and resumes runs a crash left between
two transactions. The same code recovers a single process after a restart.

The parts live in hostcall/runs/: stepping.py (a model step, resuming, failing),
server_calls.py (server-side tools), recovery.py (the sweeper), base.py (what they share).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from hostcall.agents import Agent
from hostcall.errors import Conflict, NotFound
from hostcall.journal import Journal
from hostcall.leases import Leases
from hostcall.ledger import Ledger, new_id
from hostcall.models.base import (
    Model,
)
from hostcall.notices import run_notice
from hostcall.platform import Platform
from hostcall.protocol.events import (
    RunError,
    RunStarted,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
)
from hostcall.runs.recovery import Recovery
from hostcall.store.records import ClaimedRun, Conversation, Run, RunStatus, StoredMessage
from hostcall.tokens import Tokens

log = logging.getLogger("hostcall.engine")


class Engine(Recovery):
    def __init__(
        self,
        journal: Journal,
        tokens: Tokens,
        agents: Mapping[str, Agent],
        *,
        platform: Platform,
        environ: Mapping[str, str],
        leases: Leases,
        clock: Callable[[], float] = time.time,
        surface_grace: float = 5.0,
    ) -> None:
        self.journal = journal
        self.store = journal.store
        # Told the (estimated) model tokens of each step: the cost limits (hostcall/quotas.py).
        self.on_model_tokens = None
        self.leases = leases
        self._stalled_checked = 0.0
        # Replaced whole on reload; runs in flight keep the definition they started with.
        self.agents = agents
        self.platform = platform
        self.environ = environ
        # Definitions are immutable once a run starts: cache by run id (bounded), and share
        # parsed agents and built models between runs of the same definition.
        self._by_run: OrderedDict[str, Agent] = OrderedDict()
        self._frozen: dict[str, Agent] = {}
        self._models: dict[str, Model] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.ledger = Ledger(
            journal,
            tokens,
            agent_of_run=self.agent_of_run,
            run_agent=self.run_agent,
            platform=lambda: self.platform,
            on_settled=self._resume_soon,
            on_dispatched=self._start_server_call,
            clock=clock,
            surface_grace=surface_grace,
        )
        self.clock = clock

    # ---- starting and resuming -------------------------------------------------------------

    async def start_run(
        self, conversation: Conversation, text: str, *, simulate: bool = False
    ) -> Run:
        agent = self.agents.get(conversation.agent_id)
        if agent is None:
            raise NotFound(
                f"agent {conversation.agent_id!r} is no longer loaded", code="unknown_agent"
            )
        run = Run(
            new_id("r"),
            conversation.id,
            agent.source,
            RunStatus.RUNNING,
            simulate=simulate,
            agent_digest=agent.digest,
        )
        message_id = new_id("m")
        cid = conversation.id
        async with self.journal.unit() as unit:
            # The run's message and first events go first: their append locks the
            # conversation (on PostgreSQL its row, to the end of the transaction; SQLite's
            # transaction holds the whole file), so the check for a run in progress that
            # follows, in a statement of its own, sees every run committed before: two
            # messages at once (two tabs, two processes) start one run, not two. A refused
            # start rolls them back, and nothing is published. (Issue 10: the lock was a
            # statement of its own.)
            message = StoredMessage(message_id, cid, run.id, "user", text)
            await self.store.add_message(message)
            # One append (one statement on PostgreSQL, with the message), not four.
            await unit.emit_all(
                cid,
                [
                    RunStarted(cid, run.id, simulated=True if simulate else None),
                    TextMessageStart(message_id, "user"),
                    TextMessageContent(message_id, text),
                    TextMessageEnd(message_id),
                ],
            )
            start = await self.leases.create_run_alone(run)
            if start.busy is not None:
                busy_id, status = start.busy
                raise Conflict(
                    f"run {busy_id} is still {status.value}; wait for it to finish",
                    code="run_in_progress",
                    runId=busy_id,
                )
            self._remember(run.id, agent)
        # The first step's history, read with the run's start (its message is the last):
        # nothing else adds a message while the run is running.
        self._spawn(self._advance(run.id, ClaimedRun(run, start.history)))
        return run

    async def cancel_run(self, run_id: str) -> bool:
        """Stop a run waiting on its calls (the operator console); its open calls expire.

        False if the run is not waiting (a run mid-step finishes its step first). A waiting
        run holds no lease, so the claim is the whole story, in any process.
        """
        run = await self.store.get_run(run_id)
        if run is None:
            return False
        message = run_notice("cancelled")
        async with self.journal.unit() as unit:
            if not await self.store.claim_run(run_id, RunStatus.WAITING, RunStatus.FAILED):
                return False
            await self.store.update_run(run_id, error={"code": "cancelled", "message": message})
            await unit.emit(run.conversation_id, RunError(message, "cancelled", run_id))
        for call in await self.store.calls_of_step(run_id, run.step):
            if call.state.open:
                await self.ledger.expire(call)
        return True
