"""The SQLite dialect: one file, one process (database.py says why).

``database`` holds ``SQLiteStore`` (the connection, its lock file, migrations and
transactions) and ``schema`` the numbered migrations; each other module holds one
aggregate's statements.
"""

from hostcall.store.sqlite.database import SQLiteStore

__all__ = ["SQLiteStore"]
