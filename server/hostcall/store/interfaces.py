"""The store's interfaces, one per aggregate, async throughout (no database round trip may
block the event loop). ``hostcall.store.Store`` is all of them at once, for the wiring; a
module that needs one aggregate can say so by taking that aggregate's protocol.

    Database        transactions, the write probe and refused writes, closing
    Conversations   conversations (and the console's list of them)
    Sessions        session generations and single-use stream tickets
    Messages        a conversation's messages
    Runs            runs, their claims and step ends
    Calls           tool calls and their single-use moves, and tool grants
    Surfaces        a conversation's surfaces and their open streams
    Events          a conversation's numbered events
    Leases          which process works on what; the sweeper's one turn
    QuotaCounters   rate and cost counters (hostcall/counters.py)
    Accounts        the console's users
    Audit           the console's audit log
    AgentVersions   the designer's saved agent versions
    Erasure         conversations deleted whole: a person's erasure, the retention sweeper
    Feedbacks       visitors' ratings of the agent's replies, and of whole conversations
    Handoffs        conversations a person of the team is asked for, or holds
    Attachments     files visitors upload, their bytes apart, and which message sent them

Every write the engine makes for one decision happens inside one ``async with
transaction()``, so a crash never leaves a call settled without its tool message, or a step
without its calls. tests/unit/test_store.py runs one suite against both dialects (SQLite,
PostgreSQL): keep them equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from hostcall.protocol.events import ProtocolEvent
from hostcall.protocol.frames import Event
from hostcall.store.console_records import (
    AgentVersion,
    AuditEntry,
    ConsoleSession,
    ConversationQuery,
    ConversationSummary,
    Feedback,
    Handoff,
    KnownPerson,
    PersonConversation,
    Rating,
    UsageRecord,
    UsageTotal,
    User,
)
from hostcall.store.records import (
    Attachment,
    Call,
    CallApp,
    CallState,
    ClaimedRun,
    Conversation,
    OpenedStream,
    Run,
    RunStart,
    RunStatus,
    StoredMessage,
    Surface,
)


class Database(Protocol):
    def transaction(self) -> AbstractAsyncContextManager[None]: ...
    async def probe_write(self) -> None: ...
    # The same check, blocking: for the moment a store is opened, before any event loop
    # serves (the app factory may run inside one, so it cannot await). Closes the store
    # and raises if it cannot be written.
    def check_writable(self) -> None: ...
    # Why the database refused a write lately (a full disk, a read-only file), if no
    # transaction has committed since (hostcall/store/health.py); None if it did not.
    def refused_write(self) -> str | None: ...
    # Statements and transactions of this process waiting for a connection now (always 0
    # on SQLite, whose one connection is taken in turn): the door's bound (hostcall/door.py).
    def connection_waiters(self) -> int: ...
    async def close(self) -> None: ...


class Conversations(Protocol):
    async def create_conversation(self, conversation: Conversation) -> None: ...
    async def get_conversation(self, conversation_id: str) -> Conversation | None: ...
    async def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None: ...
    # Newest conversation first (created_at, then id); see ``ConversationQuery``.
    async def list_conversations(self, query: ConversationQuery) -> list[ConversationSummary]: ...
    # Make an anonymous conversation ``person``'s (adoption); True if it is theirs now
    # (it was anonymous, or already theirs), False if it is missing or another person's.
    async def set_person(self, conversation_id: str, person: str) -> bool: ...
    # The person wrote in it at ``at``: their history's order (never moves it back).
    async def touch_conversation(self, conversation_id: str, at: float) -> None: ...
    # ``person``'s conversations with agent ``agent_id``, last written in first (updated,
    # then id); ``before`` (updated_at, id) of the previous page's last line for the next.
    async def person_conversations(
        self,
        agent_id: str,
        person: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PersonConversation]: ...
    # The signed-in people (of ``agent_id``, else of every agent), last written to first.
    async def known_people(
        self, agent_id: str = "", *, limit: int = 50, offset: int = 0
    ) -> list[KnownPerson]: ...
    # The anonymous conversations started in one browser (``Conversation.browser``), in the
    # same order and pages: an anonymous visitor's history.
    async def browser_conversations(
        self,
        agent_id: str,
        browser: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PersonConversation]: ...


class Sessions(Protocol):
    # ``rotate_session`` moves a conversation to the next session generation if it is at
    # ``generation`` (False otherwise: someone else rotated first).
    async def rotate_session(self, conversation_id: str, generation: int) -> bool: ...
    # ``consume_ticket`` records ``nonce`` as used (forgetting, now and then, tickets
    # expired before ``now``) and returns False if it already was, atomically.
    async def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool: ...
    # A first stream's opening: the conversation (None if there is none), whether ticket
    # ``nonce`` was consumed (as ``consume_ticket``), which it is only if the conversation
    # is at session ``generation`` (a refused stream leaves its ticket usable), and the
    # conversation's last seq as that read saw it. One statement on PostgreSQL.
    async def open_stream(
        self, conversation_id: str, generation: int, nonce: str, expires_at: float, now: float
    ) -> OpenedStream: ...


class Messages(Protocol):
    async def add_message(self, message: StoredMessage) -> None: ...
    async def list_messages(self, conversation_id: str) -> list[StoredMessage]: ...
    # Its last ``turns`` turns, oldest first: everything from the person's ``turns``-th last
    # message on (hostcall/transcript.py), read without the turns before it.
    async def recent_messages(self, conversation_id: str, turns: int) -> list[StoredMessage]: ...
    # An edit or a regeneration: message ``first_id`` and every later one not superseded yet
    # are superseded by run ``run_id`` (kept, never read by the model again); how many.
    async def supersede_messages(self, conversation_id: str, first_id: str, run_id: str) -> int: ...


class Runs(Protocol):
    async def create_run(self, run: Run) -> None: ...
    # One run at a time per conversation: unless the conversation has a run in progress
    # (running or waiting), store ``run`` and take its ``lease`` (key, owner, until), which
    # must be free (a new run's is), and return the conversation's messages (those the
    # transaction added before included); else store nothing and return that run's id and
    # status. In a transaction that appended an event of the conversation first (the
    # append locks the conversation to its end), so two transactions cannot both find none.
    # ``turns``: the messages of the last ``turns`` turns only (``recent_messages``).
    async def create_run_alone(
        self, run: Run, lease: tuple[str, str, float], *, turns: int | None = None
    ) -> RunStart: ...
    async def get_run(self, run_id: str) -> Run | None: ...
    async def latest_run(self, conversation_id: str) -> Run | None: ...
    async def list_runs(self, conversation_id: str) -> list[Run]: ...  # oldest first
    async def runs_with_status(self, status: RunStatus) -> list[Run]: ...
    async def stalled_runs(self) -> list[Run]: ...
    # Resume a waiting run whose step has no open call left, atomically: take lease ``key``
    # for ``owner`` until ``until`` (if it is free, expired at ``now``, or ``owner``'s) and
    # move the run to running. The run as claimed, with its conversation's messages as they
    # were then; or None: not waiting, a call of its step still open, or another owner's
    # live lease (that process resumes it). ``turns``: as for ``create_run_alone``.
    async def claim_ready_run(
        self, run_id: str, key: str, owner: str, until: float, now: float, *,
        turns: int | None = None,
    ) -> ClaimedRun | None: ...  # fmt: skip
    async def update_run(self, run_id: str, **changes: Any) -> None: ...
    # The step's last write: change the run only while ``lease`` (key, owner) is held, and
    # release the lease (``until`` None) or renew it to ``until``, atomically (one
    # statement on PostgreSQL). False, and nothing changed: the lease was lost.
    async def update_run_leased(
        self, run_id: str, lease: tuple[str, str], *, until: float | None = None, **changes: Any
    ) -> bool: ...
    async def claim_run(  # the run as claimed; None if it was not at from_status
        self, run_id: str, from_status: RunStatus, to_status: RunStatus
    ) -> Run | None: ...


class Calls(Protocol):
    async def add_call(self, call: Call) -> None: ...
    async def get_call(self, call_id: str) -> Call | None: ...
    async def list_calls(self, conversation_id: str) -> list[Call]: ...
    async def calls_of_step(self, run_id: str, step: int) -> list[Call]: ...
    async def due_calls(self, now: float) -> list[Call]: ...
    async def count_calls(self, run_id: str, tool_name: str) -> int: ...
    async def calls_in_states(self, states: Iterable[CallState]) -> list[Call]: ...
    # Single use of a call answer is this method's job: it changes a call only from the
    # states it is given, atomically, and returns the call as it left it (None if it did not
    # move: someone else moved it first). With ``assigned``, it moves a call only while the
    # call is still assigned to that surface and assignment number.
    async def transition_call(
        self,
        call_id: str,
        from_states: Iterable[CallState],
        to_state: CallState,
        *,
        assigned: tuple[str | None, int] | None = None,
        **changes: Any,
    ) -> Call | None: ...
    # A grant: a person approved ``call_id`` for the rest of the conversation, so later
    # calls of that tool in it are dispatched without asking (docs/agents.md).
    async def add_grant(self, conversation_id: str, tool_name: str, call_id: str) -> None: ...
    async def has_grant(self, conversation_id: str, tool_name: str) -> bool: ...


class CallApps(Protocol):
    """Calls' MCP App views (records.CallApp): one per call, its context replaced."""

    async def add_call_app(self, app: CallApp) -> None: ...
    async def get_call_app(self, call_id: str) -> CallApp | None: ...
    async def set_app_context(self, call_id: str, context: dict[str, Any]) -> bool: ...
    async def app_contexts(self, conversation_id: str) -> list[CallApp]: ...


