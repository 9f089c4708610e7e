"""Everything one server process holds, built from settings (reached as ``app.state.hostcall``,
by a route through ``runtime_of`` or ``services_of``)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace

from starlette.requests import HTTPConnection

from hostcall import metrics
from hostcall.agents import Agent, load_agents
from hostcall.apps.origin import AppsOrigin, apps_origin
from hostcall.backlog import Backlog
from hostcall.blocks.mcp.pool import McpPool
from hostcall.broker import Broker
from hostcall.counters import Counters, LimitsCounters, StoreCounters
from hostcall.door import Door
from hostcall.engine import Engine
from hostcall.errors import (
    Forbidden,
    NotFound,
    StoreError,
    StoreUnwritable,
    Unauthorized,
    Unavailable,
)
from hostcall.handoff import HumanHandoff
from hostcall.journal import Journal
from hostcall.leases import Leases
from hostcall.platform import Platform, load_platform
from hostcall.pricing import model_name
from hostcall.protocol.codes import ErrorCode
from hostcall.quotas import Quotas
from hostcall.relay import Relay
from hostcall.retention import Retention
from hostcall.runs.agents import RunAgents
from hostcall.runs.recovery import Recovery
from hostcall.runs.server_calls import ServerCalls
from hostcall.runs.starting import Starts
from hostcall.runs.stepping import Steps
from hostcall.services import (
    Services,
)
from hostcall.settings import Capacity, Settings, load_secret_keys
from hostcall.store import Store, open_store
from hostcall.store.postgres import PostgresStore
from hostcall.stream_gate import StreamGate
from hostcall.tokens import Claims, Purpose, Tokens
from hostcall.tracing import Tracing
from hostcall.visitors.identity_tokens import Identities
from hostcall.visitors.sessions import Sessions
from hostcall.wiring import build_ledger, build_services

AGENT_IDS_KEPT = 10_000
# How long /healthz waits for the store's write probe: a health check must answer fast,
# and a healthy database answers in milliseconds.
HEALTH_PROBE_SECONDS = 0.8


@dataclass
class Runtime:
    settings: Settings
    agents: dict[str, Agent]
    store: Store
    broker: Broker
    tokens: Tokens
    engine: Engine
    leases: Leases
    quotas: Quotas
    sessions: Sessions
    clock: Callable[[], float] = time.time
    tracing: Tracing = field(default_factory=Tracing.off)
    # Visitors' identity tokens, and the JWKS they are checked with
    # (hostcall/visitors/identity_tokens.py).
    identities: Identities = field(default_factory=Identities, repr=False)
    # The pages of logs those streams replay, read and framed once for all of them.
    backlog: Backlog = field(default_factory=Backlog, repr=False)
    # On PostgreSQL: what carries other processes' events to this one's streams.
    relay: Relay | None = field(default=None, repr=False)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list, repr=False)
    # Conversation id -> its agent's id, which never changes (``agent_of_conversation``).
    _agent_ids: dict[str, str] = field(default_factory=dict, repr=False)
    # The use cases routes call (hostcall/services/), on the parts above.
    services: Services = field(init=False, repr=False)
    # Refuses new work while this process cannot take more (hostcall/door.py).
    door: Door = field(init=False, repr=False)
    # Streams take turns here to connect and for each page of a replay
    # (hostcall/stream_gate.py).
    stream_gate: StreamGate = field(init=False, repr=False)
    # The origin MCP Apps' views run on (hostcall/apps/origin.py); None: views not shown.
    apps: AppsOrigin | None = None

    def __post_init__(self) -> None:
        self.services = build_services(
            self.engine, self.store, self.quotas, clock=self.clock, apps=self.apps
        )
        capacity = self.settings.capacity or Capacity.from_environ(self.settings.environ)
        self.door = Door(
            capacity, steps=lambda: len(self.engine.tasks), db_waiters=self.store.connection_waiters
        )
        self.stream_gate = StreamGate(
            max_waiting=capacity.max_stream_waiters, retry_after=capacity.retry_after
        )

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
                Purpose.RESUME: settings.session_max_age,
                Purpose.STREAM: settings.stream_max_age,
                Purpose.CALL_RESULT: settings.call_token_max_age,
                Purpose.CALL_DECISION: settings.call_token_max_age,
                Purpose.APP_VIEW: settings.app_view_max_age,
            },
            clock=clock,
        )
        apps = apps_origin(settings.apps_origin, settings.environ)
        store = _open_store(settings)
        broker = Broker()
        leases = Leases(store, ttl=settings.lease_seconds, clock=clock)
        # Limits count where every process sees them: in PostgreSQL when it is shared,
        # else in memory, or in a storage of the operator's choosing.
        counters: Counters = (
            StoreCounters(store, clock=clock)
            if shared and settings.limits_storage == "memory://"
            else LimitsCounters(settings.limits_storage)
        )
        quotas = Quotas(counters, clock=clock)
        journal = Journal(store, broker)
        tracing = Tracing.build(settings.environ, settings.span_exporter)
        run_agents = RunAgents(store, agents, platform=platform, environ=settings.environ)
        ledger = build_ledger(
            journal,
            store,
            tokens,
            leases,
            run_agents,
            clock=clock,
            surface_grace=settings.surface_grace_seconds,
            tracing=tracing,
            apps=apps,
        )
        engine = Engine(
            journal,
            leases,
            run_agents,
            ledger,
            store=store,
            starts=Starts(journal, leases, run_agents, ledger, store=store),
            steps=Steps(
                journal,
                leases,
                run_agents,
                ledger.proposals,
                quotas,
                store=store,
                tracing=tracing,
                clock=clock,
            ),
            server_calls=ServerCalls(
                ledger,
                run_agents,
                store=store,
                people=HumanHandoff(journal, store=store, clock=clock),
                views=apps is not None,
                clock=clock,
            ),
            recovery=Recovery(
                journal,
                leases,
                ledger,
                store=store,
                clock=clock,
                retention=Retention(store, lambda: run_agents.loaded, clock=clock, quotas=quotas),
            ),
        )
        sessions = Sessions(tokens, store, max_age=settings.session_max_age)
        identities = Identities(platform=lambda: run_agents.platform, clock=clock)
        parts = (broker, tokens, engine, leases, quotas, sessions)
        return cls(settings, agents, store, *parts, clock, tracing, identities, apps=apps)

    def stream_ticket(
        self, conversation_id: str, generation: int, person: str | None = None
    ) -> str:
        """``Sessions.stream_ticket``: a stream token that opens one stream, once."""
        return self.sessions.stream_ticket(conversation_id, generation, person)

    @property
    def platform(self) -> Platform:
        """The platform file the loaded agents were checked against (hostcall/platform.py)."""
        return self.engine.platform

    @property
    def mcp(self) -> McpPool:
        """The MCP servers' sessions the engine's runs share (the designer lists their tools)."""
        return self.engine.agents.mcp

    async def agent_of_conversation(self, conversation_id: str) -> str | None:
        """The id of the conversation's agent, or None if there is no such conversation.
        A conversation never changes agent, so the latest ones are remembered: checking
        the Origin of a browser's answer to a call costs no read."""
        found = self._agent_ids.get(conversation_id)
        if found is None:
            conversation = await self.store.get_conversation(conversation_id)
            if conversation is None:
                return None
            found = self.remember_agent(conversation.id, conversation.agent_id)
        return found

    def remember_agent(self, conversation_id: str, agent_id: str) -> str:
        """A conversation made or read here (its session checked): its agent, so that the
        answers to its calls, which come with tokens of their own, read nothing for their
        Origin's check (one statement of the load bench's 20 a conversation, on
        PostgreSQL)."""
        if conversation_id not in self._agent_ids:
            if len(self._agent_ids) >= AGENT_IDS_KEPT:
                del self._agent_ids[next(iter(self._agent_ids))]  # the oldest remembered
            self._agent_ids[conversation_id] = agent_id
        return agent_id

    def check_stream_ticket(self, token: str | None, conversation_id: str) -> Claims:
        """The ticket's claims, once its signature, age and conversation are right."""
        claims = self.tokens.verify(Purpose.STREAM, token)
        if claims.conversation_id != conversation_id:
            raise Forbidden(f"this stream token is for another conversation than {conversation_id}")
        if claims.nonce is None:
            raise Unauthorized("the stream token is not a stream ticket", code=ErrorCode.BAD_TOKEN)
        return claims

    async def redeem_stream_ticket(self, nonce: str) -> None:
        """Use the ticket up; a second stream opened with it is refused (``used_token``)."""
        now = self.clock()
        expires = now + self.settings.stream_max_age + 1
        if not await self.store.consume_ticket(nonce, expires, now):
            raise Unauthorized("this stream token was already used", code=ErrorCode.USED_TOKEN)

    async def open_stream(self, conversation_id: str, ticket: Claims) -> int:
        """A first stream's conversation checked against its ticket, the ticket redeemed
        (one statement on PostgreSQL), and the conversation's last seq as that read saw
        it; refused, the ticket stays usable."""
        assert ticket.nonce is not None
        now = self.clock()
        expires = now + self.settings.stream_max_age + 1
        opened = await self.store.open_stream(
            conversation_id, ticket.generation, ticket.nonce, expires, now
        )
        if opened.conversation is None:
            raise NotFound(
                f"no conversation {conversation_id}", code=ErrorCode.UNKNOWN_CONVERSATION
            )
        self.sessions.check_generation(opened.conversation, ticket)
        if not opened.redeemed:
            raise Unauthorized("this stream token was already used", code=ErrorCode.USED_TOKEN)
        return opened.last_seq

    async def check_store(self) -> None:
        """Raise ``Unavailable`` (503 store_unavailable) when the store cannot take a write:
        its probe fails, or does not answer within ``HEALTH_PROBE_SECONDS`` (a database
        that is down must not leave the balancer's health check hanging), or the database
        refused a real write lately (a full disk lets the small probe through)."""
        try:
            async with asyncio.timeout(HEALTH_PROBE_SECONDS):
                await self.store.probe_write()
        except TimeoutError:
            reason = f"no answer within {HEALTH_PROBE_SECONDS:g} s"
            raise Unavailable(f"the database cannot be written: {reason}", reason=reason) from None
        except Exception as exc:  # whatever the store's driver raises
            reason = str(exc).strip() or type(exc).__name__
            raise Unavailable(f"the database cannot be written: {reason}", reason=reason) from None
        refused = self.store.refused_write()
        if refused is not None:
            raise Unavailable(f"the database refused a write: {refused}", reason=refused)

    def reload_agents(self) -> None:
        """Read the agent files again; runs already started keep their own definitions.

        Raises ``AgentConfigError`` (and changes nothing) if the files have problems.
        """
        platform = load_platform(self.settings.agents_dir, self.settings.environ)
        agents = _load(self.settings, platform)
        self.agents = agents
        self.engine.agents.reload(agents, platform)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Recover what a previous process left, expire calls on time, close on the way out.

        Background tasks: the sweeper (one process of a cluster at a time), lease renewal,
        on PostgreSQL the relay of other processes' events to this one's streams, and with
        ``--workers`` the writing of the live gauges for another worker's scrape.
        """
        await self.engine.recover()
        jobs = [self.engine.sweep_forever(self.settings.sweep_seconds), self.engine.agents.warm()]
        url = self.settings.database_url
        stop_renewing = None
        if url is None:
            jobs.append(self.leases.renew_forever())
        else:
            stop_renewing = self.leases.renew_in_thread(url)
            assert isinstance(self.store, PostgresStore)
            self.relay = Relay(url, self.store, self.broker, origin=self.store.origin)
            jobs.append(self.relay.run_forever())
        if metrics.multiprocess():
            jobs.append(metrics.write_live_forever())
        self._tasks = [asyncio.create_task(job) for job in jobs]
        try:
            if self.relay is not None:
                await self.relay.ready()  # before the first request: see Relay.ready
            yield
        finally:
            if stop_renewing is not None:
                stop_renewing()
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self.engine.drain()
            await self.engine.agents.mcp.close()  # a stdio server's command stops with it
            await self.identities.close()
            with contextlib.suppress(Exception):  # a store that is down: the lease lapses
                await self.engine.retire()
            await self.store.close()
            # Off the event loop: the last batch of spans may take a moment to send.
            await asyncio.to_thread(self.tracing.shutdown)


def runtime_of(request: HTTPConnection) -> Runtime:
    """The runtime of the app serving the request: the one way a route reaches it."""
    runtime: Runtime = request.app.state.hostcall
    return runtime


def services_of(request: HTTPConnection) -> Services:
    """The use cases of the app serving the request (``runtime_of(request).services``)."""
    return runtime_of(request).services


def _open_store(settings: Settings) -> Store:
    """The store, proven writable: better no server than one that fails every answer."""
    target = settings.database_url or settings.db_path
    try:
        store = open_store(target, environ=settings.environ)
    except StoreError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnwritable(target, str(exc)) from None
    try:
        store.check_writable()
    except Exception as exc:  # whatever the store's driver raises
        raise StoreUnwritable(target, str(exc)) from None
    return store


def _load(settings: Settings, platform: Platform) -> dict[str, Agent]:
    extra = settings.extra_origins
    agents = {
        agent_id: replace(
            agent, allowed_origins=tuple(dict.fromkeys((*agent.allowed_origins, *extra)))
        )
        for agent_id, agent in load_agents(settings.agents_dir, settings.environ, platform).items()
    }
    # The metrics' agent and model labels are these, and "other" (hostcall/metrics.py).
    metrics.agents_loaded({i: [model_name(a.model)] for i, a in agents.items()})
    return agents
