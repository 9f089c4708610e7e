"""The attachments' tables (hostcall/store/interfaces.py ``Attachments``): their schema in
each dialect and the statements both send alike, written once with ``?`` (``for_postgres``
gives psycopg's ``%s``).

A file's bytes are in ``attachment_blobs``, apart from its metadata, so listing a
conversation's files (the console, export, a quota's sum) never reads them. A message keeps
what it shows of its files (``messages.attachments``: id, name, type, size); the rows here
say which conversation a file belongs to, whether a message has sent it, and its digest.
"""

from __future__ import annotations

_TABLES = """
CREATE TABLE attachments (
    id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
    size {big} NOT NULL, sha256 TEXT NOT NULL, created_at {real} NOT NULL, message_id TEXT
){rowid};
CREATE INDEX attachments_by_conversation ON attachments (conversation_id, created_at);
CREATE INDEX attachments_unsent ON attachments (created_at) WHERE message_id IS NULL;
CREATE TABLE attachment_blobs (id TEXT PRIMARY KEY, bytes {blob} NOT NULL){rowid};
ALTER TABLE messages ADD COLUMN attachments TEXT;
"""
SQLITE_SCHEMA = _TABLES.format(big="INTEGER", real="REAL", blob="BLOB", rowid=" WITHOUT ROWID")
POSTGRES_SCHEMA = _TABLES.format(big="BIGINT", real="DOUBLE PRECISION", blob="BYTEA", rowid="")

COLUMNS = "id, conversation_id, name, type, size, sha256, created_at, message_id"

# Kept only while the conversation's files, this one with them, stay within ``max_total``
# bytes (parameters: the row, then the conversation, the size and the bound).
INSERT = (
    f"INSERT INTO attachments ({COLUMNS}) SELECT ?, ?, ?, ?, ?, ?, ?, NULL"
    " WHERE (SELECT COALESCE(SUM(a.size), 0) FROM attachments a"
    " WHERE a.conversation_id = ?) + ? <= ?"
)
INSERT_BLOB = "INSERT INTO attachment_blobs (id, bytes) VALUES (?, ?)"
ONE = f"SELECT {COLUMNS} FROM attachments WHERE id = ?"
BLOB = "SELECT bytes FROM attachment_blobs WHERE id = ?"
OF_CONVERSATION = (
    f"SELECT {COLUMNS} FROM attachments WHERE conversation_id = ? ORDER BY created_at, id"
)
TOTAL = "SELECT COALESCE(SUM(size), 0) AS total FROM attachments WHERE conversation_id = ?"
# A message takes its files, each only once and only from its own conversation.
CLAIM = (
    "UPDATE attachments SET message_id = ? WHERE conversation_id = ? AND message_id IS NULL"
    " AND id IN ({ids})"
)
# Uploads no message sent: the bytes first (found through their rows), then the rows.
_STALE = "SELECT id FROM attachments WHERE message_id IS NULL AND created_at < ?"
PURGE_BLOBS = f"DELETE FROM attachment_blobs WHERE id IN ({_STALE})"
PURGE = "DELETE FROM attachments WHERE message_id IS NULL AND created_at < ?"


def for_postgres(sql: str) -> str:
    assert "%" not in sql, f"a shared statement with a % in it: {sql}"
    return sql.replace("?", "%s")


def claim(count: int, mark: str = "?") -> str:
    sql = CLAIM.format(ids=", ".join("?" * count))
    return sql if mark == "?" else for_postgres(sql)
