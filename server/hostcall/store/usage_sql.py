"""The model usage table (hostcall/store/interfaces.py ``ModelUsage``): its schema in each
dialect and the statements both send alike, written once with ``?`` (``for_postgres``
gives psycopg's ``%s``)."""

from __future__ import annotations

from typing import Any

from hostcall.store.console_records import UsageRecord, UsageTotal

# No primary key of its own: nothing looks a row up alone. Read by conversation (its
# page, and a run's totals within it) and by day (the daily totals).
SQLITE_SCHEMA = """
CREATE TABLE model_usage (
    at REAL NOT NULL, day TEXT NOT NULL, agent_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
    run_id TEXT NOT NULL, step INTEGER NOT NULL, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, source TEXT NOT NULL,
    cost REAL, seconds REAL NOT NULL
);
CREATE INDEX model_usage_by_conversation ON model_usage (conversation_id, run_id);
CREATE INDEX model_usage_by_day ON model_usage (day, agent_id);
"""
POSTGRES_SCHEMA = """
CREATE TABLE model_usage (
    at DOUBLE PRECISION NOT NULL, day TEXT NOT NULL, agent_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    model TEXT NOT NULL, input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
    source TEXT NOT NULL, cost DOUBLE PRECISION, seconds DOUBLE PRECISION NOT NULL
);
CREATE INDEX model_usage_by_conversation ON model_usage (conversation_id, run_id);
CREATE INDEX model_usage_by_day ON model_usage (day, agent_id);
"""

INSERT = (
    "INSERT INTO model_usage (at, day, agent_id, conversation_id, run_id, step, model,"
    " input_tokens, output_tokens, source, cost, seconds)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_TOTALS = """
SELECT {key} AS key, agent_id, SUM(input_tokens) AS input_tokens,
    SUM(output_tokens) AS output_tokens, SUM(cost) AS cost, COUNT(*) AS steps,
    SUM(CASE WHEN source = 'estimate' THEN 1 ELSE 0 END) AS estimated,
    MIN(at) AS first_at, MAX(at) AS last_at
FROM model_usage WHERE {where} GROUP BY {key}, agent_id
"""
BY_DAY = _TOTALS.format(key="day", where="day >= ?") + " ORDER BY day DESC, agent_id"
BY_CONVERSATION = (
    _TOTALS.format(key="conversation_id", where="at >= ?")
    + " ORDER BY COALESCE(SUM(cost), 0) DESC, SUM(input_tokens + output_tokens) DESC,"
    " conversation_id LIMIT ?"
)
OF_CONVERSATION = _TOTALS.format(key="conversation_id", where="conversation_id = ?")
OF_RUN = _TOTALS.format(key="run_id", where="conversation_id = ? AND run_id = ?")


# The same row as INSERT ... SELECT, which can take a condition (``{if_fenced}``: see
# hostcall/store/postgres/held.py HeldWrite) and say whether it was made.
INSERT_IF = (
    "INSERT INTO model_usage (at, day, agent_id, conversation_id, run_id, step, model,"
    " input_tokens, output_tokens, source, cost, seconds)"
    " SELECT ?, ?, ?, ?, ?, ?, ?, ?::bigint, ?::bigint, ?, ?::double precision,"
    " ?::double precision WHERE TRUE{if_fenced} RETURNING 1"
)


def for_postgres(sql: str) -> str:
    return sql.replace("?", "%s")


def values(record: UsageRecord) -> tuple[Any, ...]:
    r = record
    return (r.at, r.day, r.agent_id, r.conversation_id, r.run_id, r.step, r.model,
            r.input_tokens, r.output_tokens, r.source, r.cost, r.seconds)  # fmt: skip


def total(row: Any) -> UsageTotal:
    """A totals row (SQLite's tuple-like or psycopg's dict-like, both by name)."""
    cost = row["cost"]
    return UsageTotal(
        key=str(row["key"]),
        agent_id=str(row["agent_id"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        cost=None if cost is None else float(cost),
        steps=int(row["steps"]),
        estimated=int(row["estimated"]),
        first_at=float(row["first_at"]),
        last_at=float(row["last_at"]),
    )
