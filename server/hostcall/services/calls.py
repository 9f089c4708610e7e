"""A call's answers as use cases: the page delivers and answers, the person approves or
rejects, an operator answers, decides or ends a call, an AG-UI client answers with tool
messages. Each method does the ledger's write *and* what it leaves to do: the write returns
what happened (``Settled``, ``Dispatched``: hostcall/calls/outcomes.py) and ``Engine.follow``
acts on it, here and nowhere else, so no route can forget to resume a run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hostcall import strictjson
from hostcall.calls.outcomes import CallExpired, Moved
from hostcall.engine import Engine
from hostcall.errors import Conflict, Gone, NotFound, ToolErrorCode, Unprocessable
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.limits import MAX_REASON_CHARS
from hostcall.protocol.requests import CallResult, Decision
from hostcall.protocol.responses import CallView
from hostcall.protocol.run_input import InputMessage
from hostcall.store.console_records import AuditEntry
from hostcall.store.interfaces import Audit, Calls
from hostcall.store.records import Call
from hostcall.tokens import Claims

# Who the audit log names for what a visitor's call token did (the console's actions name
# their operator; docs/console.md "Audit log").
VISITOR = "visitor"


class _CallStore(Audit, Calls, Protocol):
    """What the call use cases touch: the calls, and the audit of an operator's action."""


