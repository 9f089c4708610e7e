"""Server-side tools: a call dispatched to its block (an HTTP request, an MCP server's tool,
or the built-in ``person`` tool, which queues the conversation for a person of the team, or
an installed node) runs here, once the dispatch (and the call's lease, taken with it) has
committed; its result or failure settles the call like any other, and comes back as the
``Settled`` the engine resumes the run with.
"""

from __future__ import annotations

import logging
from typing import Any

from hostcall.blocks import user_values
from hostcall.blocks.http_request import (
    BlockError,
    BlockFailed,
    execute,
    render_request,
    user_keys,
)
from hostcall.blocks.installed import config_user_keys, run_block
from hostcall.blocks.mcp.calling import allowed_server, call_mcp_tool
from hostcall.calls.outcomes import Settled
from hostcall.errors import ToolErrorCode
from hostcall.handoff import HumanHandoff
from hostcall.ledger import Ledger
from hostcall.runs.agents import RunAgents
from hostcall.store.records import Call
from hostcall.tools import Tool

log = logging.getLogger("hostcall.engine")


class ServerCalls:
    def __init__(self, ledger: Ledger, agents: RunAgents) -> None:
        self.ledger = ledger
        self.store = ledger.moves.store
        self.agents = agents

    async def request(self, call_id: str) -> Settled | None:
        """Run the call's block and settle the call with what it said; None if the call
        was no longer open (expired, or settled by an operator, meanwhile)."""
        call = await self.store.get_call(call_id)
        if call is None or not call.state.answerable:
            return None
        tool = await self.ledger.views.known_tool(call)
        if tool.kind == "person":
            queued = await HumanHandoff(
                self.ledger.moves.journal, clock=self.ledger.moves.clock
            ).ask_for_person(call.conversation_id)
            current = await self.store.get_call(call_id)
            if current is None or not current.state.answerable:
                return None
            return await self.ledger.answers.answer(current, {"queued": queued})
        agent = await self.agents.agent_of_run(call.run_id)
        run = await self.store.get_run(call.run_id)
        try:
            output = await self._run_block(
                tool, agent.environment, call.input, run.user if run else None
            )
        except BlockError as exc:
            # The model gets the message; the visitor's card shows only a translated sentence
            # for the code, so the operator's log is where the detail is read.
            log.warning(
                "server-side tool failed: agent=%s tool=%s call=%s code=%s: %s",
                agent.id, tool.name, call.id, exc.code, exc.message,
            )  # fmt: skip
            status = exc.status if isinstance(exc, BlockFailed) else None
            details = {"status": status} if status else {}
            return await self._settle_quietly(call, ToolErrorCode(exc.code), exc.message, **details)
        current = await self.store.get_call(call_id)
        if current is None or not current.state.answerable:
            return None  # expired (or settled by an operator) while the request ran
        try:
            return await self.ledger.answers.answer(current, output)
        except Exception as exc:  # e.g. the body does not match the tool's output schema
            return await self._settle_quietly(current, ToolErrorCode.BLOCK_FAILED, str(exc))

    async def _run_block(
        self, tool: Tool, environment_name: str, arguments: Any, user: dict[str, Any] | None
    ) -> Any:
        """What the tool's block answered; ``BlockError`` for what the model is told."""
        platform = self.agents.platform  # live: a narrowed environment applies at once
        environment = platform.environment(environment_name)
        # The person the run acts for fills the $user values; the model's arguments never
        # hold those keys (nor could they: see blocks/__init__.py).
        values = dict(arguments) if isinstance(arguments, dict) else {}
        values = {k: v for k, v in values.items() if not k.startswith("$")}
        if tool.node is not None:
            values |= user_values(user, config_user_keys(tool.node.config))
            return await run_block(
                tool.node.block, tool.node.config, values,
                allowed_hosts=environment.allowed_hosts, timeout=tool.deadline_seconds,
            )  # fmt: skip
        if tool.mcp is not None:
            server = allowed_server(tool.mcp.server, platform.mcp_servers, environment.mcp_servers)
            return await call_mcp_tool(
                self.agents.mcp, server, tool.mcp, arguments, timeout=tool.deadline_seconds
            )
        assert tool.http is not None
        connection = platform.connections.get(tool.http.connection or "")
        values |= user_values(user, user_keys(tool.http.spec))
        result = await execute(
            render_request(tool.http.spec, values),
            allowed_hosts=environment.allowed_hosts,
            extra_headers=connection.headers if connection else {},
            credential_hosts=connection.hosts if connection else (),
            timeout=tool.deadline_seconds,
            max_response_bytes=int(tool.http.max_response_kb * 1024),
        )
        return result.to_output()

    async def _settle_quietly(
        self, call: Call, code: ToolErrorCode, message: str, **details: Any
    ) -> Settled | None:
        current = await self.store.get_call(call.id)
        if current is not None and current.state.answerable:
            return await self.ledger.answers.fail(current, code, message, **details)
        return None
