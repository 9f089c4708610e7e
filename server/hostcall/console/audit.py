"""The console's audit log: every action a person takes in the console, stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hostcall.store.console_records import AuditEntry

# The actions the console records (the audit page translates them).
ACTIONS = (
    "login",
    "login.refused",
    "login.limited",
    "logout",
    "call.answer",
    "call.approve",
    "call.reject",
    "call.expire",
    "run.cancel",
    "conversation.take_over",
    "conversation.hand_back",
    "conversation.message",
    "agent.create",
    "agent.save",
    "agent.duplicate",
    "agent.disable",
    "agent.enable",
    "agent.rollback",
    # From ``hostcall users`` on the server (actor ``command line``).
    "user.add",
    "user.remove",
    "user.password",
    "user.role",
    # A person's data (hostcall/visitors/personal_data.py): from the console, and from the visitor
    # (actor ``visitor``) and the retention sweeper (actor ``retention``).
    "person.export",
    "person.erase",
    "conversation.delete",
    "conversations.expire",
)


class AuditLog(Protocol):
    """Where an entry goes: the store's ``Audit``, or the routes' ``AuditService``."""

    async def add_audit(self, entry: AuditEntry) -> AuditEntry: ...


async def record(
    store: AuditLog,
    clock: Callable[[], float],
    actor: str,
    action: str,
    *,
    conversation_id: str | None = None,
    call_id: str | None = None,
    agent_id: str | None = None,
    **details: Any,
) -> AuditEntry:
    assert action in ACTIONS, f"unknown audit action {action!r}"
    entry = AuditEntry(
        at=clock(),
        actor=actor,
        action=action,
        conversation_id=conversation_id,
        call_id=call_id,
        agent_id=agent_id,
        details=details,
    )
    return await store.add_audit(entry)
