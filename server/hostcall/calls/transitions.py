"""A tool call's state machine as one table: (state, event) -> (next state, effects).

    proposed ─┬─> awaiting_confirmation ─┬─> dispatched ─> delivered ─┬─> answered
              │                          ├─> rejected     ↑    │      ├─> failed
              │                          └─> expired      └────┘      └─> expired
              ├─> dispatched ...                  (rerun: a read goes back to dispatched)
              ├─> answered (simulated run)
              └─> failed (unknown tool, invalid arguments, call limit, guardrail)
        any open state ─> failed (cancel: its run stopped or cancelled, or an operator ended it)

``transition`` is pure: it says where a call goes and what must happen as a result
(``Effect``); the ledger (hostcall/ledger.py) performs the effects, and the store makes each
move atomically from the states this table allows (``sources``). Adding a state or an event
is a change here and in the tests that walk every pair (tests/unit/test_transitions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CallState(StrEnum):
    """A tool call's life (docs/protocol.md). Terminal states never change again."""

    PROPOSED = "proposed"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    DISPATCHED = "dispatched"
    DELIVERED = "delivered"
    ANSWERED = "answered"
    REJECTED = "rejected"
    FAILED = "failed"
    EXPIRED = "expired"

    @property
    def open(self) -> bool:
        return self in OPEN_STATES

    @property
    def answerable(self) -> bool:
        return self in ANSWERABLE_STATES

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


class CallEvent(StrEnum):
    """What can happen to a call."""

    REFUSE = "refuse"  # the proposal is invalid (unknown tool, arguments, limit, guardrail)
    SIMULATE = "simulate"  # a simulated run answers with the tool's simulation result
    ASK = "ask"  # a person must approve first
    DISPATCH = "dispatch"  # no approval needed: send it to a surface (or run the block)
    APPROVE = "approve"
    REJECT = "reject"
    DELIVER = "deliver"  # written to the assigned surface's stream: the claim
    REASSIGN = "reassign"  # never delivered, its surface went away: another surface
    RERUN = "rerun"  # delivered, its surface went away, and the tool may run again (reads)
    TO_FORM = "to_form"  # no surface can run it: any surface's person answers with the form
    ANSWER = "answer"
    FAIL = "fail"
    EXPIRE = "expire"
    CANCEL = "cancel"  # its run was stopped (the visitor) or cancelled, or an operator ended it


class Effect(StrEnum):
    """What the ledger must do once the store made the move."""

    EMIT_APPROVAL_REQUESTED = "emit_approval_requested"
    EMIT_DISPATCH = "emit_dispatch"  # the call, with its assignment, to every stream
    EXECUTE = "execute"  # a server-side tool: start its block
    RECORD_OUTCOME = "record_outcome"  # the tool message the model reads + TOOL_CALL_RESULT
    RESUME_RUN = "resume_run"  # the run may continue once its step has no open call


@dataclass(frozen=True, slots=True)
class Move:
    to: CallState
    effects: tuple[Effect, ...] = ()


class ForbiddenTransition(Exception):
    """The table has no move for this pair: a programming error or a stale request."""

    def __init__(self, state: CallState, event: CallEvent) -> None:
        super().__init__(f"a call that is {state.value} cannot {event.value}")
        self.state = state
        self.event = event


S, E, F = CallState, CallEvent, Effect
_SETTLE = (F.RECORD_OUTCOME, F.RESUME_RUN)
# Settled while proposing: the step that proposed it goes on by itself, nothing to resume.
_IN_STEP = (F.RECORD_OUTCOME,)
_SEND = (F.EMIT_DISPATCH, F.EXECUTE)

TABLE: dict[tuple[CallState, CallEvent], Move] = {
    (S.PROPOSED, E.REFUSE): Move(S.FAILED, _IN_STEP),
    (S.PROPOSED, E.SIMULATE): Move(S.ANSWERED, _IN_STEP),
    (S.PROPOSED, E.ASK): Move(S.AWAITING_CONFIRMATION, (F.EMIT_APPROVAL_REQUESTED,)),
    (S.PROPOSED, E.DISPATCH): Move(S.DISPATCHED, _SEND),
    (S.PROPOSED, E.EXPIRE): Move(S.EXPIRED, _SETTLE),
    (S.PROPOSED, E.CANCEL): Move(S.FAILED, _SETTLE),
    (S.AWAITING_CONFIRMATION, E.APPROVE): Move(S.DISPATCHED, _SEND),
    (S.AWAITING_CONFIRMATION, E.REJECT): Move(S.REJECTED, _SETTLE),
    (S.AWAITING_CONFIRMATION, E.EXPIRE): Move(S.EXPIRED, _SETTLE),
    (S.AWAITING_CONFIRMATION, E.CANCEL): Move(S.FAILED, _SETTLE),
    (S.DISPATCHED, E.DELIVER): Move(S.DELIVERED),
    (S.DISPATCHED, E.REASSIGN): Move(S.DISPATCHED, (F.EMIT_DISPATCH,)),
    (S.DISPATCHED, E.TO_FORM): Move(S.DISPATCHED, (F.EMIT_DISPATCH,)),
    (S.DISPATCHED, E.ANSWER): Move(S.ANSWERED, _SETTLE),
    (S.DISPATCHED, E.FAIL): Move(S.FAILED, _SETTLE),
    (S.DISPATCHED, E.EXPIRE): Move(S.EXPIRED, _SETTLE),
    (S.DISPATCHED, E.CANCEL): Move(S.FAILED, _SETTLE),
    # Do not add (DELIVERED, REASSIGN): a delivered write may have run; only RERUN (reads
    # and idempotent tools, checked by the ledger) or TO_FORM may take it from its surface.
    (S.DELIVERED, E.RERUN): Move(S.DISPATCHED, (F.EMIT_DISPATCH,)),
    (S.DELIVERED, E.TO_FORM): Move(S.DELIVERED, (F.EMIT_DISPATCH,)),
    (S.DELIVERED, E.ANSWER): Move(S.ANSWERED, _SETTLE),
    (S.DELIVERED, E.FAIL): Move(S.FAILED, _SETTLE),
    (S.DELIVERED, E.EXPIRE): Move(S.EXPIRED, _SETTLE),
    (S.DELIVERED, E.CANCEL): Move(S.FAILED, _SETTLE),
}


def transition(state: CallState, event: CallEvent) -> Move:
    """The move for ``event`` in ``state``; ``ForbiddenTransition`` if there is none."""
    move = TABLE.get((state, event))
    if move is None:
        raise ForbiddenTransition(state, event)
    return move


_SOURCES = {event: frozenset(state for state, ev in TABLE if ev is event) for event in CallEvent}


def sources(event: CallEvent) -> frozenset[CallState]:
    """The states ``event`` may leave: what the store's conditional update checks."""
    return _SOURCES[event]


TERMINAL_STATES = frozenset(s for s in CallState if not any(st is s for st, _ in TABLE))
OPEN_STATES = frozenset(CallState) - TERMINAL_STATES
ANSWERABLE_STATES = sources(CallEvent.ANSWER)
