"""A store composed of its parts: one object per aggregate (or per few that share tables),
each holding its dialect's statements on one shared connection helper, and this facade,
which hands each of the aggregates' methods over to the part that holds it. Consumers
still take one object and name their slice of it (hostcall/store/interfaces.py); a
dialect builds its parts and says how its database is opened, probed and closed
(``Database``).

A forwarded method is the part's own bound method, not a wrapper (no coroutine more per
call): ``forward`` gives it the protocol method's type, so mypy checks every line below
against the aggregate it names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from hostcall.store.interfaces import (
    Accounts,
    AgentVersions,
    Attachments,
    Audit,
    CallApps,
    Calls,
    Conversations,
    Erasure,
    Events,
    Feedbacks,
    Handoffs,
    Leases,
    Messages,
    ModelUsage,
    QuotaCounters,
    Runs,
    Sessions,
    Surfaces,
)

P = ParamSpec("P")
R = TypeVar("R")


class _Forwarded:
    """A method read from one of the instance's parts (the attribute ``part``)."""

    def __init__(self, part: str, method: Callable[..., Any]) -> None:
        self.part = part
        self.method = method.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        # At import: a misspelt part, or a method forwarded under another's name, fails here.
        assert self.part in owner.__annotations__, f"{owner.__name__} has no part {self.part}"
        assert name == self.method, f"{name} forwarded to {self.method}"

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        bound = getattr(getattr(instance, self.part), self.method)
        # Kept on the instance, which a descriptor without ``__set__`` gives way to: the
        # next read is a plain attribute (a store method is called several times on every
        # answer's round trip). A store's parts are built with it and never replaced.
        vars(instance)[self.method] = bound
        return bound


def forward(part: str, method: Callable[P, R]) -> Callable[P, R]:
    """``method`` of the part held as attribute ``part``, typed as ``method`` itself."""
    return cast("Callable[P, R]", _Forwarded(part, method))


class ConversationPart(Conversations, Sessions, Messages, Protocol):
    """Conversations, their sessions and their messages: one part (they share rows)."""


class CoordinationPart(Leases, QuotaCounters, Protocol):
    """Leases, the cluster's turns and the limits' counters."""


class ConsolePart(Accounts, Audit, AgentVersions, Protocol):
    """The console's users and sessions, its audit log, the designer's agent versions."""


class PeoplePart(Feedbacks, Handoffs, Protocol):
    """Visitors' ratings, and the conversations the team is asked for or holds."""


