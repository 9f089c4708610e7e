"""The statements both dialects send alike, written once.

Each is written with ``?`` for its parameters, SQLite's style; ``POSTGRES`` is the same set
with psycopg's ``%s``. What differs stays in each dialect's modules: ``INSERT OR IGNORE``
against ``ON CONFLICT DO NOTHING``, ``MAX`` against ``GREATEST``, ``IS`` against ``IS NOT
DISTINCT FROM``, SQLite's parameter lists against PostgreSQL's inlined states, and the
PostgreSQL store's statements that do in one round trip what SQLite does in several.
"""

from __future__ import annotations

from typing import Any

from hostcall.store import rows
from hostcall.store.console_records import TITLE_CHARS, ConversationQuery
from hostcall.store.records import OPEN_STATES

MESSAGE_COLUMNS = (
    "id, conversation_id, run_id, role, text, tool_calls, tool_call_id, tool_name, interrupted,"
    " author, context, attachments"
)
CALL_COLUMNS = (
    "id, conversation_id, run_id, step, tool_name, state, input, arguments, deadline, route,"
    " outcome, delivered, extra, surface_id, assignment"
)

# Runs no process works on although they could move: running with no lease (the process
# died between claiming and leasing, or before leases existed), or waiting with every call
# of the step settled (the process died between settling the last call and resuming).
_STALLED_RUNS = f"""
SELECT r.* FROM runs r
WHERE r.status IN ('running', 'waiting')
  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.key = 'run:' || r.id)
  AND (r.status = 'running' OR NOT EXISTS (
      SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.step = r.step
      AND c.state IN {rows.states_sql(OPEN_STATES)}))
ORDER BY r.pos
"""

# Where a conversation's window of turns begins: the ``pos`` of the person's message that
# opens it ({skip} of theirs are later), none if they wrote fewer. Read backwards on the
# index messages_by_conversation, so its cost follows the window, not the conversation.
WINDOW_START = (
    "SELECT u.pos FROM messages u WHERE u.conversation_id = {cid} AND u.role = 'user'"
    " AND u.superseded_by IS NULL ORDER BY u.pos DESC LIMIT 1 OFFSET {skip}"
)


def window_skip(turns: int | None) -> int:
    """WINDOW_START's ``skip`` for the last ``turns`` turns (None: every turn)."""
    return turns - 1 if turns is not None else 2**62


# One row per counter: a new window overwrites the old one's count (see add_to_counter).
_ADD_TO_COUNTER = """
INSERT INTO quota_counters (key, window_start, count) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    count = CASE WHEN quota_counters.window_start = excluded.window_start
                 THEN quota_counters.count + excluded.count ELSE excluded.count END,
    window_start = excluded.window_start
WHERE CASE WHEN quota_counters.window_start = excluded.window_start
           THEN quota_counters.count ELSE 0 END + excluded.count <= ?
"""

# The console's list of conversations: each with its latest run's status, how many of its
# calls wait for a person (a decision, or a form to be answered), and its first message.
_WAITING = (
    "(k.state = 'awaiting_confirmation'"
    " OR (k.state IN ('dispatched', 'delivered') AND k.route = 'form'))"
)
_SUMMARIES = f"""
SELECT c.*,
    (SELECT r.status FROM runs r WHERE r.conversation_id = c.id ORDER BY r.pos DESC LIMIT 1)
        AS run_status,
    (SELECT COUNT(*) FROM calls k WHERE k.conversation_id = c.id AND {_WAITING})
        AS waiting_calls,
    COALESCE((SELECT m.text FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user'
        ORDER BY m.pos LIMIT 1), '') AS first_message,
    h.state AS handoff, COALESCE(h.person, '') AS held_by,
    (SELECT COUNT(*) FROM feedback f WHERE f.conversation_id = c.id AND f.rating = 'up')
        AS feedback_up,
    (SELECT COUNT(*) FROM feedback f WHERE f.conversation_id = c.id AND f.rating = 'down')
        AS feedback_down
FROM conversations c LEFT JOIN handoffs h ON h.conversation_id = c.id
"""

# A person takes a conversation over unless another holds it (a queued one is taken).
_TAKE_OVER = """
INSERT INTO handoffs (conversation_id, state, person, since) VALUES (?, 'taken', ?, ?)
ON CONFLICT (conversation_id) DO UPDATE SET
    state = 'taken', person = excluded.person, since = excluded.since
WHERE handoffs.state = 'waiting'
"""


