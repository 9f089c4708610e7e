"""The agents a run engine knows: the ones loaded now (with their platform), and each run's
agent as it was when the run started, with the model built for each definition.

Shared by the ledger (a call's tool, its view, its environment) and the engine (a run's
steps); replaced whole on reload, while runs in flight keep the definition they started with.
A run's definition is the agent's with the tool lists of its MCP servers read in (``freeze``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from hostcall.agents import Agent, definition_digest, parse_agent
from hostcall.blocks import NotAuthorized
from hostcall.blocks.mcp.binding import frozen_entries, is_binding
from hostcall.blocks.mcp.calling import allowed_server
from hostcall.blocks.mcp.pool import McpPool, McpRefused, McpUnavailable
from hostcall.blocks.mcp.results import result_schema
from hostcall.errors import RunUnreadable
from hostcall.models.base import Model
from hostcall.models.factory import RefusedModel, build_model
from hostcall.models.reply_check import reply_problems
from hostcall.page_tools import ADMITTED, admit, agent_names, run_entries
from hostcall.platform import Platform
from hostcall.protocol.page_tool import PageTool
from hostcall.store.interfaces import Runs

RUN_CACHE_SIZE = 4096
# How long a person's message may wait for an MCP server's tool list (a stdio command's cold
# start included, though ``warm`` has usually opened the session before anyone writes).
LIST_SECONDS = 10.0
log = logging.getLogger("hostcall.engine")


class RunAgents:
    def __init__(
        self,
        store: Runs,
        loaded: Mapping[str, Agent],
        *,
        platform: Platform,
        environ: Mapping[str, str],
        mcp: McpPool | None = None,
    ) -> None:
        self.store = store
        self.mcp = mcp or McpPool()
        self.loaded = loaded
        self.platform = platform
        self.environ = environ
        # Definitions are immutable once a run starts: cache by run id (bounded), and share
        # parsed agents and built models between runs of the same definition.
        self._by_run: OrderedDict[str, Agent] = OrderedDict()
        self._frozen: dict[str, Agent] = {}
        self._models: dict[str, Model] = {}
        self._retaining: asyncio.Task[None] | None = None  # held: a task is weakly kept

    def reload(self, loaded: Mapping[str, Agent], platform: Platform) -> None:
        self.loaded = loaded
        self.platform = platform
        # Models read the allowed variables when built: rebuild them under the new lists.
        self._models.clear()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not on the server's loop: its sessions stop with it
        self._retaining = loop.create_task(self._renew(platform))

    async def _renew(self, platform: Platform) -> None:
        await self.mcp.retain(platform.mcp_servers.values())
        await self.warm()

    async def warm(self) -> None:
        """Open the sessions of the servers the loaded agents use (starting their stdio
        commands), so that the first run does not wait for them; a failure is only logged
        (the first run tries again)."""
        wanted = {
            (binding.server, agent.environment)
            for agent in self.loaded.values()
            for binding in agent.mcp
        }
        for name, environment in sorted(wanted):
            try:
                server = allowed_server(
                    name,
                    self.platform.mcp_servers,
                    self.platform.environment(environment).mcp_servers,
                )
                async with asyncio.timeout(LIST_SECONDS):
                    await self.mcp.list_tools(server)
            except (NotAuthorized, McpUnavailable, McpRefused, TimeoutError) as exc:
                reason = getattr(exc, "message", None) or str(exc) or "no answer in time"
                log.warning("MCP server %r not reached at start: %s", name, reason)

    async def agent_of_run(self, run_id: str) -> Agent:
        """The agent as it was when the run started (its definition is stored in the run);
        ``RunUnreadable`` if the run is gone."""
        agent = await self.run_agent(run_id)
        if agent is None:
            raise RunUnreadable(run_id, ["no such run"])
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
            agent, problems = parse_agent(
                run.agent, f"run {run_id}", self.environ, check_replies=False, frozen=True
            )
            if agent is None:  # a stored row is data from outside this process
                log.error("run %s: its stored definition cannot be read: %s", run_id, problems)
                raise RunUnreadable(run_id, problems)
            self._frozen[key] = agent
        self.remember(run_id, agent)
        return agent

    async def freeze(self, agent: Agent, page_tools: Sequence[PageTool] = ()) -> Agent:
        """The agent with its MCP servers' tools as the servers list them now, and the page
        tools it admits of ``page_tools`` (its conversation's, hostcall/page_tools.py): what
        a new run keeps to its end. A server the environment does not allow is not
        contacted; one that cannot be reached leaves its tools out of this run (and says so
        in the log)."""
        environment = self.platform.environment(agent.environment)
        admitted: list[PageTool] = []
        if agent.page_tools is not None and page_tools:
            # Again: the agent file may have changed since the page offered them.
            admitted, _ = admit(agent.page_tools, page_tools, taken=agent_names(agent))
        if not agent.mcp and not admitted:
            return agent
        source = dict(agent.source)
        # The bindings stay in: re-read, the definition knows the names its rules may call
        # even when a server was left out (the model is then told unknown_tool).
        tools: list[Any] = list(agent.source.get("tools", []))
        taken = {t.get("name", t.get("toolName")) for t in tools if not is_binding(t)}
        for binding in agent.mcp:
            try:
                server = allowed_server(
                    binding.server, self.platform.mcp_servers, environment.mcp_servers
                )
                async with asyncio.timeout(LIST_SECONDS):
                    listed = await self.mcp.list_tools(server)
            except (NotAuthorized, McpUnavailable, McpRefused, TimeoutError) as exc:
                reason = getattr(exc, "message", None) or str(exc) or "no answer in time"
                log.warning("agent %s: MCP server %r left out of a run: %s",
                            agent.id, binding.server, reason)  # fmt: skip
                continue
            entries, problems = frozen_entries(binding, listed, protected=environment.protected)
            for problem in problems:
                log.warning("agent %s: MCP server %r: %s", agent.id, binding.server, problem)
            for entry in entries:
                name = entry["name"]
                # Only the rules that call this tool are read (and only those parse a template).
                misfits = reply_problems(
                    agent.model, {name: result_schema(entry.get("output_schema"))}
                )
                if name in taken or misfits:
                    # A rule that reads a field the server's schema lacks would reply with
                    # nothing: the rule is told unknown_tool instead, and the log says why.
                    why = "its name is taken" if name in taken else "; ".join(misfits)
                    log.warning("agent %s: MCP server %r: tool %r left out: %s",
                                agent.id, binding.server, name, why)  # fmt: skip
                    continue
                taken.add(name)
                tools.append(entry)
        source["tools"] = tools
        # An MCP server's tool of the same name is the agent file's: it wins.
        admitted = [t for t in admitted if t.name not in taken]
        if admitted:
            assert agent.page_tools is not None
            kept = run_entries(agent.page_tools, admitted, protected=environment.protected)
            source["page_tools"] = {**source["page_tools"], ADMITTED: kept}
        digest = definition_digest(source)
        frozen = self._frozen.get(digest)
        if frozen is None:
            frozen, problems = parse_agent(source, f"agent {agent.id}", self.environ, frozen=True)
            if frozen is None:
                # Every entry was checked above; should the server's list still make the
                # definition unreadable, the run goes on without the servers' tools.
                log.error("agent %s: MCP and page tools left out of a run: %s", agent.id, problems)
                return agent
            self._frozen[digest] = frozen
        return frozen

    def remember(self, run_id: str, agent: Agent) -> None:
        self._by_run[run_id] = agent
        if len(self._by_run) > RUN_CACHE_SIZE:
            self._by_run.popitem(last=False)

    def model(self, agent: Agent) -> Model:
        key = agent.digest
        model = self._models.get(key)
        if model is None:
            names = agent.callable_names()
            environment = agent.environment
            # The live bindings too: a key rebound since the run began is not sent.
            misused = self.platform.secret_problems(agent.source, f"agent {agent.id}")
            try:
                if misused:
                    raise ValueError(misused[0])
                model = build_model(
                    agent.model,
                    environ=self.environ,
                    tools=names,
                    allowed_env=self.platform.allowed_env,
                    # Live: an environment narrowed later applies to this model's next step.
                    allowed_hosts=lambda: self.platform.environment(environment).allowed_hosts,
                )
            except ValueError as exc:
                model = RefusedModel(str(exc))
            self._models[key] = model
        return model