class ComposedStore(
    Conversations,
    Sessions,
    Messages,
    Runs,
    Calls,
    Surfaces,
    Events,
    Leases,
    QuotaCounters,
    Accounts,
    Audit,
    AgentVersions,
    ModelUsage,
    Erasure,
    Feedbacks,
    Handoffs,
    Attachments,
    CallApps,
):
    """Every aggregate but ``Database``, each method the part's that holds it. A dialect
    sets the parts in its ``__init__``."""

    conversations: ConversationPart
    runs: Runs
    calls: Calls
    surfaces: Surfaces
    events: Events
    coordination: CoordinationPart
    console: ConsolePart
    usage: ModelUsage
    erasure: Erasure
    people: PeoplePart
    attachments: Attachments
    apps: CallApps

    create_conversation = forward("conversations", Conversations.create_conversation)
    get_conversation = forward("conversations", Conversations.get_conversation)
    set_handled_tools = forward("conversations", Conversations.set_handled_tools)
    list_conversations = forward("conversations", Conversations.list_conversations)
    set_person = forward("conversations", Conversations.set_person)
    touch_conversation = forward("conversations", Conversations.touch_conversation)
    person_conversations = forward("conversations", Conversations.person_conversations)
    known_people = forward("conversations", Conversations.known_people)
    browser_conversations = forward("conversations", Conversations.browser_conversations)

    rotate_session = forward("conversations", Sessions.rotate_session)
    consume_ticket = forward("conversations", Sessions.consume_ticket)
    open_stream = forward("conversations", Sessions.open_stream)

    add_message = forward("conversations", Messages.add_message)
    list_messages = forward("conversations", Messages.list_messages)
    recent_messages = forward("conversations", Messages.recent_messages)
    supersede_messages = forward("conversations", Messages.supersede_messages)

    create_run = forward("runs", Runs.create_run)
    create_run_alone = forward("runs", Runs.create_run_alone)
    get_run = forward("runs", Runs.get_run)
    latest_run = forward("runs", Runs.latest_run)
    list_runs = forward("runs", Runs.list_runs)
    runs_with_status = forward("runs", Runs.runs_with_status)
    stalled_runs = forward("runs", Runs.stalled_runs)
    claim_ready_run = forward("runs", Runs.claim_ready_run)
    update_run = forward("runs", Runs.update_run)
    update_run_leased = forward("runs", Runs.update_run_leased)
    claim_run = forward("runs", Runs.claim_run)

    add_call = forward("calls", Calls.add_call)
    get_call = forward("calls", Calls.get_call)
    list_calls = forward("calls", Calls.list_calls)
    calls_of_step = forward("calls", Calls.calls_of_step)
    due_calls = forward("calls", Calls.due_calls)
    count_calls = forward("calls", Calls.count_calls)
    calls_in_states = forward("calls", Calls.calls_in_states)
    transition_call = forward("calls", Calls.transition_call)
    add_grant = forward("calls", Calls.add_grant)
    has_grant = forward("calls", Calls.has_grant)

    save_surface_tools = forward("surfaces", Surfaces.save_surface_tools)
    attach_surface = forward("surfaces", Surfaces.attach_surface)
    detach_surface = forward("surfaces", Surfaces.detach_surface)
    drop_streams = forward("surfaces", Surfaces.drop_streams)
    leave_surface = forward("surfaces", Surfaces.leave_surface)
    touch_surface = forward("surfaces", Surfaces.touch_surface)
    get_surface = forward("surfaces", Surfaces.get_surface)
    list_surfaces = forward("surfaces", Surfaces.list_surfaces)
    conversation_with_surfaces = forward("surfaces", Surfaces.conversation_with_surfaces)
    reset_surfaces = forward("surfaces", Surfaces.reset_surfaces)

    append_event = forward("events", Events.append_event)
    append_events = forward("events", Events.append_events)
    events_after = forward("events", Events.events_after)
    reasoning_events_after = forward("events", Events.reasoning_events_after)
    last_seq = forward("events", Events.last_seq)

    take_lease = forward("coordination", Leases.take_lease)
    keep_lease = forward("coordination", Leases.keep_lease)
    renew_leases = forward("coordination", Leases.renew_leases)
    release_lease = forward("coordination", Leases.release_lease)
    break_lease = forward("coordination", Leases.break_lease)
    expired_leases = forward("coordination", Leases.expired_leases)
    try_singleton = forward("coordination", Leases.try_singleton)

    add_to_counter = forward("coordination", QuotaCounters.add_to_counter)
    counted = forward("coordination", QuotaCounters.counted)

    add_user = forward("console", Accounts.add_user)
    get_user = forward("console", Accounts.get_user)
    list_users = forward("console", Accounts.list_users)
    remove_user = forward("console", Accounts.remove_user)
    set_user_role = forward("console", Accounts.set_user_role)
    set_user_password = forward("console", Accounts.set_user_password)
    add_session = forward("console", Accounts.add_session)
    session_user = forward("console", Accounts.session_user)
    end_session = forward("console", Accounts.end_session)

    add_audit = forward("console", Audit.add_audit)
    note_audit = forward("console", Audit.note_audit)
    list_audit = forward("console", Audit.list_audit)

    add_agent_version = forward("console", AgentVersions.add_agent_version)
    list_agent_versions = forward("console", AgentVersions.list_agent_versions)
    get_agent_version = forward("console", AgentVersions.get_agent_version)

    add_usage = forward("usage", ModelUsage.add_usage)
    usage_by_day = forward("usage", ModelUsage.usage_by_day)
    usage_by_conversation = forward("usage", ModelUsage.usage_by_conversation)
    usage_of_conversation = forward("usage", ModelUsage.usage_of_conversation)
    usage_of_run = forward("usage", ModelUsage.usage_of_run)

    erase_conversation = forward("erasure", Erasure.erase_conversation)
    forget_counters = forward("erasure", Erasure.forget_counters)
    stale_conversations = forward("erasure", Erasure.stale_conversations)

    save_feedback = forward("people", Feedbacks.save_feedback)
    feedback_of = forward("people", Feedbacks.feedback_of)
    save_rating = forward("people", Feedbacks.save_rating)
    rating_of = forward("people", Feedbacks.rating_of)

    get_handoff = forward("people", Handoffs.get_handoff)
    request_person = forward("people", Handoffs.request_person)
    take_over = forward("people", Handoffs.take_over)
    hand_back = forward("people", Handoffs.hand_back)

    add_attachment = forward("attachments", Attachments.add_attachment)
    get_attachment = forward("attachments", Attachments.get_attachment)
    attachment_bytes = forward("attachments", Attachments.attachment_bytes)
    conversation_attachments = forward("attachments", Attachments.conversation_attachments)
    claim_attachments = forward("attachments", Attachments.claim_attachments)
    purge_unsent_attachments = forward("attachments", Attachments.purge_unsent_attachments)
    add_call_app = forward("apps", CallApps.add_call_app)
    get_call_app = forward("apps", CallApps.get_call_app)
    set_app_context = forward("apps", CallApps.set_app_context)
    app_contexts = forward("apps", CallApps.app_contexts)
