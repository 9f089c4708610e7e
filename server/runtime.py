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
from server.leases import Leases
from server.platform import Platform, load_platform
from server.relay import Relay
from server.settings import Settings, load_secret_keys
from server.store import Store, open_store
from server.tokens import Purpose, Tokens


@dataclass
class Runtime:
    settings: Settings
    agents: dict[str, Agent]
    store: Store
    broker: Broker
    tokens: Tokens
    engine: Engine
    leases: Leases
    _tasks: list[asyncio.Task[None]] = field(default_factory=list, repr=False)

    @classmethod
    def build(cls, settings: Settings, *, clock: Callable[[], float] = time.time) -> Runtime:
        platform = load_platform(settings.agents_dir, settings.environ)
        agents = _load(settings, platform)
        shared = settings.database_url is not None
        keys = settings.secret_keys or load_secret_keys(
            settings.db_path, settings.environ, shared=shared
        )
        tokens = Tokens(
            keys,
            {
                Purpose.SESSION: settings.session_max_age,
                Purpose.STREAM: settings.stream_max_age,
                Purpose.CALL_RESULT: settings.call_token_max_age,
                Purpose.CALL_DECISION: settings.call_token_max_age,
            },
        )
        store = open_store(settings.database_url or settings.db_path)
        broker = Broker()
        leases = Leases(store, ttl=settings.lease_seconds, clock=clock)
        engine = Engine(
            Journal(store, broker),
            tokens,
            agents,
            platform=platform,
            environ=settings.environ,
            leases=leases,
            clock=clock,
            surface_grace=settings.surface_grace_seconds,
        )
        return cls(settings, agents, store, broker, tokens, engine, leases)

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
        """Recover what a previous process left, expire calls on time, close on the way out.

        Background tasks: the sweeper (one process of a cluster at a time), lease renewal,
        and on PostgreSQL the relay of other processes' events to this one's streams.
        """
        self.engine.recover()
        jobs = [
            self.engine.sweep_forever(self.settings.sweep_seconds),
            self.leases.renew_forever(),
        ]
        if self.settings.database_url is not None:
            relay = Relay(self.settings.database_url, self.store, self.broker)
            jobs.append(relay.run_forever())
        self._tasks = [asyncio.create_task(job) for job in jobs]
        try:
            yield
        finally:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
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
