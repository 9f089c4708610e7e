"""AG-UI's interrupts over Hostcall's ledger (ag-ui docs/concepts/interrupts.mdx).

An AG-UI run that reaches a call waiting for a person ends with ``RUN_FINISHED {outcome:
{type: "interrupt", interrupts}}``; the client's next ``RunAgentInput`` answers them in
``resume``. Nothing here is stored: an interrupt is a view of an open call, its id derived
from the call and the step the person takes, so it survives a restart, any number of
processes, and a client that reloads:

    approve:<callId>   the call awaits a decision   reason tool_call
                       payload {approved, editedArgs?, reason?, scope?}
    answer:<callId>    a client-side call that no client in the thread runs waits for its
                       output (the widget shows the tool's form)   reason input_required
                       payload: the output, as the tool's output schema says

A resume goes through the same ledger moves as the widget's answers (hostcall/calls/answers.py):
the first answer wins, a second is refused with the code the widget's API gives, a call past
its deadline is expired and refused (``call_expired``), and ``cancelled`` is a rejection (or,
for a form, a ``no_handler`` failure) that the model reads. Every entry is checked before any
is applied, so a bad one leaves every call as it was.

The id's step keeps a stale resume from landing on the wrong step: once an approval moved the
call to its form, ``approve:<id>`` is refused as a second decision, never read as the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hostcall.calls.outcomes import Moved
from hostcall.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ToolErrorCode,
    Unprocessable,
)
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.events import Interrupt
from hostcall.protocol.limits import MAX_REASON_CHARS
from hostcall.protocol.run_input import ResumeEntry, ResumeStatus
from hostcall.services import CallService
from hostcall.store.records import Call, CallState
from hostcall.tokens import Claims, Purpose, input_digest
from hostcall.tools import Tool

APPROVE = "approve"
ANSWER = "answer"
# Our key in an AG-UI ``metadata`` object (AG-UI reserves ``ag-ui``; others are open).
METADATA_KEY = "hostcall"

FORM_CANCELLED = "The user dismissed the form without answering; the tool did not run."


@dataclass(frozen=True, slots=True)
class _Planned:
    """A checked resume entry: the call, the step, and what to do."""

    call: Call
    tool: Tool
    step: str
    entry: ResumeEntry


class Interrupts:
    """The interrupts of a thread, and the resumes that answer them."""

    def __init__(self, calls: CallService) -> None:
        self.calls = calls
        self.views = calls.engine.ledger.views
        self.tokens = self.views.tokens

    async def pending(self, conversation_id: str, declared: frozenset[str]) -> list[Interrupt]:
        """Every open call of the thread that waits for a person, in the order proposed.
        ``declared``: the tools this client runs (their calls are the client's, not a
        person's)."""
        found = []
        for call in await self.calls.store.list_calls(conversation_id):
            if not call.state.open:
                continue  # settled: never offered again
            tool = await self.views.tool_of(call)
            if tool is None:
                continue
            if call.state is CallState.AWAITING_CONFIRMATION:
                found.append(self._approval(call, tool))
            elif _form_waits(call, tool, declared):
                found.append(self._form(call, tool))
        return found

    async def waiting(self, conversation_id: str, declared: frozenset[str]) -> list[Interrupt]:
        """``pending``, when the thread can go no further without them: every open call
        waits for a person or for the client (none runs on the server); else none."""
        calls = [c for c in await self.calls.store.list_calls(conversation_id) if c.state.open]
        for call in calls:
            tool = await self.views.tool_of(call)
            outside = call.state is CallState.AWAITING_CONFIRMATION or (
                tool is not None and tool.kind == "client" and call.state.answerable
            )
            if not outside:
                return []
        return await self.pending(conversation_id, declared) if calls else []

    def _claims(self, call: Call) -> Claims:
        return Claims(call.conversation_id, call.id, call.tool_name, input_digest(call.input),
                      run_id=call.run_id)  # fmt: skip

    def _approval(self, call: Call, tool: Tool) -> Interrupt:
        approval = call.extra.get("approval", {})
        scopes = list(approval.get("scopes", ["once"]))
        token = self.tokens.sign(Purpose.CALL_DECISION, self._claims(call))
        return Interrupt(
            id=f"{APPROVE}:{call.id}",
            reason="tool_call",
            message=f"Allow {tool.title or tool.name} with this input?",
            tool_call_id=call.id,
            response_schema=approval_schema(tool, scopes),
            expires_at=_iso(call.deadline),
            metadata={METADATA_KEY: {"toolName": call.tool_name, "input": call.input,
                                     "approvalReason": approval.get("reason"),
                                     "decisionToken": token}},
        )  # fmt: skip

    def _form(self, call: Call, tool: Tool) -> Interrupt:
        token = self.tokens.sign(Purpose.CALL_RESULT, self._claims(call))
        return Interrupt(
            id=f"{ANSWER}:{call.id}",
            reason="input_required",
            message=f"Give the result of {tool.title or tool.name} for this input.",
            tool_call_id=call.id,
            response_schema=tool.output_schema,
            expires_at=_iso(call.deadline),
            metadata={METADATA_KEY: {"toolName": call.tool_name, "input": call.input,
                                     "formReason": call.extra.get("formReason"),
                                     "resultToken": token}},
        )  # fmt: skip

    # ---- resume ----------------------------------------------------------------------------

    async def resume(
        self, conversation_id: str, entries: tuple[ResumeEntry, ...], declared: frozenset[str]
    ) -> None:
        """Check every entry, then apply each through the ledger. Raises the first refusal
        (a ``HostcallError`` whose code the ``RUN_ERROR`` carries)."""
        planned = [await self._check(conversation_id, e, declared) for e in entries]
        for plan in planned:
            await self.calls.engine.follow(await self._apply(plan))

    async def _check(
        self, conversation_id: str, entry: ResumeEntry, declared: frozenset[str]
    ) -> _Planned:
        step, _, call_id = entry.interrupt_id.partition(":")
        call = await self.calls.store.get_call(call_id) if step in (APPROVE, ANSWER) else None
        if call is None or call.conversation_id != conversation_id:
            raise NotFound(
                f"no interrupt {entry.interrupt_id!r} in this thread",
                code=ErrorCode.UNKNOWN_INTERRUPT,
                field=f"{entry.where}.interruptId",
            )
        tool = await self.views.known_tool(call)
        if call.state.open and call.deadline <= self.calls.clock():
            expired = await self.calls.answers.expire(call)
            if expired is not None:
                self.calls.engine.resume(expired)
            raise Gone(f"interrupt {entry.interrupt_id} passed its expiresAt; the call expired")
        if step == APPROVE and call.state is not CallState.AWAITING_CONFIRMATION:
            raise await self.calls.answers.moves.not_open(call.id, deciding=True)
        if step == ANSWER and not _form_waits(call, tool, declared):
            if call.state.answerable:
                raise Conflict(
                    f"call {call.id} is the client's to run, not a person's",
                    code=ErrorCode.CALL_NOT_DISPATCHED,
                    state=call.state.value,
                )
            raise await self.calls.answers.moves.not_open(call.id)
        self._check_token(call, entry, step)
        if entry.status is ResumeStatus.RESOLVED:
            _check_payload(tool, step, call, entry)
        return _Planned(call, tool, step, entry)

    def _check_token(self, call: Call, entry: ResumeEntry, step: str) -> None:
        """A token in the entry's metadata (the interrupt's own, echoed) must be the call's:
        it was signed over the input the person saw."""
        ours = (entry.metadata or {}).get(METADATA_KEY)
        if not isinstance(ours, dict):
            return
        name, purpose = (
            ("decisionToken", Purpose.CALL_DECISION)
            if step == APPROVE
            else ("resultToken", Purpose.CALL_RESULT)
        )
        if name not in ours:
            return
        token = ours[name]
        if not isinstance(token, str):
            field = f"{entry.where}.metadata.{METADATA_KEY}.{name}"
            raise BadRequest(f"{field} must be a string", field=field)
        claims = self.tokens.verify(purpose, token)
        if claims.call_id != call.id or claims.conversation_id != call.conversation_id:
            raise Forbidden(f"this token was issued for another call, not {call.id}")
        if claims.digest != input_digest(call.input):
            raise Conflict(
                f"the input of call {call.id} changed since this token was issued",
                code=ErrorCode.INPUT_CHANGED,
            )

    async def _apply(self, plan: _Planned) -> Moved:
        answers = self.calls.answers
        call, entry = plan.call, plan.entry
        if plan.step == ANSWER:
            if entry.status is ResumeStatus.CANCELLED:
                return await answers.fail(call, ToolErrorCode.NO_HANDLER, FORM_CANCELLED)
            return await answers.answer(call, entry.payload)
        payload: dict[str, Any] = entry.payload if entry.status is ResumeStatus.RESOLVED else {}
        if payload.get("approved"):
            edited = payload.get("editedArgs")
            return await answers.approve(call, edited, str(payload.get("scope", "once")))
        reason = payload.get("reason")
        return await answers.reject(call, reason if isinstance(reason, str) else None)


def approval_schema(tool: Tool, scopes: list[str]) -> dict[str, Any]:
    """What an approval's resume payload holds: AG-UI's approve-with-edits pattern
    (``editedArgs`` replaces the input whole), and ours: a reason for a rejection, the
    scope of an approval."""
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": {**tool.input_schema,
                           "description": "Full replacement of the tool's input. Not merged."},
            "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
            "scope": {"enum": scopes},
        },
        "required": ["approved"],
        "additionalProperties": False,
    }  # fmt: skip


