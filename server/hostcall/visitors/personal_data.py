"""A person's data: what the store holds of a set of conversations, exported as one JSON
document, or erased whole with an audit entry saying who asked (docs/console.md "A
person's data").

The set is the caller's to choose: a person's conversations (``Conversation.person``), one
browser's, or those an agent's retention lets go (hostcall/retention.py). Erasing deletes
every row the conversations left (hostcall/store/erasure.py lists the tables), their audit
entries included, in one transaction, and adds one audit entry that counts what went and
names none of it but the person it was asked for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hostcall.errors import Conflict
from hostcall.protocol.codes import ErrorCode
from hostcall.store.console_records import AuditEntry
from hostcall.store.interfaces import (
    Attachments,
    Audit,
    CallApps,
    Calls,
    Conversations,
    Database,
    Erasure,
    Events,
    Feedbacks,
    Messages,
    Runs,
)
from hostcall.store.records import RunStatus

# The version of the export document's shape; a reader checks it.
EXPORT_FORMAT = 1
# Events read per round trip while exporting one conversation.
EVENT_PAGE = 1000
# A person's conversations read per round trip.
PERSON_PAGE = 500
# The audit log's actions for a person's data (the console's audit page names them).
EXPORT_ACTION = "person.export"
ERASE_ACTION = "person.erase"


class ExportReads(
    Conversations, Events, Messages, Runs, Calls, CallApps, Feedbacks, Attachments, Protocol
):
    """Everything an export reads of a conversation."""


async def _app_of(store: CallApps, call_id: str) -> dict[str, Any]:
    app = await store.get_call_app(call_id)
    if app is None:
        return {}
    meta = {"server": app.server, "resourceUri": app.resource_uri, "failed": app.failed}
    return {"app": {**meta, "context": app.context}}


class AuditedExport(ExportReads, Audit, Protocol):
    """An export, and the audit entry that says who took it."""


class ErasureWrites(Database, Erasure, Audit, Protocol):
    """An erasure and its audit entry, in one transaction."""


class PersonErasure(Conversations, Runs, ErasureWrites, Protocol):
    """An erasure of a person's conversations, found by name, refused while one runs."""


@dataclass(frozen=True, slots=True)
class Erased:
    """What an erasure deleted: how many conversations, and the rows per table."""

    conversations: int
    rows: dict[str, int] = field(default_factory=dict)
    # The conversations asked for (their counters outside the store: Quotas.forget).
    ids: tuple[str, ...] = ()


async def person_conversations(store: Conversations, agent_id: str, person: str) -> list[str]:
    """Every conversation of ``person`` with the agent, last written in first."""
    found: list[str] = []
    before: tuple[float, str] | None = None
    while True:
        page = await store.person_conversations(agent_id, person, limit=PERSON_PAGE, before=before)
        found += [c.id for c in page]
        if len(page) < PERSON_PAGE:
            return found
        before = (page[-1].updated_at, page[-1].id)


