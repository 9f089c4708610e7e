"""Server-side tools: a call dispatched to its tool's block (hostcall/blocks/kind.py: an HTTP
request, an MCP server's tool, the built-in person tool, an installed node, or any kind the
registry holds) runs here, once the dispatch (and the call's lease, taken with it) has
committed; its result or failure settles the call like any other, and comes back as the
``Settled`` the engine resumes the run with.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from hostcall.apps.resources import AppResource, ReadView, app_resource, read_view
from hostcall.blocks import BlockError, BlockFailed, NotAuthorized
from hostcall.blocks.kind import Block, CallContext
from hostcall.blocks.mcp.calling import allowed_server
from hostcall.calls.outcomes import Settled
from hostcall.errors import ToolErrorCode
from hostcall.handoff import HumanHandoff
from hostcall.ledger import Ledger
from hostcall.protocol.apps import AppFailure
from hostcall.runs.agents import RunAgents
from hostcall.store.interfaces import CallApps, Calls, Runs
from hostcall.store.records import Call, CallApp

log = logging.getLogger("hostcall.engine")


class _ServerCallStore(Calls, Runs, CallApps, Protocol):
    """What running a call on the server reads: the call and its run; and writes: the
    view of an MCP tool that declares one."""


class ServerCalls:
    def __init__(
        self,
        ledger: Ledger,
        agents: RunAgents,
        *,
        store: _ServerCallStore,
        people: HumanHandoff,
        views: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.agents = agents
        # The built-in person tool's way to queue a conversation for the team.
        self.people = people
        # An apps origin is set: an MCP tool's view is read after its call (hostcall/apps/).
        self.views = views
        self.clock = clock

    async def request(self, call_id: str) -> Settled | None:
        """Run the call's block and settle the call with what it said; None if the call
        was no longer open (expired, or settled by an operator, meanwhile)."""
        call = await self.store.get_call(call_id)
        if call is None or not call.state.answerable:
            return None
        tool = await self.ledger.views.known_tool(call)
        assert tool.block is not None, f"{tool.name} is not a server-side tool"
        agent = await self.agents.agent_of_run(call.run_id)
        run = await self.store.get_run(call.run_id)
        platform = self.agents.platform  # live: a narrowed environment applies at once
        context = CallContext(
            arguments=call.input,
            # The visitor the run acts for fills the $user values, never the model.
            visitor=run.visitor if run else None,
            conversation_id=call.conversation_id,
            environment=platform.environment(agent.environment),
            platform=platform,
            timeout=tool.deadline_seconds,
            mcp=self.agents.mcp,
            people=self.people,
        )
        try:
            output = await _within_deadline(tool.block, context)
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
            return None  # expired (or settled by an operator) while the block ran
        if self.views and (resource := app_resource(tool)) is not None:
            # Before the call settles: its TOOL_CALL_RESULT says whether there is a view.
            await self._read_view(current, resource, context)
        try:
            return await self.ledger.answers.answer(current, output)
        except Exception as exc:  # e.g. the body does not match the tool's output schema
            return await self._settle_quietly(current, ToolErrorCode.BLOCK_FAILED, str(exc))

    async def _read_view(self, call: Call, resource: AppResource, context: CallContext) -> None:
        """The call's view, read from the same server and kept with the call, or why not;
        the model's result is the same either way."""
        try:
            server = allowed_server(
                resource.server, context.platform.mcp_servers, context.environment.mcp_servers
            )
        except NotAuthorized:  # the environment narrowed since the call ran: no view
            read = ReadView(failed=AppFailure.UNREACHABLE)
        else:
            read = await read_view(context.mcp, server, resource.resource_uri)
        if read.failed is not None:
            log.warning("an MCP App view was not read: call=%s resource=%s: %s",
                        call.id, resource.resource_uri, read.failed.value)  # fmt: skip
        await self.store.add_call_app(CallApp(
            call_id=call.id, conversation_id=call.conversation_id, server=resource.server,
            resource_uri=resource.resource_uri, html=read.html, meta=read.meta,
            failed=read.failed.value if read.failed is not None else None,
            created_at=self.clock(),
        ))  # fmt: skip

    async def _settle_quietly(
        self, call: Call, code: ToolErrorCode, message: str, **details: Any
    ) -> Settled | None:
        current = await self.store.get_call(call.id)
        if current is not None and current.state.answerable:
            return await self.ledger.answers.fail(current, code, message, **details)
        return None


async def _within_deadline(block: Block, context: CallContext) -> Any:
    """The block's result within the tool's execution timeout, for every kind: a block that
    does not keep to ``context.timeout`` itself is cut there, never left running."""
    try:
        async with asyncio.timeout(context.timeout):
            return await block.run(context)
    except TimeoutError:
        reason = f"timeout after {context.timeout:g} s"
        raise BlockFailed(reason, subject=block.subject) from None