class CallService:
    """Answers and decisions, each followed by what its write left to do."""

    def __init__(self, engine: Engine, *, store: _CallStore, clock: Callable[[], float]) -> None:
        self.engine = engine
        self.store = store
        self.answers = engine.ledger.answers
        self.clock = engine.ledger.moves.clock
        # The runtime's clock: an operator's audit entry is dated on it, as the console's are.
        self.audit_clock = clock

    def _visitor_did(
        self, action: str, claims: Claims, call_id: str, **details: object
    ) -> AuditEntry:
        """The audit entry of a visitor's answer or decision, written with its move."""
        return AuditEntry(self.clock(), VISITOR, action, claims.conversation_id, call_id,
                          details=details)  # fmt: skip

    async def view(self, call: Call, *, operator: bool = False) -> CallView:
        """``CallViews.view``: the call as a surface (or the console: ``operator``) shows it."""
        return await self.engine.ledger.views.view(call, operator=operator)

    # ---- the visitor's, with the call's token ---------------------------------------------

    async def _checked(self, call_id: str, claims: Claims) -> Call:
        """``Answers.checked_call``; the run of a call it found expired goes on (the refusal
        too)."""
        try:
            return await self.answers.checked_call(call_id, claims)
        except CallExpired as expired:
            self.engine.resume_expired(expired)
            raise

    async def deliver(self, call_id: str, claims: Claims) -> bool:
        """The page claims the call; True only for the request that made the move."""
        first = await self.answers.deliver_claimed(call_id, claims)
        if first is not None:
            return first
        return await self.answers.deliver(await self._checked(call_id, claims))

    async def answer(self, call_id: str, claims: Claims, result: CallResult) -> Call:
        """The page's result (its output, or the error it reports), audited with the move."""
        try:
            if result.error is None:
                audit = self._visitor_did("call.answer", claims, call_id)
                moved: Moved = await self.answers.answer_claimed(
                    call_id, claims, result.output, audit=audit
                )
            else:
                text = result.error.message or "no message"
                audit = self._visitor_did(
                    "call.answer", claims, call_id, error=result.error.code.value
                )
                call = await self.answers.checked_call(call_id, claims)
                moved = await self.answers.fail(
                    call, result.error.code, f"The page reported: {text}", audit=audit
                )
        except CallExpired as expired:
            self.engine.resume_expired(expired)
            raise
        return await self.engine.follow(moved)

    async def decide(self, call_id: str, claims: Claims, decision: Decision) -> Call:
        """The person's approval (with an edited input, on a surface) or rejection."""
        call = await self._checked(call_id, claims)
        moved: Moved
        if decision.decision == "approve":
            edited = decision.input is not None
            audit = self._visitor_did(
                "call.approve", claims, call.id, edited=edited, scope=decision.scope
            )
            moved = await self.answers.approve(
                call, decision.input, decision.scope, surface=decision.surface_id, audit=audit
            )
        else:
            reason = (decision.reason or "").strip()[:MAX_REASON_CHARS]
            audit = self._visitor_did("call.reject", claims, call.id, reason=reason)
            moved = await self.answers.reject(call, decision.reason, audit=audit)
        return await self.engine.follow(moved)

    # ---- an operator's, from the console ---------------------------------------------------

    async def _open_call(self, call_id: str) -> Call:
        """The call, expiring it first if its deadline passed (as the visitor's path does)."""
        call = await self.store.get_call(call_id)
        if call is None:
            raise NotFound(f"no call {call_id}", code=ErrorCode.UNKNOWN_CALL)
        if call.state.open and call.deadline <= self.clock():
            expired = await self.answers.expire(call)
            if expired is not None:
                self.engine.resume(expired)
            raise Gone(f"call {call_id} passed its deadline and has expired")
        return call

    async def _operator_did(self, operator: str, action: str, call: Call, **details: Any) -> None:
        """The audit entry of an operator's action on a call, written once it is done."""
        entry = AuditEntry(self.audit_clock(), operator, action, call.conversation_id, call.id,
                           details=details)  # fmt: skip
        await self.store.add_audit(entry)

    async def answer_as_operator(self, call_id: str, output: Any, *, operator: str) -> Call:
        call = await self._open_call(call_id)
        call = await self.engine.follow(await self.answers.answer(call, output, by="operator"))
        await self._operator_did(operator, "call.answer", call, output=output)
        return call

    async def decide_as_operator(self, call_id: str, decision: Decision, *, operator: str) -> Call:
        """The visitor's decision body; a token, if sent, is ignored: the operator's session
        is the authority here."""
        call = await self._open_call(call_id)
        moved: Moved
        reason = (decision.reason or "").strip()
        if decision.decision == "approve":
            moved = await self.answers.approve(call, decision.input, decision.scope)
        else:
            # The model reads this: say the decision came from an operator, not the visitor.
            said = f"(an operator decided) {reason}".strip()[:MAX_REASON_CHARS]
            moved = await self.answers.reject(call, said)
        call = await self.engine.follow(moved)
        if decision.decision == "approve":
            await self._operator_did(
                operator, "call.approve", call, edited=decision.input, scope=decision.scope
            )
        else:
            await self._operator_did(operator, "call.reject", call, reason=reason)
        return call

    async def end(self, call_id: str, *, operator: str) -> Call:
        """An operator's "End call": the call fails with ``operator_ended``, and its run goes
        on. The call as it was found."""
        call = await self._open_call(call_id)
        ended = None
        if call.state.open:
            ended = await self.answers.cancel(call, ToolErrorCode.OPERATOR_ENDED)
        if ended is None:
            raise Conflict(
                f"call {call.id} is already {call.state.value}", code=ErrorCode.CALL_ALREADY_SETTLED
            )
        self.engine.resume(ended)
        await self._operator_did(operator, "call.expire", call)
        return call

    # ---- an AG-UI client's -----------------------------------------------------------------

    async def hand_to_client(self, call_id: str, declared: frozenset[str]) -> bool:
        """A client call dispatched to an AG-UI client: delivered if the client runs its tool
        (True: the client has it now). Else it waits, open, for a person to answer it (an
        interrupt, hostcall/interrupts.py), as the widget's form waits."""
        call = await self.store.get_call(call_id)
        if call is None or not call.state.answerable or call.tool_name not in declared:
            return False
        await self.answers.deliver(call)
        return True

    async def answer_from_client(
        self, conversation_id: str, messages: tuple[InputMessage, ...]
    ) -> set[str]:
        """Settle the open calls an AG-UI client answered with tool messages; their ids."""
        results = {m.tool_call_id: m for m in messages if m.role == "tool"}
        answered: set[str] = set()
        for call in await self.store.list_calls(conversation_id):
            message = results.get(call.id)
            tool = await self.engine.ledger.views.tool_of(call)
            if (
                message is None
                or not call.state.answerable
                or tool is None
                or tool.kind != "client"
            ):
                continue
            answered.add(call.id)
            await self.engine.follow(await self._client_answer(call, message))
        return answered

    async def unseen_results(
        self, conversation_id: str, messages: tuple[InputMessage, ...]
    ) -> set[str]:
        """The settled calls of a thread whose result an AG-UI client's history lacks: it
        went away before they settled (an aborted run), and a reload hands them over."""
        seen = {m.tool_call_id for m in messages if m.role == "tool"}
        calls = await self.store.list_calls(conversation_id)
        return {c.id for c in calls if not c.state.open and c.id not in seen}

    async def _client_answer(self, call: Call, message: InputMessage) -> Moved:
        if message.unstorable is not None:
            # Refusing the request would leave the call waiting for a result this client
            # will not send again: it fails, and the model reads why.
            return await self.answers.fail(
                call,
                ToolErrorCode.CLIENT_ERROR,
                f"The client's result holds {message.unstorable}, which cannot be stored; "
                "it was not used.",
            )
        if message.error is not None:
            return await self.answers.fail(
                call, ToolErrorCode.CLIENT_ERROR, f"The client reported: {message.error}"
            )
        try:
            output = strictjson.loads(message.text)
        except strictjson.StrictJSONError:
            output = message.text  # plain text: the output schema decides whether it fits
        try:
            return await self.answers.answer(call, output)
        except Unprocessable as exc:
            problems = "; ".join(
                f"{p.get('path') or '/'}: {p.get('message')}" for p in exc.details.get("errors", [])
            )
            text = f"{exc.message}: {problems}"
            return await self.answers.fail(call, ToolErrorCode.CLIENT_ERROR, text)