async def export_person(
    store: AuditedExport,
    agent_id: str,
    person: str,
    *,
    actor: str,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """All of a person's data with the agent, as one JSON document; the export is audited."""
    document = await export(
        store, await person_conversations(store, agent_id, person), subject=person
    )
    entry = AuditEntry(
        clock(), actor, EXPORT_ACTION, agent_id=agent_id,
        details={"person": person, "conversations": len(document["conversations"])},
    )  # fmt: skip
    await store.add_audit(entry)
    return {**document, "agentId": agent_id}


async def refuse_running(store: Runs, conversation_ids: Sequence[str]) -> None:
    """Refuse to erase while the agent is answering in one of the conversations: its run
    would go on writing to it after the erasure. (A run waiting for a call writes nothing
    until the call is answered, and that conversation is gone by then.)"""
    for conversation_id in conversation_ids:
        run = await store.latest_run(conversation_id)
        if run is not None and run.status is RunStatus.RUNNING:
            raise Conflict(
                f"run {run.id} is still running in conversation {conversation_id}; try again "
                "once it has finished; nothing was erased",
                code=ErrorCode.RUN_IN_PROGRESS,
                runId=run.id,
                conversationId=conversation_id,
            )


async def erase_person(
    store: PersonErasure,
    agent_id: str,
    person: str,
    *,
    actor: str,
    clock: Callable[[], float] = time.time,
) -> Erased:
    """Erase all of a person's data with the agent, audited; refused (nothing erased) while
    a run of theirs is running."""
    ids = await person_conversations(store, agent_id, person)
    await refuse_running(store, ids)
    async with store.transaction():
        # The person's own limits count under their name (counters naming a conversation
        # go with it).
        counters = await store.forget_counters(person)
        erased = await erase(
            store, ids, actor=actor, action=ERASE_ACTION, agent_id=agent_id,
            details={"person": person, "personCounters": counters}, clock=clock,
        )  # fmt: skip
    return erased


async def export(
    store: ExportReads, conversation_ids: Sequence[str], *, subject: str
) -> dict[str, Any]:
    """Everything the store holds of these conversations, as JSON-ready values."""
    conversations = []
    for conversation_id in conversation_ids:
        conversation = await store.get_conversation(conversation_id)
        if conversation is None:  # erased meanwhile
            continue
        events = []
        after = 0
        while page := await store.events_after(conversation_id, after, EVENT_PAGE):
            events += [{"seq": e.seq, "name": e.name, "event": json.loads(e.encoded)} for e in page]
            after = page[-1].seq
        rating = await store.rating_of(conversation_id)
        conversations.append(
            {
                "id": conversation.id,
                "agentId": conversation.agent_id,
                "createdAt": conversation.created_at,
                "locale": conversation.locale,
                "messages": [
                    {
                        "id": m.id,
                        "runId": m.run_id,
                        "role": m.role,
                        "text": m.text,
                        "toolCalls": list(m.tool_calls),
                        "toolCallId": m.tool_call_id,
                        "toolName": m.tool_name,
                        # The page's context a visitor's message was sent with.
                        **({"context": m.context} if m.context is not None else {}),
                        # An old branch's: the run of the edit or regeneration that replaced it.
                        **({"supersededBy": m.superseded_by} if m.superseded_by else {}),
                        # The files it sent (listed below, under ``attachments``).
                        **({"attachments": [a.id for a in m.attachments]} if m.attachments else {}),
                    }
                    for m in await store.list_messages(conversation_id)
                ],
                "runs": [
                    {"id": r.id, "status": r.status.value, "error": r.error}
                    for r in await store.list_runs(conversation_id)
                ],
                "calls": [
                    {
                        "id": c.id,
                        "runId": c.run_id,
                        "toolName": c.tool_name,
                        "state": c.state.value,
                        "input": c.input,
                        "outcome": c.outcome,
                        # Its MCP App view, as metadata: the server's page itself is not
                        # the person's data.
                        **await _app_of(store, c.id),
                    }
                    for c in await store.list_calls(conversation_id)
                ],
                "events": events,
                # The visitor's ratings: of replies, and of the whole conversation (or null).
                "feedback": [
                    {
                        "messageId": f.message_id,
                        "rating": f.rating,
                        "comment": f.comment,
                        "at": f.at,
                    }
                    for f in await store.feedback_of(conversation_id)
                ],
                "rating": rating
                and {"score": rating.score, "remark": rating.remark, "at": rating.at},
                # The visitor's files: what they were and their digest, not their bytes.
                "attachments": [
                    {
                        "id": a.id,
                        "messageId": a.message_id,
                        "name": a.name,
                        "type": a.type,
                        "size": a.size,
                        "sha256": a.sha256,
                        "createdAt": a.created_at,
                    }
                    for a in await store.conversation_attachments(conversation_id)
                ],
            }
        )
    return {"format": EXPORT_FORMAT, "subject": subject, "conversations": conversations}


async def erase(
    store: ErasureWrites,
    conversation_ids: Sequence[str],
    *,
    actor: str,
    action: str,
    agent_id: str | None,
    details: dict[str, Any],
    clock: Callable[[], float] = time.time,
) -> Erased:
    """Delete the conversations whole, and audit it, in one transaction."""
    rows: dict[str, int] = {}
    async with store.transaction():
        for conversation_id in conversation_ids:
            for table, n in (await store.erase_conversation(conversation_id)).items():
                rows[table] = rows.get(table, 0) + n
        erased = Erased(rows.get("conversations", 0), rows, tuple(conversation_ids))
        entry = AuditEntry(
            clock(), actor, action, agent_id=agent_id,
            details={**details, "conversations": erased.conversations, "rows": rows},
        )  # fmt: skip
        await store.note_audit(entry)
    return erased