# A person's history, newest activity first (the index conversations_by_person); the
# title is the first user message, cut. Keyset pages: ``person_conversations_before``.
# A browser's anonymous history is the same list for ``c.browser = ? AND c.person IS NULL``
# (the index conversations_by_browser).
_OWNED_CONVERSATIONS = f"""
SELECT c.id, c.created_at, c.updated_at,
    (SELECT substr(m.text, 1, {TITLE_CHARS}) FROM messages m
        WHERE m.conversation_id = c.id AND m.role = 'user' ORDER BY m.pos LIMIT 1) AS title
FROM conversations c
WHERE c.agent_id = ? AND {{owner}}{{before}}
ORDER BY c.updated_at DESC, c.id DESC LIMIT ?
"""


# The signed-in people, the one written to last first; of one agent when the first two
# parameters name it ('' for every agent).
_KNOWN_PEOPLE = """
SELECT c.agent_id, c.person, COUNT(*) AS conversations, MAX(c.updated_at) AS last_at
FROM conversations c
WHERE c.person IS NOT NULL AND (? = '' OR c.agent_id = ?)
GROUP BY c.agent_id, c.person
ORDER BY last_at DESC, c.agent_id, c.person LIMIT ? OFFSET ?
"""


def contains(text: str) -> str:
    """A LIKE pattern for any text containing ``text`` as it is, escaped with a backslash
    (PostgreSQL's default escape; SQLite's statements say ``ESCAPE '\\'``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Statements:
    """The shared statements, each with ``mark`` for its parameters."""

    def __init__(self, mark: str) -> None:
        self.mark = mark

        def q(sql: str) -> str:
            # A literal % would be read by psycopg as the start of a placeholder.
            assert "%" not in sql, f"a shared statement with a % in it: {sql}"
            return sql.replace("?", mark)

        # ---- migrations
        self.applied_migrations = q("SELECT version FROM schema_migrations")
        self.schema_version = q("SELECT MAX(version) AS v FROM schema_migrations")

        # ---- conversations and sessions
        self.insert_conversation = q(
            "INSERT INTO conversations"
            " (id, agent_id, created_at, locale, handled_tools, person, updated_at, browser)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        # Adoption: an anonymous conversation becomes the person's; one already theirs stays.
        self.set_person = q(
            "UPDATE conversations SET person = ? WHERE id = ? AND (person IS NULL OR person = ?)"
        )
        self.touch_conversation = q(
            "UPDATE conversations SET updated_at = ? WHERE id = ? AND updated_at < ?"
        )
        self.conversation = q("SELECT * FROM conversations WHERE id = ?")
        self.set_handled_tools = q("UPDATE conversations SET handled_tools = ? WHERE id = ?")
        self.rotate_session = q(
            "UPDATE conversations SET session_generation = session_generation + 1"
            " WHERE id = ? AND session_generation = ?"
        )
        self.prune_tickets = q("DELETE FROM stream_tickets WHERE expires_at < ?")

        # ---- messages
        self.insert_message = q(
            f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.messages = q("SELECT * FROM messages WHERE conversation_id = ? ORDER BY pos")
        # The current branch only: an edit or a regeneration supersedes the messages from
        # the visitor's last one on (hostcall/services/branches.py); they stay, unread by
        # the model.
        self.current_messages = q(
            "SELECT * FROM messages WHERE conversation_id = ? AND superseded_by IS NULL"
            " ORDER BY pos"
        )
        self.supersede_messages = q(
            "UPDATE messages SET superseded_by = ? WHERE conversation_id = ?"
            " AND superseded_by IS NULL AND pos >= (SELECT f.pos FROM messages f WHERE f.id = ?)"
        )
        # The last turns only (parameters: the conversation twice, then the turns to skip
        # back, ``turns - 1``): everything from the person's ``turns``-th last message on, all
        # of it when there are fewer (hostcall/transcript.py ``recent_turns``, in SQL).
        self.recent_messages = q(
            "SELECT * FROM messages WHERE conversation_id = ? AND superseded_by IS NULL"
            f" AND pos >= COALESCE(({WINDOW_START.format(cid='?', skip='?')}), 0) ORDER BY pos"
        )

        # ---- events
        self.last_seq = q("SELECT last_seq FROM conversations WHERE id = ?")
        self.events_after = q(
            "SELECT seq, type, data FROM events WHERE conversation_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?"
        )
        # The events that say what a model reasoned before which message: a snapshot's
        # reasoning (hostcall/services/reasoning_log.py), without the answers' text deltas.
        self.reasoning_events_after = q(
            "SELECT seq, type, data FROM events WHERE conversation_id = ? AND seq > ?"
            " AND type IN ('REASONING_START', 'REASONING_MESSAGE_CONTENT',"
            " 'TEXT_MESSAGE_START', 'TOOL_CALL_START') ORDER BY seq LIMIT ?"
        )

        # ---- calls and grants
        self.insert_call = q(
            f"INSERT INTO calls ({CALL_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.call = q("SELECT * FROM calls WHERE id = ?")
        self.calls = q("SELECT * FROM calls WHERE conversation_id = ? ORDER BY pos")
        self.calls_of_step = q("SELECT * FROM calls WHERE run_id = ? AND step = ? ORDER BY pos")
        self.count_calls = q("SELECT COUNT(*) AS n FROM calls WHERE run_id = ? AND tool_name = ?")
        self.has_grant = q("SELECT 1 FROM grants WHERE conversation_id = ? AND tool_name = ?")

        # ---- runs
        self.run = q("SELECT * FROM runs WHERE id = ?")
        self.latest_run = q(
            "SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos DESC LIMIT 1"
        )
        self.runs = q("SELECT * FROM runs WHERE conversation_id = ? ORDER BY pos")
        self.runs_with_status = q("SELECT * FROM runs WHERE status = ? ORDER BY pos")
        self.claim_run = q("UPDATE runs SET status = ? WHERE id = ? AND status = ? RETURNING *")
        self.stalled_runs = q(_STALLED_RUNS)

        # ---- leases and counters
        self.take_lease = q(
            "INSERT INTO leases (key, owner, until) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until"
            " WHERE leases.owner = excluded.owner OR leases.until < ?"
        )
        self.keep_lease = q("UPDATE leases SET until = ? WHERE key = ? AND owner = ?")
        # Not a turn (``turn:<name>``, try_singleton): its holder renews it by doing its
        # job, so a process whose job stopped (frozen, its event loop stuck) loses it.
        self.renew_leases = q(
            "UPDATE leases SET until = ? WHERE owner = ? AND substr(key, 1, 5) <> 'turn:'"
        )
        self.release_lease = q("DELETE FROM leases WHERE key = ? AND owner = ?")
        self.break_lease = q("DELETE FROM leases WHERE key = ?")
        self.expired_leases = q(
            "SELECT key FROM leases WHERE until < ? AND owner <> ? ORDER BY until"
        )
        self.add_to_counter = q(_ADD_TO_COUNTER)
        self.counted = q("SELECT count FROM quota_counters WHERE key = ? AND window_start = ?")

        # ---- surfaces
        self.save_surface_tools = q(
            "UPDATE surfaces SET tools = ?, page_tools = ? WHERE conversation_id = ? AND id = ?"
        )
        # Whether a conversation has a call a surface's tools may take (``Rehoming.rehome``).
        self.calls_to_rehome = q(
            "SELECT EXISTS (SELECT 1 FROM calls WHERE conversation_id = ?"
            " AND state IN ('dispatched','delivered')) AS open"
        )
        self.attach_surface = q(
            "UPDATE surfaces SET streams = streams + 1, detached_at = NULL, last_active = ?"
            " WHERE conversation_id = ? AND id = ?"
        )
        self.count_stream = q(
            "INSERT INTO surface_streams (conversation_id, surface_id, owner, streams)"
            " VALUES (?, ?, ?, 1) ON CONFLICT (conversation_id, surface_id, owner)"
            " DO UPDATE SET streams = surface_streams.streams + 1"
        )
        self.uncount_stream = q(
            "UPDATE surface_streams SET streams = streams - 1"
            " WHERE conversation_id = ? AND surface_id = ? AND owner = ? AND streams > 0"
        )
        self.forget_streams = q(
            "DELETE FROM surface_streams"
            " WHERE conversation_id = ? AND surface_id = ? AND owner = ? AND streams <= 0"
        )
        self.surface = q("SELECT * FROM surfaces WHERE conversation_id = ? AND id = ?")
        self.surfaces = q(
            "SELECT * FROM surfaces WHERE conversation_id = ? ORDER BY last_active DESC"
        )

        # ---- the console: users, audit, agent versions, the list of conversations
        self.user = q("SELECT * FROM users WHERE name = ?")
        self.users = q("SELECT * FROM users ORDER BY name")
        self.remove_user = q("DELETE FROM users WHERE name = ?")
        self.set_user_role = q("UPDATE users SET role = ? WHERE name = ?")
        self.set_user_password = q("UPDATE users SET password_hash = ? WHERE name = ?")
        self.end_user_sessions = q("DELETE FROM console_sessions WHERE user_name = ?")
        self.drop_expired_sessions = q("DELETE FROM console_sessions WHERE expires_at <= ?")
        self.insert_session = q(
            "INSERT INTO console_sessions (digest, user_name, created_at, expires_at)"
            " VALUES (?, ?, ?, ?)"
        )
        self.session_user = q(
            "SELECT user_name FROM console_sessions WHERE digest = ? AND expires_at > ?"
        )
        self.end_session = q("DELETE FROM console_sessions WHERE digest = ?")
        self.insert_audit = q(
            "INSERT INTO audit (at, actor, action, conversation_id, call_id, agent_id, details)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        self.next_agent_version = q(
            "SELECT COALESCE(MAX(version), 0) + 1 AS next FROM agent_versions WHERE agent_id = ?"
        )
        self.insert_agent_version = q(
            "INSERT INTO agent_versions (agent_id, version, body, author, created_at, note)"
            " VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.agent_versions = q(
            "SELECT * FROM agent_versions WHERE agent_id = ? ORDER BY version DESC"
        )
        self.agent_version = q("SELECT * FROM agent_versions WHERE agent_id = ? AND version = ?")
        self.conversation_summaries = q(_SUMMARIES)
        keyset = " AND (c.updated_at < ? OR (c.updated_at = ? AND c.id < ?))"
        person = _OWNED_CONVERSATIONS.replace("{owner}", "c.person = ?")
        self.person_conversations = q(person.format(before=""))
        self.person_conversations_before = q(person.format(before=keyset))
        self.known_people = q(_KNOWN_PEOPLE)
        browser = _OWNED_CONVERSATIONS.replace("{owner}", "c.browser = ? AND c.person IS NULL")
        self.browser_conversations = q(browser.format(before=""))
        self.browser_conversations_before = q(browser.format(before=keyset))

        # ---- feedback and human handoff
        # A rating sent again changes the comment only (and is no new rating): the first
        # statement; a new rating or a changed one, the second, which changes a row only
        # then (two at once with the same new rating: one row is inserted, the other's
        # conditional update finds nothing to change).
        self.restate_feedback = q(
            "UPDATE feedback SET comment = ?, at = ? WHERE message_id = ? AND rating = ?"
        )
        self.save_feedback = q(
            "INSERT INTO feedback (message_id, conversation_id, rating, comment, at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id) DO UPDATE SET"
            " rating = excluded.rating, comment = excluded.comment, at = excluded.at"
            " WHERE feedback.rating <> excluded.rating"
        )
        self.feedback_of = q("SELECT * FROM feedback WHERE conversation_id = ? ORDER BY at")
        # A conversation's rating: the first stands (a second is told what it is).
        self.save_rating = q(
            "INSERT INTO ratings (conversation_id, score, remark, at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (conversation_id) DO NOTHING"
        )
        self.rating_of = q("SELECT * FROM ratings WHERE conversation_id = ?")
        self.handoff = q("SELECT * FROM handoffs WHERE conversation_id = ?")
        self.request_person = q(
            "INSERT INTO handoffs (conversation_id, state, person, since)"
            " VALUES (?, 'waiting', '', ?) ON CONFLICT (conversation_id) DO NOTHING"
        )
        self.take_over = q(_TAKE_OVER)
        self.hand_back = q(
            "DELETE FROM handoffs WHERE conversation_id = ? AND state = 'taken' AND person = ?"
        )

    def summary_filters(self, query: ConversationQuery) -> tuple[list[str], list[Any]]:
        """The console list's filters but its text search (LIKE and ILIKE differ): the
        conditions on the summaries' columns, and their parameters."""
        where: list[str] = ["1 = 1"]
        args: list[Any] = []
        for column, value in (("agent_id", query.agent_id),
                              ("run_status", query.run_status and query.run_status.value),
                              ("person", query.person), ("handoff", query.handoff)):  # fmt: skip
            if value is not None:
                where.append(f"{column} = {self.mark}")
                args.append(value)
        if query.waiting:
            where.append("waiting_calls > 0")
        if query.feedback in ("up", "down"):
            where.append(f"feedback_{query.feedback} > 0")
        return where, args

    def audit_page(
        self, limit: int, before: int | None, conversation_id: str | None, agent_id: str | None
    ) -> tuple[str, tuple[Any, ...]]:
        """The audit log's newest entries, filtered: the statement and its parameters."""
        where, args = ["1 = 1"], []
        for column, value in (("id <", before), ("conversation_id =", conversation_id),
                              ("agent_id =", agent_id)):  # fmt: skip
            if value is not None:
                where.append(f"{column} {self.mark}")
                args.append(value)
        sql = f"SELECT * FROM audit WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT {self.mark}"
        return sql, (*args, limit)


SQLITE = Statements("?")
POSTGRES = Statements("%s")
