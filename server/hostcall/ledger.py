"""The call ledger: the only code that moves a tool call, by the table of
hostcall/calls/transitions.py.

Each move is one conditional update in the store (a call leaves a state exactly once), and
the move's effects — the tool message the model reads and the ``TOOL_CALL_RESULT`` event,
a dispatch, a run to resume — happen in the same unit or right after its commit. Policies
(hostcall/policies.py) decide whether a person must approve, and what the model reads of the
outcome; hostcall/calls/assignment.py decides which surface runs a client-side call.
"""

from __future__ import annotations

from hostcall.calls.answers import Answers
from hostcall.calls.moves import new_id, tool_error
from hostcall.calls.proposals import SCOPES, Proposals
from hostcall.calls.rehoming import Rehoming

__all__ = ["SCOPES", "Ledger", "new_id", "tool_error"]


class Ledger(Proposals, Answers, Rehoming):
    """The call ledger, in parts by responsibility: proposing (hostcall/calls/proposals.py),
    answers and decisions (hostcall/calls/answers.py), surfaces (hostcall/calls/rehoming.py),
    on one core of views and moves (hostcall/calls/moves.py)."""
