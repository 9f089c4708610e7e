"""The ledger's transition table (hostcall/calls/transitions.py): every (state, event) pair.

The expected moves are written out here by hand, apart from the table, so a change to the
table is a change to this list too; every pair not listed must be refused.
"""

from __future__ import annotations

import itertools

import pytest

from hostcall.calls.transitions import (
    ANSWERABLE_STATES,
    OPEN_STATES,
    TABLE,
    TERMINAL_STATES,
    CallEvent,
    CallState,
    Effect,
    ForbiddenTransition,
    sources,
    transition,
)

S, E, F = CallState, CallEvent, Effect
SETTLE = {F.RECORD_OUTCOME, F.RESUME_RUN}

EXPECTED: dict[tuple[CallState, CallEvent], tuple[CallState, set[Effect]]] = {
    (S.PROPOSED, E.REFUSE): (S.FAILED, {F.RECORD_OUTCOME}),
    (S.PROPOSED, E.SIMULATE): (S.ANSWERED, {F.RECORD_OUTCOME}),
    (S.PROPOSED, E.ASK): (S.AWAITING_CONFIRMATION, {F.EMIT_APPROVAL_REQUESTED}),
    (S.PROPOSED, E.DISPATCH): (S.DISPATCHED, {F.EMIT_DISPATCH, F.EXECUTE}),
    (S.PROPOSED, E.EXPIRE): (S.EXPIRED, SETTLE),
    (S.PROPOSED, E.CANCEL): (S.FAILED, SETTLE),
    (S.AWAITING_CONFIRMATION, E.APPROVE): (S.DISPATCHED, {F.EMIT_DISPATCH, F.EXECUTE}),
    (S.AWAITING_CONFIRMATION, E.REJECT): (S.REJECTED, SETTLE),
    (S.AWAITING_CONFIRMATION, E.EXPIRE): (S.EXPIRED, SETTLE),
    (S.AWAITING_CONFIRMATION, E.CANCEL): (S.FAILED, SETTLE),
    (S.DISPATCHED, E.DELIVER): (S.DELIVERED, set()),
    (S.DISPATCHED, E.REASSIGN): (S.DISPATCHED, {F.EMIT_DISPATCH}),
    (S.DISPATCHED, E.TO_FORM): (S.DISPATCHED, {F.EMIT_DISPATCH}),
    (S.DISPATCHED, E.ANSWER): (S.ANSWERED, SETTLE),
    (S.DISPATCHED, E.FAIL): (S.FAILED, SETTLE),
    (S.DISPATCHED, E.EXPIRE): (S.EXPIRED, SETTLE),
    (S.DISPATCHED, E.CANCEL): (S.FAILED, SETTLE),
    (S.DELIVERED, E.RERUN): (S.DISPATCHED, {F.EMIT_DISPATCH}),
    (S.DELIVERED, E.TO_FORM): (S.DELIVERED, {F.EMIT_DISPATCH}),
    (S.DELIVERED, E.ANSWER): (S.ANSWERED, SETTLE),
    (S.DELIVERED, E.FAIL): (S.FAILED, SETTLE),
    (S.DELIVERED, E.EXPIRE): (S.EXPIRED, SETTLE),
    (S.DELIVERED, E.CANCEL): (S.FAILED, SETTLE),
}
PAIRS = list(itertools.product(CallState, CallEvent))


@pytest.mark.parametrize(("state", "event"), PAIRS, ids=[f"{s}-{e}" for s, e in PAIRS])
def test_every_state_and_event_pair_moves_as_listed_or_is_refused(
    state: CallState, event: CallEvent
) -> None:
    expected = EXPECTED.get((state, event))
    if expected is None:
        with pytest.raises(ForbiddenTransition) as refused:
            transition(state, event)
        assert (refused.value.state, refused.value.event) == (state, event)
        assert state.value in str(refused.value) and event.value in str(refused.value)
        return
    move = transition(state, event)
    assert (move.to, set(move.effects)) == expected


def test_the_table_holds_exactly_the_listed_moves() -> None:
    assert set(TABLE) == set(EXPECTED)


def test_terminal_states_have_no_way_out_and_the_rest_are_open() -> None:
    assert TERMINAL_STATES == {S.ANSWERED, S.REJECTED, S.FAILED, S.EXPIRED}
    assert OPEN_STATES == {S.PROPOSED, S.AWAITING_CONFIRMATION, S.DISPATCHED, S.DELIVERED}
    for state in CallState:
        assert state.terminal is (state in TERMINAL_STATES)
        assert state.open is not state.terminal


def test_only_a_call_sent_to_a_surface_can_be_answered() -> None:
    assert ANSWERABLE_STATES == {S.DISPATCHED, S.DELIVERED}
    assert [s for s in CallState if s.answerable] == [S.DISPATCHED, S.DELIVERED]


def test_a_result_settles_only_an_answerable_call() -> None:
    # The answer's UPDATE settles a call it has not read (hostcall/calls/answers.py): the
    # states it leaves must be those the long way checks first.
    assert sources(E.ANSWER) == sources(E.FAIL) == ANSWERABLE_STATES


def test_every_open_state_can_expire_so_every_call_ends() -> None:
    assert sources(E.EXPIRE) == OPEN_STATES
    assert sources(E.CANCEL) == OPEN_STATES


def test_a_delivered_call_is_never_simply_reassigned() -> None:
    # A delivered write may have run: only RERUN (reads, idempotent tools) or the form.
    with pytest.raises(ForbiddenTransition):
        transition(S.DELIVERED, E.REASSIGN)
    assert sources(E.RERUN) == {S.DELIVERED}


def test_each_settling_event_ends_in_one_state_whatever_it_leaves() -> None:
    for event in (E.REFUSE, E.SIMULATE, E.REJECT, E.ANSWER, E.FAIL, E.EXPIRE, E.CANCEL):
        targets = {transition(s, event).to for s in sources(event)}
        assert len(targets) == 1 and targets <= TERMINAL_STATES, event
        for state in sources(event):
            assert F.RECORD_OUTCOME in transition(state, event).effects
