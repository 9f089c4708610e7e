"""Rows to records, shared by every store (JSON columns are text in both databases)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hostcall import strictjson
from hostcall.store.console_records import (
    AgentVersion,
    AuditEntry,
    ConversationSummary,
    Feedback,
    Handoff,
    KnownPerson,
    PersonConversation,
    Rating,
    User,
)
from hostcall.store.records import (
    Attachment,
    AttachmentRef,
    Call,
    CallApp,
    CallState,
    Conversation,
    Run,
    RunStatus,
    StoredMessage,
    Surface,
)
from hostcall.visitors.visitor import Visitor

# The only run and call fields an update may change (guards the f-string SQL builders).
RUN_FIELDS = frozenset({"status", "step", "error"})
CALL_FIELDS = frozenset(
    {"input", "deadline", "route", "outcome", "delivered", "extra", "surface_id", "assignment"}
)
JSON_CALL_FIELDS = frozenset({"input", "outcome", "extra"})


def states_sql(states: Iterable[CallState | str]) -> str:
    """Call states as a SQL list, ``('dispatched','delivered')``, to inline in a statement.
    PostgreSQL: an array parameter (``state = ANY(%s)``) cost psycopg ~50 us to adapt, in
    Python, per statement (py-spy). Safe to inline: ``CallState`` refuses anything
    but its own values."""
    return "(" + ",".join(f"'{CallState(s).value}'" for s in states) + ")"


def dump(value: Any) -> str:
    # Strict: a non-finite number raises here and the unit rolls back, rather
    # than being stored as the non-JSON `NaN` that every later read would have to survive.
    return strictjson.dumps(value)


def load(text: str) -> Any:
    # Lenient: rows written before strict parsing may hold NaN or absurd nesting; they
    # read back as NaN (rendered null) or None, never as an exception.
    # Empty ones, without a parse (eleven Python calls each): most of a call's row as the
    # result's settling unit reads it back (its ``extra``, a tool's empty ``input``), and
    # the ``tool_calls`` of most messages of a step's history. A new one each time, as a
    # parse gives.
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return strictjson.loads_stored(text)


def call_values(call: Call) -> tuple[Any, ...]:
    """A new call's column values for both stores' INSERT: id, conversation_id, run_id, step,
    tool_name, state, input, arguments, deadline, route, outcome, delivered, extra,
    surface_id, assignment (sqlite3 stores a bool as 0 or 1)."""
    return (
        call.id,
        call.conversation_id,
        call.run_id,
        call.step,
        call.tool_name,
        call.state,
        dump(call.input),
        call.arguments,
        call.deadline,
        call.route,
        dump(call.outcome) if call.outcome is not None else None,
        call.delivered,
        dump(call.extra),
        call.surface_id,
        call.assignment,
    )


def message_values(message: StoredMessage) -> tuple[Any, ...]:
    """A message's column values for both stores' INSERT: id, conversation_id, run_id, role,
    text, tool_calls, tool_call_id, tool_name, interrupted, author, context, attachments."""
    return (
        message.id,
        message.conversation_id,
        message.run_id,
        message.role,
        message.text,
        dump(list(message.tool_calls)),
        message.tool_call_id,
        message.tool_name,
        message.interrupted,
        message.author,
        dump(message.context) if message.context is not None else None,
        dump([a.to_json() for a in message.attachments]) if message.attachments else None,
    )


def conversation(row: Mapping[str, Any]) -> Conversation:
    return Conversation(
        id=row["id"],
        agent_id=row["agent_id"],
        created_at=row["created_at"],
        locale=row["locale"],
        handled_tools=tuple(load(row["handled_tools"]) or ()),
        session_generation=int(row["session_generation"] or 0),
        person=row["person"],
        browser=row["browser"],
    )


def person_conversation(row: Mapping[str, Any]) -> PersonConversation:
    return PersonConversation(
        id=row["id"],
        title=row["title"] or "",
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def known_person(row: Mapping[str, Any]) -> KnownPerson:
    return KnownPerson(
        agent_id=row["agent_id"],
        person=row["person"],
        conversations=int(row["conversations"]),
        last_at=float(row["last_at"]),
    )


def summary(row: Mapping[str, Any]) -> ConversationSummary:
    """A row of the console's list (statements' ``conversation_summaries``)."""
    return ConversationSummary(
        conversation=conversation(row),
        run_status=RunStatus(row["run_status"]) if row["run_status"] else None,
        waiting_calls=int(row["waiting_calls"]),
        first_message=row["first_message"],
        handoff=row["handoff"],
        held_by=row["held_by"],
        feedback_up=int(row["feedback_up"]),
        feedback_down=int(row["feedback_down"]),
    )


def feedback(row: Mapping[str, Any]) -> Feedback:
    return Feedback(
        row["conversation_id"], row["message_id"], row["rating"], row["comment"], row["at"]
    )


def call_app_values(app: CallApp) -> tuple[Any, ...]:
    return (
        app.call_id, app.conversation_id, app.server, app.resource_uri, app.html,
        dump(app.meta), app.failed, dump(app.context) if app.context is not None else None,
        app.created_at,
    )  # fmt: skip


def call_app(row: Mapping[str, Any]) -> CallApp:
    meta = load(row["meta"])
    context = load(row["context"]) if row["context"] is not None else None
    return CallApp(
        call_id=row["call_id"],
        conversation_id=row["conversation_id"],
        server=row["server"],
        resource_uri=row["resource_uri"],
        html=row["html"],
        meta=meta if isinstance(meta, dict) else {},
        failed=row["failed"],
        context=context if isinstance(context, dict) else None,
        created_at=row["created_at"],
    )


def rating(row: Mapping[str, Any]) -> Rating:
    return Rating(row["conversation_id"], row["score"], row["remark"], row["at"])


def handoff(row: Mapping[str, Any]) -> Handoff:
    return Handoff(row["conversation_id"], row["state"], row["person"], row["since"])


def message(row: Mapping[str, Any]) -> StoredMessage:
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        run_id=row["run_id"],
        role=row["role"],
        text=row["text"],
        tool_calls=tuple(load(row["tool_calls"]) or ()),
        tool_call_id=row["tool_call_id"],
        tool_name=row["tool_name"],
        interrupted=bool(row["interrupted"]),
        author=row["author"],
        context=load(row["context"]) if row["context"] is not None else None,
        superseded_by=row["superseded_by"],
        attachments=attachment_refs(row["attachments"]),
    )


def attachment_refs(value: str | None) -> tuple[AttachmentRef, ...]:
    """A message's ``attachments`` column: JSON of ``AttachmentRef.to_json`` each, or NULL."""
    found = load(value) if value is not None else None
    return tuple(AttachmentRef(a["id"], a["name"], a["type"], a["size"]) for a in found or ())


