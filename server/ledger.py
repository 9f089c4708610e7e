"""The call ledger: the only code that moves a tool call, by the table of
server/calls/transitions.py.

Each move is one conditional update in the store (a call leaves a state exactly once), and
the move's effects — the tool message the model reads and the ``TOOL_CALL_RESULT`` event,
a dispatch, a run to resume — happen in the same unit or right after its commit. Policies
(server/policies.py) decide whether a person must approve, and what the model reads of the
outcome; server/calls/assignment.py decides which surface runs a client-side call.
"""

from __future__ import annotations

from server.calls.answers import Answers
from server.calls.moves import new_id, tool_error
from server.calls.proposals import SCOPES, Proposals
from server.calls.rehoming import Rehoming

__all__ = ["SCOPES", "Ledger", "new_id", "tool_error"]


class Ledger(Proposals, Answers, Rehoming):
    """The call ledger, in parts by responsibility: proposing (server/calls/proposals.py),
    answers and decisions (server/calls/answers.py), surfaces (server/calls/rehoming.py),
    on one core of views and moves (server/calls/moves.py)."""