class Surfaces(Protocol):
    """Surfaces (docs/protocol.md "Surfaces") are keyed by conversation and the id the client
    chose. ``streams`` counts a surface's open event streams; ``attach_surface`` and
    ``detach_surface`` move it, and the last detach stamps ``detached_at`` (the grace period
    starts). Each stream is also counted for the process (``owner``, its lease owner) that
    serves it: ``drop_streams`` counts off every stream of a process that died (its lease
    lapsed; hostcall/runs/recovery.py) and returns how many surfaces it touched.
    ``reset_surfaces`` is for a process starting over a store no other process is serving:
    every stream it counted is gone. Each method that writes makes the surface first if it
    does not exist yet."""

    async def save_surface_tools(
        self,
        conversation_id: str,
        surface_id: str,
        tools: tuple[str, ...],
        now: float,
        page_tools: tuple[dict[str, Any], ...] = (),
    ) -> bool:
        """Save a surface's tools (atomic on its own: no transaction needed around it), and
        say whether the conversation has a call dispatched or delivered, which the new
        tools may take (``Rehoming.rehome``): without one there is nothing to move."""
        ...

    async def attach_surface(
        self, conversation_id: str, surface_id: str, now: float, owner: str = ""
    ) -> None: ...
    async def detach_surface(
        self, conversation_id: str, surface_id: str, now: float, owner: str = ""
    ) -> None: ...
    async def drop_streams(self, owner: str, now: float) -> int: ...
    async def leave_surface(self, conversation_id: str, surface_id: str, now: float) -> None: ...
    async def touch_surface(self, conversation_id: str, surface_id: str, now: float) -> None: ...
    async def get_surface(self, conversation_id: str, surface_id: str) -> Surface | None: ...
    async def list_surfaces(self, conversation_id: str) -> list[Surface]: ...
    async def conversation_with_surfaces(
        self, conversation_id: str
    ) -> tuple[Conversation, list[Surface]] | None:
        """The conversation and its surfaces as ``list_surfaces`` lists them, in one read
        where the store can (one statement on PostgreSQL); None with no conversation."""
        ...

    async def reset_surfaces(self, now: float) -> None: ...


