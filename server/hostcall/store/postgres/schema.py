"""The PostgreSQL store's schema, as numbered migrations (hostcall/store/migrations.py).

Changing a table means a new migration at the end, never an edit of an applied one.
"""

from __future__ import annotations

from hostcall.store import attachment_sql, usage_sql
from hostcall.store.migrations import Migration
from hostcall.store.postgres.apps import APPS_SCHEMA
from hostcall.store.postgres.console import CONSOLE_SCHEMA, SESSIONS_SCHEMA
from hostcall.store.postgres.people import PEOPLE_SCHEMA, RATINGS_SCHEMA
from hostcall.store.postgres.surfaces import (
    PAGE_TOOLS_SCHEMA,
    SURFACE_STREAMS_SCHEMA,
    SURFACES_SCHEMA,
)

MIGRATIONS = (
    Migration(1, "initial", """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    locale TEXT NOT NULL DEFAULT '', handled_tools TEXT NOT NULL DEFAULT '[]',
    last_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE messages (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,
    text TEXT NOT NULL, tool_calls TEXT NOT NULL, tool_call_id TEXT, tool_name TEXT
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, pos);
CREATE TABLE runs (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, agent TEXT NOT NULL, status TEXT NOT NULL,
    step INTEGER NOT NULL, error TEXT, simulate BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX runs_by_conversation ON runs (conversation_id, pos);
CREATE INDEX runs_by_status ON runs (status);
CREATE TABLE calls (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    tool_name TEXT NOT NULL, state TEXT NOT NULL, input TEXT NOT NULL, arguments TEXT NOT NULL,
    deadline DOUBLE PRECISION NOT NULL, route TEXT NOT NULL, outcome TEXT,
    delivered BOOLEAN NOT NULL, extra TEXT NOT NULL
);
CREATE INDEX calls_by_run ON calls (run_id, step);
CREATE INDEX calls_open ON calls (state, deadline);
CREATE TABLE grants (
    conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL, call_id TEXT NOT NULL,
    PRIMARY KEY (conversation_id, tool_name)
);
CREATE TABLE events (
    conversation_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, until DOUBLE PRECISION NOT NULL);
CREATE INDEX leases_by_until ON leases (until);
"""),
    Migration(2, "console", CONSOLE_SCHEMA),
    # Single-use stream tickets, and a table /healthz writes to (and rolls back).
    Migration(3, "tickets", """
CREATE TABLE stream_tickets (nonce TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL);
CREATE TABLE probe (at DOUBLE PRECISION);
"""),
    # Text streamed before a run failed is kept, marked as interrupted.
    Migration(4, "interrupted messages", """
ALTER TABLE messages ADD COLUMN interrupted BOOLEAN NOT NULL DEFAULT FALSE;
"""),
    Migration(5, "surfaces", SURFACES_SCHEMA),
    # Session generations (a resumed conversation refuses its older tokens).
    Migration(6, "session generations", """
ALTER TABLE conversations ADD COLUMN session_generation BIGINT NOT NULL DEFAULT 0;
"""),
    # Surfaces' streams counted per process, dropped when a process dies.
    Migration(7, "surface streams", SURFACE_STREAMS_SCHEMA),
    # Rate and cost limits counted here, shared by every process (hostcall/counters.py).
    Migration(8, "quota counters", """
CREATE TABLE quota_counters (key TEXT PRIMARY KEY, window_start DOUBLE PRECISION NOT NULL,
    count BIGINT NOT NULL);
"""),
    # A run stores its agent definition by reference (hostcall/store/definitions.py);
    # runs' copies move to one row per distinct copy, keyed by its first run.
    Migration(9, "agent definitions", """
CREATE TABLE agent_definitions (digest TEXT PRIMARY KEY, definition TEXT NOT NULL);
INSERT INTO agent_definitions (digest, definition)
    SELECT 'migrated:' || MIN(id), agent FROM runs GROUP BY agent;
ALTER TABLE runs ADD COLUMN agent_digest TEXT NOT NULL DEFAULT '';
UPDATE runs SET agent_digest = d.digest FROM agent_definitions d WHERE d.definition = runs.agent;
ALTER TABLE runs DROP COLUMN agent;
"""),
    # Fewer index entries per conversation (~68 -> ~55 on the cluster bench). Every
    # index gets an entry per inserted row, and per updated row unless the update is HOT (no
    # indexed column changed, room on the page); a row whose status or state changes is
    # never HOT while an index names that column.
    # - runs, calls, messages: the id is the key; ``pos`` keeps their order through the
    #   indexes that lead with the conversation or run, and no query looked a row up by
    #   ``pos`` alone (its primary key's index was never scanned).
    # - runs in progress, open calls: only those rows are in the index the sweeper's
    #   queries read (stalled_runs, due_calls, calls_in_states), so a run's or call's
    #   change to an end state writes no entry there. (Those are the open states,
    #   ``OPEN_STATES``, spelled out: a migration never changes once released.)
    # - leases: nothing reads them by ``until`` (expired_leases reads the few live rows);
    #   without that index, renewing a lease is a HOT update.
    Migration(10, "leaner indexes", """
ALTER TABLE runs DROP CONSTRAINT runs_pkey, DROP CONSTRAINT runs_id_key, ADD PRIMARY KEY (id);
DROP INDEX runs_by_status;
CREATE INDEX runs_in_progress ON runs (pos) WHERE status IN ('running', 'waiting');
ALTER TABLE calls DROP CONSTRAINT calls_pkey, DROP CONSTRAINT calls_id_key, ADD PRIMARY KEY (id);
DROP INDEX calls_open;
CREATE INDEX calls_open ON calls (deadline)
    WHERE state IN ('proposed', 'awaiting_confirmation', 'dispatched', 'delivered');
ALTER TABLE messages DROP CONSTRAINT messages_pkey, DROP CONSTRAINT messages_id_key,
    ADD PRIMARY KEY (id);
DROP INDEX leases_by_until;
"""),
    # Console sessions kept on the server, so signing out ends them.
    Migration(11, "console sessions", SESSIONS_SCHEMA),
    # Each model step's tokens and cost (hostcall/store/usage_sql.py).
    Migration(12, "model usage", usage_sql.POSTGRES_SCHEMA),
    # Conversations belong to a person: ``person`` is the verified ``sub`` of the agent's
    # identity token (NULL: anonymous); ``updated_at`` orders a person's history. The index
    # serves one agent's conversations of one person, last written in first; anonymous
    # conversations are not in it.
    Migration(13, "conversation owners", """
ALTER TABLE conversations ADD COLUMN person TEXT;
ALTER TABLE conversations ADD COLUMN updated_at DOUBLE PRECISION NOT NULL DEFAULT 0;
UPDATE conversations SET updated_at = created_at;
CREATE INDEX conversations_by_person ON conversations (agent_id, person, updated_at DESC, id DESC)
    WHERE person IS NOT NULL;
"""),
    # The signed-in visitor a run acts for (Run.visitor's to_json), frozen when it starts.
    Migration(14, "run identities", """
ALTER TABLE runs ADD COLUMN identity TEXT;
"""),
    # The browser a conversation was started in (Conversation.browser): an
    # anonymous visitor's history. Every conversation's last activity, for the agents'
    # retention (hostcall/retention.py), oldest first.
    Migration(15, "conversation browsers", """
ALTER TABLE conversations ADD COLUMN browser TEXT;
CREATE INDEX conversations_by_browser
    ON conversations (agent_id, browser, updated_at DESC, id DESC)
    WHERE browser IS NOT NULL AND person IS NULL;
CREATE INDEX conversations_by_activity ON conversations (agent_id, updated_at);
"""),
    # Visitors' feedback on replies; conversations a person is asked for or holds; who of
    # the team wrote a message.
    Migration(16, "feedback and handoffs", PEOPLE_SCHEMA),
    # The page's context a visitor's message was sent with (StoredMessage.context), as JSON.
    Migration(17, "page context", """
ALTER TABLE messages ADD COLUMN context TEXT;
"""),
    # The page tools a surface holds (Surface.page_tools), as JSON.
    Migration(18, "page tools", PAGE_TOOLS_SCHEMA),
    # A visitor's rating of a whole conversation, asked at its end.
    Migration(19, "conversation ratings", RATINGS_SCHEMA),
    # The run an edit or a regeneration superseded a message with (StoredMessage.superseded_by):
    # kept for the console and export, left out of the model's history and the widget's thread.
    Migration(20, "branches", """
ALTER TABLE messages ADD COLUMN superseded_by TEXT;
"""),
    # Files visitors attach: metadata and bytes apart from the messages, which keep what
    # they show of them (StoredMessage.attachments, as JSON).
    Migration(21, "attachments", attachment_sql.POSTGRES_SCHEMA),
    # Calls' MCP App views (records.CallApp): the resource read after the call, and the
    # view's last update of the model's context.
    Migration(22, "call apps", APPS_SCHEMA),
)  # fmt: skip
