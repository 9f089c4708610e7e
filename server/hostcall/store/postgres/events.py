"""The PostgreSQL store's event log: per-conversation seqs with no gap, and the NOTIFY
that wakes other processes' streams (hostcall/relay.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hostcall.errors import LeaseLost
from hostcall.protocol.events import ProtocolEvent, encode
from hostcall.protocol.frames import Event, stored_event
from hostcall.store.interfaces import Events
from hostcall.store.postgres import messages, notices
from hostcall.store.postgres.connections import Part, PostgresConnections
from hostcall.store.postgres.held import IF_FENCED, HeldWrite, Transaction
from hostcall.store.statements import POSTGRES as SQL

CHANNEL = "hostcall_events"


# Up to this many events, an append's are scalar parameters in a VALUES list (one
# statement text per count); past it, two arrays. psycopg adapts an array parameter in
# Python, escaping each item with a regular expression: ~50 us for a few events' JSON,
# ~4% of the server's CPU under the cluster bench (py-spy).
VALUES_MAX = 32
# Up to this many held messages go out inside an append (more, which no step writes, in
# an INSERT of their own before it).
CARRIED_MAX = 4


def _append_sql(
    *, fenced: bool, notify: bool, count: int, carried: int = 0, touched: bool = False
) -> str:
    ctes, select = append_parts(
        fenced=fenced, notify=notify, count=count, carried=carried, touched=touched
    )
    return f"WITH {ctes}\nSELECT {select} FROM next"


def append_parts(
    *, fenced: bool, notify: bool, count: int, carried: int = 0, touched: bool = False
) -> tuple[str, str]:
    """Appends ``count`` events as the conversation's next seqs in one statement, and
    returns the first seq (no row: the fence failed). The events are %(t0)s/%(d0)s,
    %(t1)s/%(d1)s... (type, data), or, past ``VALUES_MAX``, the arrays %(types)s/%(datas)s.

    The UPDATE takes the conversation row's lock, held to commit: no other transaction can
    number an event of it in between, so seqs have no gap and commit in order.
    ``fenced``: only while %(owner)s holds lease %(key)s. FOR SHARE keeps the lease row
    until this transaction ends: a process taking the lease over waits for this append to
    commit, so whatever it reads after taking the lease includes it (hostcall/runs/recovery.py
    discards a message cut off mid-answer; an append that came later would escape that).
    ``notify``: NOTIFY ``"<conversation> <first seq> <origin>"`` and %(told)s, the
    events themselves if they fit (hostcall/store/postgres/notices.py), at commit. Every
    append of a transaction notifies its own events: a listener that has them all needs no
    read (hostcall/relay.py); one told of events it was not given reads every event from
    the seq it is told, and a transaction's events commit together.
    ``touched``: the UPDATE also moves the conversation's ``updated_at`` on to
    %(touched)s (a held ``touch_conversation``), never back.
    ``carried``: the statement also writes that many held messages of the conversation
    (%(m<i>_<j>)s, hostcall/store/postgres/messages.py), only if ``next`` does: a lost
    fence writes no message either.
    Returned in two parts, its CTEs and what it SELECTs FROM next, for a statement that
    carries held writes too (``EventLog.send_held``).
    """
    fence = (
        " AND EXISTS (SELECT 1 FROM leases WHERE key = %(key)s AND owner = %(owner)s FOR SHARE)"
        if fenced
        else ""
    )
    if count == 1:
        increment, first = "1", "last_seq"
        rows = "SELECT %(cid)s, last_seq, %(t0)s, %(d0)s FROM next"
    elif count <= VALUES_MAX:
        increment, first = f"{count}", f"last_seq - {count - 1}"
        values = ", ".join(f"({i + 1}, %(t{i})s, %(d{i})s)" for i in range(count))
        rows = (
            f"SELECT %(cid)s, next.last_seq - {count} + e.n, e.type, e.data FROM next,"
            f" (VALUES {values}) AS e(n, type, data)"
        )
    else:
        increment, first = "%(n)s", "last_seq - %(n)s + 1"
        rows = (
            "SELECT %(cid)s, next.last_seq - %(n)s + e.n, e.type, e.data FROM next,"
            " unnest(%(types)s::text[], %(datas)s::text[]) WITH ORDINALITY AS e(type, data, n)"
        )
    note = f", pg_notify(%(channel)s, %(cid)s || ' ' || ({first}) || ' ' || %(origin)s || %(told)s)"
    kept = f", kept AS ({messages.insert_sql(carried, after='next')})" if carried else ""
    touch = ", updated_at = GREATEST(updated_at, %(touched)s)" if touched else ""
    ctes = f"""next AS (
    UPDATE conversations SET last_seq = last_seq + {increment}{touch} WHERE id = %(cid)s{fence}
    RETURNING last_seq
), added AS (
    INSERT INTO events (conversation_id, seq, type, data) {rows}
){kept}"""
    return ctes, f"{first} AS seq{note if notify else ''}"


# What makes a held write carried by a fenced append only if the fence held (HeldWrite).
# The reference also orders the statement: the append (and its FOR SHARE of the lease row)
# runs before the write's own change of that row.
_IF_NEXT = " AND EXISTS (SELECT 1 FROM next)"

# By (fenced, notify, count, carried, touched); built as they are first needed.
_APPENDS: dict[tuple[bool, bool, int, int, bool], str] = {}


def append_sql(
    *, fenced: bool, notify: bool, count: int, carried: int = 0, touched: bool = False
) -> str:
    key = (fenced, notify, count if count <= VALUES_MAX else VALUES_MAX + 1, carried, touched)
    found = _APPENDS.get(key)
    if found is None:
        found = _APPENDS[key] = _append_sql(
            fenced=fenced, notify=notify, count=count, carried=carried, touched=touched
        )
    return found


def _carried(current: Transaction | None, conversation_id: str) -> list[messages.Values]:
    """The transaction's held messages of the conversation, taken to go out with its
    append (none past ``CARRIED_MAX``: those go in an INSERT of their own)."""
    if current is None or not current.messages:
        return []
    carried = [m for m in current.messages if m[1] == conversation_id]
    if not carried or len(carried) > CARRIED_MAX:
        return []
    current.messages = [m for m in current.messages if m[1] != conversation_id]
    return carried


def _fenced_writes(current: Transaction | None, fence: tuple[str, str] | None) -> list[HeldWrite]:
    """The transaction's held writes waiting for a fenced append of ``fence`` (see
    ``HeldWrite.fence``), taken to go out inside it; for an unfenced append, those that
    wait for no fence (they would go out alone just before it: an answer's audit entry).
    Not those into a fenced append: the lease a run's end deletes is the row its fence
    reads, and one statement must not change a row twice."""
    if current is None or not current.writes:
        return []
    taken = [w for w in current.writes if w.fence == fence]
    if taken:
        current.writes = [w for w in current.writes if w.fence != fence]
    return taken


class EventLog(Part, Events):
    def __init__(self, db: PostgresConnections, *, origin: str) -> None:
        super().__init__(db)
        # Names this process in its notifications.
        self.origin = origin

    # ---- events --------------------------------------------------------------------------

    async def append_event(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event:
        return (await self.append_events(conversation_id, [event], fence=fence))[0]

    async def append_events(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]:
        if not events:
            return []
        encoded = [encode(event) for event in events]
        current = self.db.current()
        previous = current.appended.get(conversation_id) if current is not None else None
        if current is not None and previous is not None and fence is None:
            # This transaction already holds the conversation's row lock (taken by its first
            # append, held to commit): nobody else can number an event in between, so the
            # next seqs are known. The rows wait, and go in one statement with the appends
            # that follow them, before the transaction's next read (or COMMIT).
            current.deferred.setdefault(conversation_id, []).extend(encoded)
            first = previous + 1
        else:
            # (``db.one`` sends the deferred appends first: this one numbers after them.)
            carried = _carried(current, conversation_id)
            touched = current.touched.pop(conversation_id, None) if current is not None else None
            sql = append_sql(
                fenced=fence is not None,
                notify=True,
                count=len(encoded),
                carried=len(carried),
                touched=touched is not None,
            )
            params = self._append_params(conversation_id, encoded, fence, carried)
            if touched is not None:
                params["touched"] = touched
            writes = _fenced_writes(current, fence)
            if writes:
                # Made only if this append's fence holds: its answer is theirs too.
                head, tail = sql.split("\nSELECT ", 1)
                ctes = [w.ctes.replace(IF_FENCED, _IF_NEXT) for w in writes]
                sql = f"{head}, {', '.join(ctes)}\nSELECT {tail}"
                for write in writes:
                    params.update(write.params)
            row = await self.db.one(sql, params)
            if row is None:
                if fence is not None:
                    raise LeaseLost(*fence)
                raise AssertionError(f"no conversation {conversation_id}")
            first = int(row["seq"])
            if fence is not None and current is not None:
                current.fenced.add(fence)
        if current is not None:
            current.appended[conversation_id] = first + len(encoded) - 1
        return [
            Event(conversation_id, first + i, name, data) for i, (name, data) in enumerate(encoded)
        ]

    async def send_held(self, current: Transaction, everything: bool = True) -> None:
        """Send what the transaction holds, in one statement where it can: the held writes
        (``hold``), and with ``everything`` its deferred appends of one conversation and
        its held messages (another conversation's appends, which no step makes, in
        statements of their own). The store's connections call it (``flush_with``).
        Not waited for: nothing in it is read (the seqs are known), and an error surfaces
        by the transaction's end."""
        writes, current.writes = current.writes, []
        for write in [w for w in writes if w.fence is not None]:
            # Nothing proved its lease held: alone, and checked (see HeldWrite.fence).
            row = await self.db.one(
                f"WITH {write.ctes.replace(IF_FENCED, '')}"
                f"\nSELECT EXISTS (SELECT 1 FROM {write.check}) AS held",
                write.params,
                sees_appends=False,
            )
            if row is None or not row["held"]:
                assert write.fence is not None
                raise LeaseLost(*write.fence)
        writes = [w for w in writes if w.fence is None]
        deferred: list[tuple[str, list[tuple[str, str]]]] = []
        held: list[messages.Values] = []
        touched: dict[str, float] = {}
        if everything:
            deferred, current.deferred = list(current.deferred.items()), {}
            held, current.messages = current.messages, []
            touched, current.touched = current.touched, {}
        ctes: list[str] = []
        params: dict[str, Any] = {}
        select = ""
        for index, (conversation_id, encoded) in enumerate(deferred):
            at = touched.pop(conversation_id, None)
            parts = append_parts(
                fenced=False, notify=True, count=len(encoded), touched=at is not None
            )
            values = self._append_params(conversation_id, encoded)
            if at is not None:
                values["touched"] = at
            if index == 0:
                ctes.append(parts[0])
                params.update(values)
                select = parts[1]
            else:
                await self.db.run(f"WITH {parts[0]}\nSELECT {parts[1]} FROM next", values)
        for conversation_id, at in touched.items():  # no append of it to ride in
            await self.db.run(SQL.touch_conversation, (at, conversation_id, at))
        # Unfenced appends need not gate them: every held message in one INSERT, in order.
        if held:
            ctes.append(f"rest AS ({messages.insert_sql(len(held), prefix='r')})")
            params.update(messages.params(held, prefix="r"))
        for write in writes:
            ctes.append(write.ctes)
            params.update(write.params)
        if ctes:
            end = f"{select} FROM next" if select else "1"
            await self.db.run(f"WITH {', '.join(ctes)}\nSELECT {end}", params)

    def _append_params(
        self,
        conversation_id: str,
        encoded: list[tuple[str, str]],
        fence: tuple[str, str] | None = None,
        carried: list[messages.Values] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "cid": conversation_id,
            "channel": CHANNEL,
            "origin": self.origin,
            "told": notices.carried(encoded),
        }
        if carried:
            params.update(messages.params(carried))
        if len(encoded) <= VALUES_MAX:
            for i, (name, data) in enumerate(encoded):
                params[f"t{i}"], params[f"d{i}"] = name, data
        else:
            params["n"] = len(encoded)
            params["types"] = [name for name, _ in encoded]
            params["datas"] = [data for _, data in encoded]
        if fence is not None:
            params["key"], params["owner"] = fence
        return params

    async def events_after(self, conversation_id: str, seq: int, limit: int = 1000) -> list[Event]:
        found = await self.db.all(SQL.events_after, (conversation_id, seq, limit))
        return [stored_event(conversation_id, int(r["seq"]), r["type"], r["data"]) for r in found]

    async def reasoning_events_after(
        self, conversation_id: str, seq: int, limit: int = 1000
    ) -> list[Event]:
        found = await self.db.all(SQL.reasoning_events_after, (conversation_id, seq, limit))
        return [stored_event(conversation_id, int(r["seq"]), r["type"], r["data"]) for r in found]

    async def last_seq(self, conversation_id: str) -> int:
        row = await self.db.one(SQL.last_seq, (conversation_id,))
        return int(row["last_seq"]) if row else 0
