"""The call ledger: the only code that moves a tool call, by the table of
hostcall/calls/transitions.py.

Each move is one conditional update in the store (a call leaves a state exactly once), and
the move's effects — the tool message the model reads and the ``TOOL_CALL_RESULT`` event,
a dispatch — happen in the same unit. What is left to do once the unit commits (resume a
run, start a server-side call) is returned to the caller as a value
(hostcall/calls/outcomes.py), which the run engine acts on. Policies (hostcall/policies.py)
decide whether a person must approve, and what the model reads of the outcome;
hostcall/calls/assignment.py decides which surface runs a client-side call.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostcall.calls.answers import Answers
from hostcall.calls.moves import CallMoves, new_id, tool_error
from hostcall.calls.proposals import SCOPES, Proposals
from hostcall.calls.rehoming import Rehoming
from hostcall.calls.views import CallViews

__all__ = ["SCOPES", "Ledger", "new_id", "tool_error"]


@dataclass(frozen=True, slots=True)
class Ledger:
    """The call ledger's parts, each its own object on one core of views and moves
    (composed in hostcall/runtime.py)."""

    views: CallViews  # a call's tool and its ``CALL`` shape
    moves: CallMoves  # the one way a call moves (hostcall/calls/moves.py)
    proposals: Proposals  # a call the model asked for (hostcall/calls/proposals.py)
    answers: Answers  # results, failures, decisions, expiries (hostcall/calls/answers.py)
    rehoming: Rehoming  # claims, and calls whose surface is gone (hostcall/calls/rehoming.py)
