"""The SQLite store's schema, as numbered migrations (hostcall/store/migrations.py).

Changing a table means a new migration at the end, never an edit of an applied one.
"""

from __future__ import annotations

from hostcall.store import attachment_sql, usage_sql
from hostcall.store.migrations import Migration
from hostcall.store.sqlite.apps import APPS_SCHEMA
from hostcall.store.sqlite.console import CONSOLE_SCHEMA, SESSIONS_SCHEMA
from hostcall.store.sqlite.people import PEOPLE_SCHEMA, RATINGS_SCHEMA
from hostcall.store.sqlite.surfaces import (
    PAGE_TOOLS_SCHEMA,
    SURFACE_STREAMS_SCHEMA,
    SURFACES_SCHEMA,
)

MIGRATIONS = (
    # Version 1 is the schema from before migrations existed; IF NOT EXISTS adopts such files.
    Migration(1, "initial", """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, created_at REAL NOT NULL,
    locale TEXT NOT NULL DEFAULT '', handled_tools TEXT NOT NULL DEFAULT '[]',
    last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,
    text TEXT NOT NULL, tool_calls TEXT NOT NULL, tool_call_id TEXT, tool_name TEXT
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, pos);
CREATE TABLE IF NOT EXISTS runs (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, agent TEXT NOT NULL, status TEXT NOT NULL,
    step INTEGER NOT NULL, error TEXT, simulate INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_conversation ON runs (conversation_id, pos);
CREATE TABLE IF NOT EXISTS calls (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
    conversation_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    tool_name TEXT NOT NULL, state TEXT NOT NULL, input TEXT NOT NULL, arguments TEXT NOT NULL,
    deadline REAL NOT NULL, route TEXT NOT NULL, outcome TEXT, delivered INTEGER NOT NULL,
    extra TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_by_run ON calls (run_id, step);
CREATE INDEX IF NOT EXISTS calls_open ON calls (state, deadline);
CREATE TABLE IF NOT EXISTS grants (
    conversation_id TEXT NOT NULL, tool_name TEXT NOT NULL, call_id TEXT NOT NULL,
    PRIMARY KEY (conversation_id, tool_name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
"""),
    Migration(2, "leases", """
CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, until REAL NOT NULL)
    WITHOUT ROWID;
CREATE INDEX leases_by_until ON leases (until);
CREATE INDEX runs_by_status ON runs (status);
"""),
    # The console's tables; IF NOT EXISTS adopts files made before migrations.
    # Changing them later means a new migration here, not an edit of CONSOLE_SCHEMA.
    Migration(3, "console", CONSOLE_SCHEMA),
    # Single-use stream tickets, and a table /healthz writes to (and rolls back).
    Migration(4, "tickets", """
CREATE TABLE stream_tickets (nonce TEXT PRIMARY KEY, expires_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE probe (at REAL);
"""),
    # Text streamed before a run failed is kept, marked as interrupted.
    Migration(5, "interrupted messages", """
ALTER TABLE messages ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;
"""),
    Migration(6, "surfaces", SURFACES_SCHEMA),
    # Session generations (a resumed conversation refuses its older tokens).
    Migration(7, "session generations", """
ALTER TABLE conversations ADD COLUMN session_generation INTEGER NOT NULL DEFAULT 0;
"""),
    # Surfaces' streams counted per process, dropped when a process dies.
    Migration(8, "surface streams", SURFACE_STREAMS_SCHEMA),
    # Rate and cost limits counted in the store (hostcall/counters.py).
    Migration(9, "quota counters", """
CREATE TABLE quota_counters (key TEXT PRIMARY KEY, window_start REAL NOT NULL,
    count INTEGER NOT NULL) WITHOUT ROWID;
"""),
    # A run stores its agent definition by reference (hostcall/store/definitions.py);
    # runs' copies move to one row per distinct copy, keyed by its first run.
    Migration(10, "agent definitions", """
CREATE TABLE agent_definitions (digest TEXT PRIMARY KEY, definition TEXT NOT NULL);
INSERT INTO agent_definitions (digest, definition)
    SELECT 'migrated:' || MIN(id), agent FROM runs GROUP BY agent;
ALTER TABLE runs ADD COLUMN agent_digest TEXT NOT NULL DEFAULT '';
UPDATE runs SET agent_digest =
    (SELECT d.digest FROM agent_definitions d WHERE d.definition = runs.agent);
ALTER TABLE runs DROP COLUMN agent;
"""),
    # Console sessions kept on the server, so signing out ends them.
    Migration(11, "console sessions", SESSIONS_SCHEMA),
    # Each model step's tokens and cost (hostcall/store/usage_sql.py).
    Migration(12, "model usage", usage_sql.SQLITE_SCHEMA),
    # Conversations belong to a person: ``person`` is the verified ``sub`` of the agent's
    # identity token (NULL: anonymous); ``updated_at`` orders a person's history. The index
    # serves one agent's conversations of one person, last written in first.
    Migration(13, "conversation owners", """
ALTER TABLE conversations ADD COLUMN person TEXT;
ALTER TABLE conversations ADD COLUMN updated_at REAL NOT NULL DEFAULT 0;
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
    Migration(21, "attachments", attachment_sql.SQLITE_SCHEMA),
    # Calls' MCP App views (records.CallApp): the resource read after the call, and the
    # view's last update of the model's context.
    Migration(22, "call apps", APPS_SCHEMA),
)  # fmt: skip
