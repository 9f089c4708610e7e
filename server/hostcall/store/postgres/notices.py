"""What an append's NOTIFY says to other processes (hostcall/relay.py), and how it is read.

``"<conversation> <first seq> <origin>"``, then, when they fit, the events the statement
appended: a record separator (``\\x1e``) and ``[[type, data], ...]`` as compact JSON, its
spaces written ``\\u0020``. A process that finds them publishes them to its streams without
reading them back (a statement per notification, and the connection it waits for); one
that does not (too big to carry) reads the table from the first seq on, as every process
did before. The carried part has no space, so a process of the release before, which
splits the payload on spaces into three, still reads three: its origin reads as another
process's (it is), and it reads the table. Old and new processes share a database during a
rolling upgrade, either way round.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

SEPARATOR = "\x1e"
# PostgreSQL refuses a payload of 8,000 bytes or more; the head takes under 100.
CARRY_MAX = 7000


def carried(encoded: list[tuple[str, str]]) -> str:
    """What follows the head of the notification of ``encoded`` (type, data each):
    the events, or nothing if they do not fit."""
    body = json.dumps(encoded, separators=(",", ":")).replace(" ", "\\u0020")
    return SEPARATOR + body if len(body) < CARRY_MAX else ""


@dataclass(frozen=True)
class Notice:
    conversation_id: str
    seq: int  # the first event the statement appended
    origin: str  # the process that appended it
    body: str  # the events, if carried (``events``); decoded only by who needs them

    def events(self) -> list[tuple[str, str]] | None:
        """The events carried, (type, data) each, in seq order from ``seq``; None if not."""
        if not self.body:
            return None
        return [(str(name), str(data)) for name, data in json.loads(self.body)]


def origin(payload: str) -> str:
    """The process that appended what ``payload`` tells of (without parsing the rest)."""
    return payload.partition(SEPARATOR)[0].rpartition(" ")[2]


def parse(payload: str) -> Notice:
    head, _, body = payload.partition(SEPARATOR)
    conversation_id, seq, origin = head.split(" ")
    return Notice(conversation_id, int(seq), origin, body)
