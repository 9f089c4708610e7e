"""What a ledger write did, returned to the one that acts on it (the engine, or a request
that hands it to the engine): the table's caller effects (hostcall/calls/transitions.py)
as values, so that a reader follows a call from the request that moved it to the run that
goes on, with nothing calling back.

    Moved        the call moved; nothing more for the caller to do
    ├── Settled      RESUME_RUN: once its unit committed, the call's run may go on
    └── Dispatched   sent where it runs; ``execute``: a server-side call whose lease was
                     taken in the dispatching unit, so the caller starts its request once
                     that unit committed (EXECUTE)

``CallExpired`` is the refusal of a request that found its call past the deadline and
expired it: a ``Gone`` that carries the ``Settled`` its caller still acts on.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostcall.errors import Gone
from hostcall.store.records import Call


@dataclass(frozen=True, slots=True)
class Moved:
    call: Call  # as the move left it


@dataclass(frozen=True, slots=True)
class Settled(Moved):
    @property
    def run_id(self) -> str:
        return self.call.run_id


@dataclass(frozen=True, slots=True)
class Dispatched(Moved):
    execute: bool = False


class CallExpired(Gone):
    """The call passed its deadline; ``settled`` is the expiry, if this request made it."""

    def __init__(self, call_id: str, settled: Settled | None) -> None:
        super().__init__(f"call {call_id} passed its deadline and has expired")
        self.call_id = call_id
        self.settled = settled