class Events(Protocol):
    # ``fence=(lease key, owner)``: append only while that owner holds that lease, checked
    # in the append's own transaction, else raise ``LeaseLost`` and append nothing (a
    # process that stalled past its lease cannot stream into a run another took over).
    async def append_event(
        self, conversation_id: str, event: ProtocolEvent, *, fence: tuple[str, str] | None = None
    ) -> Event: ...
    # Several events in this order, atomically (one statement on PostgreSQL), fenced alike.
    async def append_events(
        self,
        conversation_id: str,
        events: Sequence[ProtocolEvent],
        *,
        fence: tuple[str, str] | None = None,
    ) -> list[Event]: ...
    async def events_after(
        self, conversation_id: str, seq: int, limit: int = 1000
    ) -> list[Event]: ...
    # ``events_after``'s subset that places a model's reasoning: its start and text, and
    # the starts of the messages and calls it led to.
    async def reasoning_events_after(
        self, conversation_id: str, seq: int, limit: int = 1000
    ) -> list[Event]: ...
    async def last_seq(self, conversation_id: str) -> int: ...


class Leases(Protocol):
    """Leases (hostcall/leases.py) say which process works on a run step or a server-side
    call; ``try_singleton`` says whether this process has the cluster's one turn at a job
    (the deadline sweeper): it takes (or renews) the turn for ``owner`` until ``until``, if
    it is free, lapsed at ``now``, or ``owner``'s already. A turn is never renewed by
    ``renew_leases``: only by asking for it again."""

    async def take_lease(self, key: str, owner: str, until: float, now: float) -> bool: ...
    async def keep_lease(self, key: str, owner: str, until: float) -> bool: ...
    async def renew_leases(self, owner: str, until: float) -> int: ...
    async def release_lease(self, key: str, owner: str) -> bool: ...
    # Whoever holds it: a stopped run's step, wherever it runs, commits nothing more.
    async def break_lease(self, key: str) -> bool: ...
    async def expired_leases(self, now: float, *, other_than: str = "") -> list[str]: ...
    async def try_singleton(self, name: str, owner: str, until: float, now: float) -> bool: ...