def _check_payload(tool: Tool, step: str, call: Call, entry: ResumeEntry) -> None:
    where = f"{entry.where}.payload"
    if step == ANSWER:
        problems = tool.output_validator.problems(entry.payload)
        if problems:
            raise Unprocessable(
                f"{where} does not match the interrupt's responseSchema (the output schema "
                f"of {call.tool_name!r})",
                code=ErrorCode.INVALID_RESULT,
                errors=[p.to_json() for p in problems],
            )
        return
    payload = entry.payload
    scopes = call.extra.get("approval", {}).get("scopes", ["once"])
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise BadRequest(f"{where} must be an object with a boolean 'approved'", field=where)
    extra = set(payload) - {"approved", "editedArgs", "reason", "scope"}
    if extra:
        raise BadRequest(f"{where} has unknown fields: {', '.join(sorted(extra))}", field=where)
    if "scope" in payload and payload["scope"] not in scopes:
        raise BadRequest(f"{where}.scope must be one of {', '.join(scopes)}", field=where)
    reason = payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise BadRequest(f"{where}.reason must be a string", field=where)
    if "editedArgs" in payload:
        problems = tool.input_validator.problems(payload["editedArgs"])
        if problems:
            raise Unprocessable(
                f"{where}.editedArgs does not match the input schema of {call.tool_name!r}",
                code=ErrorCode.INVALID_INPUT,
                errors=[p.to_json() for p in problems],
            )


def _form_waits(call: Call, tool: Tool, declared: frozenset[str]) -> bool:
    """A client-side call no client of the thread runs: a person answers it."""
    return (
        tool.kind == "client"
        and call.state.answerable
        and not call.delivered
        and call.tool_name not in declared
    )


def _iso(timestamp: float) -> str:
    """The deadline in whole seconds, rounded up: a client that waits until ``expiresAt``
    has passed finds the call expired (rounded down, it could be a fraction early)."""
    moment = datetime.fromtimestamp(math.ceil(timestamp), UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
