"""The PostgreSQL dialect: several processes share one database (database.py says how).

``database`` holds ``PostgresStore``, ``connections`` its pool and the pipelined transaction
of each task, ``schema`` the numbered migrations; each other module holds one aggregate's
statements.
"""

from hostcall.store.postgres.database import PostgresStore

__all__ = ["PostgresStore"]
