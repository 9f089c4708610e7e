"""MCP App views as use cases: the view a token opens, a view's call of a tool of its own
server, and its update of the model's context (docs/agents.md, "MCP Apps").

A view is a page of an MCP server's, run in the visitor's browser: whatever it asks is asked
by that server, never by the visitor or the model. So a view's ``tools/call`` is refused
unless the tool is one of the run's frozen definition *of the same server* (an app-only tool
among them, which the model never sees), and reads only: a write, or a read the agent file
sends to a person, is refused — a view cannot click the approval card for the visitor —
unless the agent file sets ``"apps": {"allow_writes": true}`` on that server: then it runs
once the visitor confirmed it in the widget's own UI (the widget says so: ``confirmed``). The
call goes through the tool's limits and guardrails, runs on the server's pooled session
within the tool's timeout, and is kept in the ledger as a call of the run, settled, with
``extra.origin = "app"`` and the call whose view made it (no tool message: the model did
not ask for it, and is not told of it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from hostcall.apps.origin import AppsOrigin
from hostcall.blocks import BlockError
from hostcall.blocks.kind import CallContext
from hostcall.blocks.kinds.mcp import McpBlock
from hostcall.calls.transitions import CallEvent
from hostcall.engine import Engine
from hostcall.errors import Conflict, Forbidden, NotFound, ToolErrorCode, Unprocessable
from hostcall.guardrails import evaluate, redact
from hostcall.ledger import new_id, tool_error
from hostcall.page_context import admit
from hostcall.policies import approval_reason
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.responses import AppCallResult, AppContextSaved
from hostcall.store.interfaces import CallApps, Calls, Runs
from hostcall.store.records import Call, CallApp, CallState, Conversation
from hostcall.tools import Tool

log = logging.getLogger("hostcall.apps")
ORIGIN = "app"


class _AppStore(CallApps, Calls, Runs, Protocol):
    """What views read (their call and its view) and write (a view's call, its context)."""


class AppService:
    def __init__(
        self,
        engine: Engine,
        apps: AppsOrigin | None,
        *,
        store: _AppStore,
        clock: Callable[[], float],
    ) -> None:
        self.engine = engine
        self.apps = apps
        self.store = store
        self.clock = clock

    async def view(self, conversation_id: str, call_id: str, resource_uri: str) -> CallApp | None:
        """The view a token opens: the call's, of that conversation, of that resource."""
        app = await self.store.get_call_app(call_id)
        if app is None or app.conversation_id != conversation_id:
            return None
        return app if app.resource_uri == resource_uri else None

    async def _viewed(self, conversation: Conversation, call_id: str) -> tuple[Call, CallApp]:
        call = await self.store.get_call(call_id)
        if call is None or call.conversation_id != conversation.id:
            raise NotFound(f"no call {call_id[:80]!r} in this conversation",
                           code=ErrorCode.UNKNOWN_CALL)  # fmt: skip
        app = await self.store.get_call_app(call_id)
        if self.apps is None or app is None or app.failed is not None:
            raise NotFound(f"call {call_id} has no view", code=ErrorCode.NO_APP)
        return call, app

    async def call_tool(
        self,
        conversation: Conversation,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        confirmed: bool = False,
    ) -> AppCallResult:
        """A view's ``tools/call``: the MCP ``CallToolResult`` of its server's tool."""
        viewed, app = await self._viewed(conversation, call_id)
        agents = self.engine.agents
        agent = await agents.agent_of_run(viewed.run_id)
        tool = _tool_of_server(agent.tools, app.server, name)
        if tool is None:
            raise Forbidden(
                f"{name[:80]!r} is not a tool of the MCP server {app.server!r} that this "
                "agent has; a view may call only its own server's tools",
                code=ErrorCode.APP_TOOL_REFUSED,
                tool=name[:80],
            )
        run = await self.store.get_run(viewed.run_id)
        visitor = run.visitor if run else None
        environment = agents.platform.environment(agent.environment)
        problems = tool.input_validator.problems(arguments)
        if problems:
            raise Unprocessable(
                f"the arguments do not match the input schema of {name!r}",
                code=ErrorCode.INVALID_INPUT,
                errors=[p.to_json() for p in problems],
            )
        hits = evaluate(tool.guardrails, "input", arguments, visitor=visitor)
        blocked = next((h for h in hits if h.action == "block"), None)
        if blocked is not None:
            raise _refused(name, f"the guardrail {blocked.rule!r} blocked it")
        approval = None
        if (
            tool.effect != "read"
            or approval_reason(tool, environment, granted=False, hits=hits) is not None
        ):
            if not (isinstance(tool.block, McpBlock) and tool.block.app_writes):
                raise Forbidden(
                    f"{name!r} is a write, or needs a person's approval: a view may not call "
                    "it (the agent file's 'apps': {'allow_writes': true} lets the visitor)",
                    code=ErrorCode.APP_WRITE_REFUSED,
                    tool=name,
                )
            if not confirmed:
                raise Conflict(
                    f"{name!r} needs the visitor's confirmation: ask them, then send it again "
                    "with 'confirmed': true",
                    code=ErrorCode.APPROVAL_REQUIRED,
                    tool=name,
                )
            approval = {"reason": "app", "decision": "approved", "by": "visitor"}
        if tool.max_calls_per_pass is not None:
            made = await self.store.count_calls(viewed.run_id, tool.name)
            if made >= tool.max_calls_per_pass:
                raise _refused(name, f"it may be called at most {tool.max_calls_per_pass} "
                                     "time(s) per agent pass")  # fmt: skip
        call = await self._record(viewed, tool, arguments, approval)
        context = CallContext(
            arguments=arguments,
            visitor=visitor,
            conversation_id=conversation.id,
            environment=environment,
            platform=agents.platform,
            timeout=tool.deadline_seconds,
            mcp=agents.mcp,
            people=self.engine.server_calls.people,
        )
        assert tool.block is not None
        try:
            output = await tool.block.run(context)
        except BlockError as exc:
            log.warning("a view's call failed: call=%s tool=%s code=%s: %s",
                        call.id, tool.name, exc.code, exc.message)  # fmt: skip
            await self._settle(call, CallEvent.FAIL,
                               tool_error(ToolErrorCode(exc.code), exc.message))  # fmt: skip
            return AppCallResult([{"type": "text", "text": exc.message}], is_error=True)
        out_hits = evaluate(tool.guardrails, "output", output, visitor=visitor)
        if any(h.action == "block" for h in out_hits):
            failure = tool_error(ToolErrorCode.BLOCKED_BY_GUARDRAIL, "blocked by a guardrail")
            await self._settle(call, CallEvent.FAIL, failure)
            raise _refused(name, "a guardrail blocked its result")
        shown = tool.block.shown_output(output, redact(tool.guardrails, out_hits, output))
        await self._settle(call, CallEvent.ANSWER, {"output": output})
        return _call_tool_result(shown)

    async def _record(
        self,
        viewed: Call,
        tool: Tool,
        arguments: dict[str, Any],
        approval: dict[str, Any] | None,
    ) -> Call:
        """The view's call, in the ledger as a call of the viewed call's run and step."""
        from hostcall import strictjson

        call = Call(
            id=new_id("call"),
            conversation_id=viewed.conversation_id,
            run_id=viewed.run_id,
            step=viewed.step,
            tool_name=tool.name,
            state=CallState.DISPATCHED,
            input=arguments,
            arguments=strictjson.dumps(arguments),
            # Past the block's own timeout: the sweeper expires only a call whose process
            # died under it.
            deadline=self.clock() + tool.deadline_seconds + 60,
            route="server",
            extra={
                "origin": ORIGIN,
                "viewCall": viewed.id,
                **({"approval": approval} if approval else {}),
            },
        )
        await self.store.add_call(call)
        return call

    async def _settle(self, call: Call, event: CallEvent, outcome: dict[str, Any]) -> None:
        # The state alone: no tool message for the model, no TOOL_CALL_RESULT to streams.
        await self.engine.ledger.moves.settle_row(call.id, event, outcome)

    async def set_context(
        self, conversation: Conversation, call_id: str, value: dict[str, Any]
    ) -> AppContextSaved:
        """A view's ``ui/update-model-context``: the page-context entry ``app:<server>``
        (under the agent's caps, as ``Hostcall('context')``), kept with the call as the
        view's saved state; the model reads it with the visitor's next message."""
        viewed, app = await self._viewed(conversation, call_id)
        agent = await self.engine.agents.agent_of_run(viewed.run_id)
        key = context_key(app.server)
        admit(agent.page_context, {key: value}, keys=False)
        if not await self.store.set_app_context(call_id, value):
            raise NotFound(f"call {call_id} has no view", code=ErrorCode.NO_APP)
        return AppContextSaved(key)


def context_key(server: str) -> str:
    """A view's page-context key: a page's own keys cannot hold ``:``, so never collide."""
    return f"{ORIGIN}:{server}"


def _tool_of_server(tools: tuple[Tool, ...] | list[Tool], server: str, name: str) -> Tool | None:
    for tool in tools:
        block = tool.block
        if isinstance(block, McpBlock) and block.server == server and block.tool == name:
            return tool
    return None


def _refused(name: str, why: str) -> Forbidden:
    return Forbidden(f"{name!r} was not called: {why}", code=ErrorCode.APP_TOOL_REFUSED, tool=name)


def _call_tool_result(output: Any) -> AppCallResult:
    """The MCP ``CallToolResult`` of a block's output (blocks/mcp/results.py's shape)."""
    if not isinstance(output, dict):
        return AppCallResult([], structured_content=output)
    content = output.get("content", [])
    return AppCallResult(
        content if isinstance(content, list) else [],
        structured_content=output.get("structuredContent"),
    )
