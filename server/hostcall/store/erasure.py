"""What erasing a conversation deletes, written once for both dialects.

A conversation leaves rows in every table below, keyed by its id; a rate or cost counter
names it inside its key (``LIMITER/<scope>/<agent>/<conversation>/…``, hostcall/counters.py),
and a lease names its runs and calls (``run:<id>``, ``call:<id>``). Erasing deletes them all,
leases first (they are found through the runs and calls), the conversation's own row last.
Model usage (``model_usage``: tokens and cost per step) is kept, detached: its rows lose the
conversation and run they named, so the agent's daily tokens and costs stay what they were,
and nothing in them leads back to the person. A table that gains a ``conversation_id``
column must be added here: tests/unit/test_person_data.py checks every table of the schema
for rows left behind.
"""

from __future__ import annotations

from hostcall.store.statements import contains

# In the order they are deleted from (model_usage: detached).
TABLES = (
    "leases",
    "messages",
    "calls",
    "call_apps",
    "grants",
    "runs",
    "events",
    "surface_streams",
    "surfaces",
    "audit",
    "feedback",
    "ratings",
    "handoffs",
    "attachment_blobs",
    "attachments",
    "model_usage",
    "quota_counters",
    "conversations",
)


def statements(mark: str) -> tuple[tuple[str, str, int], ...]:
    """Each table's DELETE, with ``mark`` for its parameters, and how many times it takes
    the conversation's id (``counter_pattern`` stands in for it in ``quota_counters``)."""
    by_conversation = {
        t: f"DELETE FROM {t} WHERE conversation_id = {mark}"
        for t in ("messages", "calls", "call_apps", "grants", "runs", "events", "surface_streams",
                  "surfaces", "audit", "feedback", "ratings", "handoffs", "attachments")
    }  # fmt: skip
    special = {
        "leases": (
            f"DELETE FROM leases WHERE key IN (SELECT 'run:' || id FROM runs"
            f" WHERE conversation_id = {mark}) OR key IN (SELECT 'call:' || id FROM calls"
            f" WHERE conversation_id = {mark})"
        ),
        "quota_counters": forget_counters(mark),
        # The bytes of the conversation's files, found through their rows (deleted next).
        "attachment_blobs": (
            "DELETE FROM attachment_blobs WHERE id IN"
            f" (SELECT id FROM attachments WHERE conversation_id = {mark})"
        ),
        "conversations": f"DELETE FROM conversations WHERE id = {mark}",
        "model_usage": (
            f"UPDATE model_usage SET conversation_id = '', run_id = ''"
            f" WHERE conversation_id = {mark}"
        ),
    }
    return tuple(
        (t, by_conversation.get(t) or special[t], 2 if t == "leases" else 1) for t in TABLES
    )


def forget_counters(mark: str) -> str:
    return f"DELETE FROM quota_counters WHERE key LIKE {mark} ESCAPE '\\'"


def counter_pattern(conversation_id: str) -> str:
    """A LIKE pattern for the counter keys that name this conversation."""
    return contains(f"/{conversation_id}/")


def parameters(table: str, conversation_id: str, times: int) -> tuple[str, ...]:
    value = counter_pattern(conversation_id) if table == "quota_counters" else conversation_id
    return (value,) * times


def stale_conversations(mark: str) -> str:
    """An agent's conversations last active before a time (``updated_at``: when a run last
    started in it, else its start; the index conversations_by_activity),
    none of whose runs is in progress (a run working or waiting for a call ends first)."""
    return (
        f"SELECT c.id FROM conversations c WHERE c.agent_id = {mark} AND c.updated_at < {mark}"
        " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.conversation_id = c.id"
        " AND r.status IN ('running', 'waiting'))"
        f" ORDER BY c.updated_at LIMIT {mark}"
    )