class QuotaCounters(Protocol):
    # ``add_to_counter`` adds ``amount`` to the counter ``key`` in the window starting at
    # ``window`` (a counter left from an earlier window starts again from 0), if the total
    # stays within ``limit``; False (and nothing added) if it would not. Atomic.
    async def add_to_counter(
        self, key: str, window: float, amount: int, *, limit: int | None = None
    ) -> bool: ...
    async def counted(self, key: str, window: float) -> int: ...


class Accounts(Protocol):
    # ``add_user`` returns False (and changes nothing) if the name is taken.
    async def add_user(self, user: User) -> bool: ...
    async def get_user(self, name: str) -> User | None: ...
    async def list_users(self) -> list[User]: ...  # by name
    # Each of these returns False (and changes nothing) if there is no such user; each
    # ends every console session of that user, in the same transaction.
    async def remove_user(self, name: str) -> bool: ...
    async def set_user_role(self, name: str, role: str) -> bool: ...
    async def set_user_password(self, name: str, password_hash: str) -> bool: ...
    # Console sessions, by a digest of their id (the cookie holds the id itself).
    # ``session_user`` is the name of the user of a session that has not expired at ``now``,
    # else None; ``add_session`` also drops the sessions expired at ``created_at``.
    async def add_session(self, session: ConsoleSession) -> None: ...
    async def session_user(self, digest: str, now: float) -> str | None: ...
    async def end_session(self, digest: str) -> bool: ...


