"""What every part of the run engine (hostcall/engine.py) shares: the store, journal,
ledger and leases, the agents frozen per run and their models, and the tasks it spawns.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from hostcall.agents import Agent, definition_digest, parse_agent
from hostcall.journal import Journal
from hostcall.leases import Leases
from hostcall.ledger import Ledger
from hostcall.models.base import (
    Model,
)
from hostcall.models.factory import build_model
from hostcall.platform import Platform
from hostcall.store import Store

log = logging.getLogger("hostcall.engine")

RUN_CACHE_SIZE = 4096
FAIL_RETRY_MAX_SECONDS = 5.0
FAIL_RETRIES = 12  # about 45 s of a full disk before giving up until the next start
# Told to the model after a reply of its own that an error cut off.
INTERRUPTED_NOTE = "\n\n[This reply was interrupted by an error before it was complete.]"
SWEEPER = "sweeper"


class EngineBase:
    journal: Journal
    store: Store
    ledger: Ledger
    leases: Leases
    agents: Mapping[str, Agent]
    platform: Platform
    environ: Mapping[str, str]
    clock: Callable[[], float]
    # Told the (estimated) model tokens of each step: the cost limits (hostcall/quotas.py).
    on_model_tokens: Callable[[Agent, str, int], Awaitable[None]] | None
    _stalled_checked: float
    _by_run: OrderedDict[str, Agent]
    _frozen: dict[str, Agent]
    _models: dict[str, Model]
    _tasks: set[asyncio.Task[None]]

    # ---- agents, frozen per run -----------------------------------------------------------

    async def agent_of_run(self, run_id: str) -> Agent:
        """The agent as it was when the run started (its definition is stored in the run)."""
        agent = await self.run_agent(run_id)
        assert agent is not None, f"no run {run_id}"
        return agent

    async def run_agent(self, run_id: str) -> Agent | None:
        """``agent_of_run``, or None when there is no such run: a run id from a token (the
        database may be older than the token, restored from a backup)."""
        agent = self._by_run.get(run_id)
        if agent is not None:
            self._by_run.move_to_end(run_id)
            return agent
        run = await self.store.get_run(run_id)
        if run is None:
            return None
        key = run.agent_digest or definition_digest(run.agent)
        agent = self._frozen.get(key)
        if agent is None:
            agent, problems = parse_agent(run.agent, f"run {run_id}", self.environ)
            assert agent is not None, problems
            self._frozen[key] = agent
        self._remember(run_id, agent)
        return agent

    def _remember(self, run_id: str, agent: Agent) -> None:
        self._by_run[run_id] = agent
        if len(self._by_run) > RUN_CACHE_SIZE:
            self._by_run.popitem(last=False)

    def _model(self, agent: Agent) -> Model:
        key = agent.digest
        model = self._models.get(key)
        if model is None:
            names = [t.name for t in agent.tools]
            model = self._models[key] = build_model(agent.model, environ=self.environ, tools=names)
        return model

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for steps in flight (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)
