"""What a PostgreSQL transaction holds back until it sends it (hostcall/store/postgres/
connections.py): its state, per task, from its first statement to its end.

Writes whose answers nobody reads wait, and go out inside the transaction's next statement
or at its end, as CTEs of one statement (``HeldWrite``); so do appends of a conversation
whose seqs are known, held messages, touches of ``updated_at``, and the first statement
``run`` before the transaction has a connection (alone, if it is the only one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

Row = dict[str, Any]
Params = Sequence[Any] | dict[str, Any] | None


# In a held write's CTEs, where the condition goes that makes it only if the fenced append
# of the statement carrying it found its lease held (see HeldWrite.fence).
IF_FENCED = "{if_fenced}"


@dataclass(frozen=True)
class HeldWrite:
    """A write a transaction holds back (see ``PostgresConnections.hold``): CTEs
    (``name AS (...)``, names and parameters unique in the transaction), sent with the
    transaction's next statement or at its end, and the table it writes.

    ``fence``: a write to make only while that lease (key, owner) is held, which nothing in
    the transaction has proven yet. It goes out inside the transaction's next fenced append
    of that lease, made only if the append's fence holds (``IF_FENCED`` in ``ctes``: the
    append's row is there), so that append answers for both; or, before any other
    statement or at the end, alone, its ``check`` (a table expression of its CTEs) read:
    no row, and the transaction raises ``LeaseLost``."""

    ctes: str
    params: dict[str, Any]
    table: str
    fence: tuple[str, str] | None = None
    check: str = ""


@dataclass
class Transaction:
    # None until the transaction's first statement: a transaction that sends nothing (a
    # limit check with no limits set, say) costs no connection and no BEGIN/COMMIT.
    connection: psycopg.AsyncConnection[Row] | None = None
    pipeline: psycopg.AsyncPipeline | None = None
    # What _begin entered on the connection: its pipeline.
    piped: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    # The last seq this transaction appended per conversation (see append_events).
    appended: dict[str, int] = field(default_factory=dict)
    # Appends not sent yet, per conversation: (type, data) each (see append_events).
    deferred: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # Messages not sent yet, in order: each its column values (hostcall/store/postgres/messages.py).
    messages: list[tuple[Any, ...]] = field(default_factory=list)
    # Conversations' ``updated_at`` not set yet (``touch_conversation``): the next append of
    # the conversation sets it in the UPDATE of the row it makes anyway (see append_events).
    touched: dict[str, float] = field(default_factory=dict)
    # Other writes not sent yet, in order (see hold).
    writes: list[HeldWrite] = field(default_factory=list)
    # The leases (key, owner) a fenced append of this transaction found held since its last
    # write of a lease: the append keeps the lease row FOR SHARE to the end, so no other
    # transaction can change or take the lease meanwhile, and this one has not.
    fenced: set[tuple[str, str]] = field(default_factory=set)
    # Numbers the held writes' CTEs and parameters.
    serial: int = 0
    # Run once COMMIT has succeeded (what the store may remember only once it is so).
    committed: list[Callable[[], None]] = field(default_factory=list)
    # Statements ``run`` before the transaction took a connection, in order: sent when it
    # takes one, or, if there is just one at the end, alone (see ``transaction``).
    unsent: list[tuple[str, Params]] = field(default_factory=list)
