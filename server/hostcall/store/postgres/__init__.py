"""The PostgreSQL dialect: several processes share one database (database.py says how).

``database`` holds ``PostgresStore``, ``connections`` its pool and the pipelined transaction
of each task (``PostgresConnections``, one object every part shares), ``schema`` the
numbered migrations; each other module holds one aggregate's part: an object with its
statements, which the store builds and hands its methods to (hostcall/store/composed.py).
"""

from hostcall.store.postgres.database import PostgresStore

__all__ = ["PostgresStore"]