def attachment(row: Mapping[str, Any]) -> Attachment:
    return Attachment(
        id=row["id"],
        conversation_id=row["conversation_id"],
        name=row["name"],
        type=row["type"],
        size=int(row["size"]),
        sha256=row["sha256"],
        created_at=float(row["created_at"]),
        message_id=row["message_id"],
    )


def messages(found: Iterable[Mapping[str, Any]] | None) -> tuple[StoredMessage, ...]:
    """Message rows, oldest first, as read or as PostgreSQL's ``json_agg`` of them (None for
    none): their JSON has the same values as the columns (text, booleans, integers)."""
    return tuple(message(r) for r in found or ())


def run(row: Mapping[str, Any], agent: Any) -> Run:
    """``agent``: the definition the row's ``agent_digest`` names (store/definitions.py)."""
    return Run(
        id=row["id"],
        conversation_id=row["conversation_id"],
        agent=agent,
        status=RunStatus(row["status"]),
        step=row["step"],
        error=load(row["error"]) if row["error"] else None,
        simulate=bool(row["simulate"]),
        agent_digest=row["agent_digest"],
        visitor=Visitor.from_json(load(row["identity"])) if row["identity"] else None,
    )


def call(row: Mapping[str, Any]) -> Call:
    return Call(
        id=row["id"],
        conversation_id=row["conversation_id"],
        run_id=row["run_id"],
        step=row["step"],
        tool_name=row["tool_name"],
        state=CallState(row["state"]),
        input=load(row["input"]),
        arguments=row["arguments"],
        deadline=row["deadline"],
        route=row["route"],
        outcome=load(row["outcome"]) if row["outcome"] else None,
        delivered=bool(row["delivered"]),
        extra=load(row["extra"]) or {},
        surface_id=row["surface_id"],
        assignment=row["assignment"],
    )


def surface(row: Mapping[str, Any]) -> Surface:
    return Surface(
        id=row["id"],
        conversation_id=row["conversation_id"],
        tools=tuple(load(row["tools"]) or ()),
        last_active=row["last_active"],
        streams=row["streams"],
        detached_at=row["detached_at"],
        left=bool(row["left_page"]),
        page_tools=tuple(load(row["page_tools"]) or ()),
    )


def run_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    assert set(changes) <= RUN_FIELDS, f"unknown run fields: {set(changes) - RUN_FIELDS}"
    return {k: dump(v) if k == "error" else v for k, v in changes.items()}


def call_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    assert set(changes) <= CALL_FIELDS, f"unknown call fields: {set(changes) - CALL_FIELDS}"
    return {k: dump(v) if k in JSON_CALL_FIELDS else v for k, v in changes.items()}


# ---- the console's rows --------------------------------------------------------------------


def user(row: Mapping[str, Any]) -> User:
    return User(row["name"], row["role"], row["password_hash"], row["created_at"])


def audit_values(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.at, entry.actor, entry.action, entry.conversation_id, entry.call_id,
            entry.agent_id, dump(entry.details))  # fmt: skip


def audit_entry(row: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(
        at=row["at"],
        actor=row["actor"],
        action=row["action"],
        conversation_id=row["conversation_id"],
        call_id=row["call_id"],
        agent_id=row["agent_id"],
        details=load(row["details"]),
        id=int(row["id"]),
    )


def agent_version(row: Mapping[str, Any]) -> AgentVersion:
    return AgentVersion(
        agent_id=row["agent_id"],
        version=row["version"],
        body=row["body"],
        author=row["author"],
        created_at=row["created_at"],
        note=row["note"],
    )
