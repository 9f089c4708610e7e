"""Server-side tools: a call dispatched to its HTTP block runs here, under its own lease,
once the dispatch has committed; its result or failure settles the call like any other.
"""

from __future__ import annotations

import logging
from typing import Any

from hostcall.blocks.http_request import BlockError, BlockFailed, execute, render_request
from hostcall.errors import ToolErrorCode
from hostcall.journal import Unit
from hostcall.leases import call_key
from hostcall.runs.base import EngineBase
from hostcall.store.records import Call

log = logging.getLogger("hostcall.engine")


class ServerCalls(EngineBase):
    # ---- server-side tools ---------------------------------------------------------------

    async def _start_server_call(self, unit: Unit, call: Call) -> None:
        # Called inside the dispatching transaction: the lease commits with the dispatch,
        # and the request starts once both are committed (it reads the dispatched call).
        taken = await self.leases.take(call_key(call.id))
        assert taken, "a newly dispatched call's lease is free"
        unit.afterwards.append(lambda: self._spawn(self._run_server_call(call.id)))

    async def _run_server_call(self, call_id: str) -> None:
        try:
            await self._request(call_id)
        finally:
            await self.leases.release(call_key(call_id))

    async def _request(self, call_id: str) -> None:
        call = await self.store.get_call(call_id)
        if call is None or not call.state.answerable:
            return
        tool = await self.ledger.tool_of(call)
        assert tool is not None and tool.http is not None
        agent = await self.agent_of_run(call.run_id)
        environment = self.platform.environment(agent.environment)
        connection = self.platform.connections.get(tool.http.connection or "", {})
        try:
            request = render_request(tool.http.spec, call.input)
            result = await execute(
                request,
                allowed_hosts=environment.allowed_hosts,
                extra_headers=connection,
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
            await self._settle_quietly(call, ToolErrorCode(exc.code), exc.message, **details)
            return
        current = await self.store.get_call(call_id)
        if current is None or not current.state.answerable:
            return  # expired (or settled by an operator) while the request ran
        try:
            await self.ledger.answer(current, result.to_output())
        except Exception as exc:  # e.g. the body does not match the tool's output schema
            await self._settle_quietly(current, ToolErrorCode.BLOCK_FAILED, str(exc))

    async def _settle_quietly(
        self, call: Call, code: ToolErrorCode, message: str, **details: Any
    ) -> None:
        current = await self.store.get_call(call.id)
        if current is not None and current.state.answerable:
            await self.ledger.fail(current, code, message, **details)