class Audit(Protocol):
    # ``add_audit`` ignores ``entry.id`` and returns the entry with its new id.
    # ``list_audit`` is newest first; ``before`` pages (ids < before); filters are ANDed.
    async def add_audit(self, entry: AuditEntry) -> AuditEntry: ...
    # ``note_audit`` adds an entry whose id nobody reads: inside a transaction it goes out
    # with the transaction's next statement (PostgreSQL), costing no round trip of its own,
    # and is rolled back with it.
    async def note_audit(self, entry: AuditEntry) -> None: ...
    async def list_audit(
        self,
        *,
        limit: int = 100,
        before: int | None = None,
        conversation_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[AuditEntry]: ...


class AgentVersions(Protocol):
    # ``add_agent_version`` ignores ``version.version`` and assigns the next number for that
    # agent atomically; lists are newest first.
    async def add_agent_version(self, version: AgentVersion) -> AgentVersion: ...
    async def list_agent_versions(self, agent_id: str) -> list[AgentVersion]: ...
    async def get_agent_version(self, agent_id: str, version: int) -> AgentVersion | None: ...


class ModelUsage(Protocol):
    # One row per model step (hostcall/runs/stepping.py), written in the step's unit;
    # ``fence``: made only with the unit's next fenced append of that lease (PostgreSQL
    # sends it inside that append's statement).
    async def add_usage(
        self, record: UsageRecord, *, fence: tuple[str, str] | None = None
    ) -> None: ...
    # Totals per (day, agent) from ``since_day`` (YYYY-MM-DD, UTC) on, newest day first.
    async def usage_by_day(self, since_day: str) -> list[UsageTotal]: ...
    # Totals per conversation of the steps since ``since``, the costliest (then the most
    # tokens) first.
    async def usage_by_conversation(self, since: float, limit: int) -> list[UsageTotal]: ...
    async def usage_of_conversation(self, conversation_id: str) -> UsageTotal | None: ...
    async def usage_of_run(self, conversation_id: str, run_id: str) -> UsageTotal | None: ...


class Erasure(Protocol):
    async def erase_conversation(self, conversation_id: str) -> dict[str, int]:
        """Every row the conversation left, in every table (hostcall/store/erasure.py):
        the rows deleted, per table. Call it inside a transaction to erase several at once."""
        ...

    async def forget_counters(self, name: str) -> int:
        """Delete the rate and cost counters whose key names ``name`` (a person's own
        limits): how many."""
        ...

    async def stale_conversations(self, agent_id: str, before: float, limit: int) -> list[str]:
        """Up to ``limit`` of the agent's conversations last active before ``before`` with
        no run in progress, oldest first: what its retention lets go."""
        ...


class Feedbacks(Protocol):
    async def save_feedback(self, feedback: Feedback) -> bool:
        """One per message: a second rating of the same reply replaces the first. True when
        the reply's rating is new or changed; False when the same rating came again (its
        comment, if any, replaces the one stored)."""
        ...

    async def feedback_of(self, conversation_id: str) -> list[Feedback]: ...

    async def save_rating(self, rating: Rating) -> Rating:
        """One per conversation: the first stands. The rating stored, this one or the first."""
        ...

    async def rating_of(self, conversation_id: str) -> Rating | None: ...


class Handoffs(Protocol):
    async def get_handoff(self, conversation_id: str) -> Handoff | None: ...
    # Queue the conversation for a person; False if it already waits or is held.
    async def request_person(self, conversation_id: str, now: float) -> bool: ...
    # ``person`` holds the conversation now; False if someone holds it already (them too).
    async def take_over(self, conversation_id: str, person: str, now: float) -> bool: ...
    # ``person`` lets the conversation go; False if they did not hold it.
    async def hand_back(self, conversation_id: str, person: str) -> bool: ...


class Attachments(Protocol):
    # Keep the file and its bytes only while the conversation's files, this one with them,
    # weigh ``max_total`` bytes or less: False (and nothing kept) past it. Atomic.
    async def add_attachment(
        self, attachment: Attachment, data: bytes, *, max_total: int
    ) -> bool: ...
    async def get_attachment(self, attachment_id: str) -> Attachment | None: ...
    async def attachment_bytes(self, attachment_id: str) -> bytes | None: ...
    async def conversation_attachments(self, conversation_id: str) -> list[Attachment]: ...
    # A message sends its files: each of ``ids`` that is the conversation's and not sent
    # yet becomes ``message_id``'s; how many did (fewer than asked: the caller rolls back).
    async def claim_attachments(
        self, conversation_id: str, ids: Sequence[str], message_id: str
    ) -> int: ...
    # Uploads no message sent, made before ``before``, deleted with their bytes: how many.
    async def purge_unsent_attachments(self, before: float) -> int: ...
