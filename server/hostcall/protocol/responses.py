"""Response bodies (docs/protocol.md), as typed objects; ``to_wire`` writes their JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hostcall.protocol.wire import ALWAYS


@dataclass(frozen=True, slots=True)
class CallView:
    """The ``CALL`` shape: in the snapshot, and the value of the dispatch and approval events.

    ``outcome`` is null while the call is open. A token is present only in the states that
    need it (``resultToken`` for an answerable client-side call, ``decisionToken`` while
    awaiting confirmation).
    """

    tool_call_id: str
    tool_call_name: str
    kind: str
    run_id: str
    state: str
    input: Any = field(metadata=ALWAYS)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    deadline: str
    route: str
    delivered: bool
    outcome: dict[str, Any] | None = field(metadata=ALWAYS)
    approval: dict[str, Any] | None = None
    simulated: bool | None = None
    result_token: str | None = None
    decision_token: str | None = None
    # Surfaces (issue 9): the surface the call is assigned to, null while the form answers
    # it (then ``form_reason`` says why); ``assignment`` counts its assignments to surfaces.
    surface_id: str | None = field(default=None, metadata=ALWAYS)
    assignment: int = 0
    title: str | None = None
    form_reason: str | None = None
