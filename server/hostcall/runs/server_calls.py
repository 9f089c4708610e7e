"""Server-side tools: a call dispatched to its HTTP block runs here, once the dispatch (and
the call's lease, taken with it) has committed; its result or failure settles the call like
any other, and comes back as the ``Settled`` the engine resumes the run with.
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
from hostcall.calls.outcomes import Settled
from hostcall.errors import ToolErrorCode
from hostcall.ledger import Ledger
from hostcall.runs.agents import RunAgents
from hostcall.store.records import Call

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
        tool = await self.ledger.views.tool_of(call)
        assert tool is not None and tool.http is not None
        agent = await self.agents.agent_of_run(call.run_id)
        platform = self.agents.platform
        environment = platform.environment(agent.environment)
        connection = platform.connections.get(tool.http.connection or "")
        run = await self.store.get_run(call.run_id)
        try:
            # The person the run acts for fills the spec's $user values; the model's
            # arguments never hold those keys (nor could they: see blocks/__init__.py).
            values = dict(call.input) if isinstance(call.input, dict) else {}
            values = {k: v for k, v in values.items() if not k.startswith("$")}
            values |= user_values(run.user if run else None, user_keys(tool.http.spec))
            request = render_request(tool.http.spec, values)
            result = await execute(
                request,
                allowed_hosts=environment.allowed_hosts,
                extra_headers=connection.headers if connection else {},
                credential_hosts=connection.hosts if connection else (),
                timeout=tool.deadline_seconds,
                max_response_bytes=int(tool.http.max_response_kb * 1024),
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
            return await self.ledger.answers.answer(current, result.to_output())
        except Exception as exc:  # e.g. the body does not match the tool's output schema
            return await self._settle_quietly(current, ToolErrorCode.BLOCK_FAILED, str(exc))

    async def _settle_quietly(
        self, call: Call, code: ToolErrorCode, message: str, **details: Any
    ) -> Settled | None:
        current = await self.store.get_call(call.id)
        if current is not None and current.state.answerable:
            return await self.ledger.answers.fail(current, code, message, **details)
        return None
