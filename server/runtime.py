"""Everything one server process holds, built from settings (reached as ``app.state.hostcall``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace

from server.agents import Agent, load_agents
from server.broker import Broker
from server.engine import Engine
from server.journal import Journal
from server.platform import Platform, load_platform
from server.settings import Settings, load_secret_keys
from server.store import Store
from server.store.sqlite import SQLiteStore
from server.tokens import Purpose, Tokens


@dataclass
class Runtime:
    settings: Settings
    agents: dict[str, Agent]
    store: Store
    broker: Broker
    tokens: Tokens
    engine: Engine
    _sweeper: asyncio.Task[None] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, settings: Settings, *, clock: Callable[[], float] = time.time) -> Runtime:
        platform = load_platform(settings.agents_dir, settings.environ)
        agents = _load(settings, platform)
        keys = settings.secret_keys or load_secret_keys(settings.db_path, settings.environ)
        tokens = Tokens(
            keys,
            {
                Purpose.SESSION: settings.session_max_age,
                Purpose.STREAM: settings.stream_max_age,
                Purpose.CALL_RESULT: settings.call_token_max_age,
                Purpose.CALL_DECISION: settings.call_token_max_age,
            },
        )
        store = SQLiteStore(settings.db_path)
        broker = Broker()
        engine = Engine(
            Journal(store, broker),
            tokens,
            agents,
            platform=platform,
            environ=settings.environ,
            clock=clock,
            surface_grace=settings.surface_grace_seconds,
        )
        return cls(settings, agents, store, broker, tokens, engine)

    def reload_agents(self) -> None:
        """Read the agent files again; runs already started keep their own definitions.

        Raises ``AgentConfigError`` (and changes nothing) if the files have problems.
        """
        platform = load_platform(self.settings.agents_dir, self.settings.environ)
        agents = _load(self.settings, platform)
        self.agents = self.engine.agents = agents
        self.engine.platform = platform

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Recover what a previous process left, expire calls on time, close on the way out."""
        self.engine.recover()
        self._sweeper = asyncio.create_task(self.engine.sweep_forever(self.settings.sweep_seconds))
        try:
            yield
        finally:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            await self.engine.drain()
            self.store.close()


def _load(settings: Settings, platform: Platform) -> dict[str, Agent]:
    extra = settings.extra_origins
    return {
        agent_id: replace(
            agent, allowed_origins=tuple(dict.fromkeys((*agent.allowed_origins, *extra)))
        )
        for agent_id, agent in load_agents(settings.agents_dir, settings.environ, platform).items()
    }
