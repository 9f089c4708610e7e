"""How this process opens a connection to PostgreSQL: the timeout of an attempt, a
synchronous connection for the work done outside the event loop, and the URL as messages
may show it.

The pool (hostcall/store/postgres/connections.py), the relay's listening connection
(hostcall/relay.py) and the lease-renewal thread (hostcall/leases.py) all open theirs with
these settings.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from hostcall.errors import StoreError

Row = dict[str, Any]

# How long opening one connection may take: a database host that does not answer (a cut
# network, a host gone) must fail the attempt, as a refused one does at once.
CONNECT_TIMEOUT_SECONDS = 3


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unparsable URL)"
    info.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in info.items() if v is not None)


def timeouts(url: str) -> dict[str, Any]:
    """``connect_timeout`` for a connection to ``url``, unless the URL sets its own."""
    try:
        given = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        given = {}
    return {} if "connect_timeout" in given else {"connect_timeout": CONNECT_TIMEOUT_SECONDS}


def connect(url: str, **options: Any) -> psycopg.Connection[Row]:
    """A synchronous connection, for work done before the event loop runs (migrations)
    and for the lease-renewal thread."""
    try:
        options = timeouts(url) | options
        return psycopg.connect(url, autocommit=True, row_factory=dict_row, **options)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL ({redacted(url)}): {str(exc).strip()}",
            target=redacted(url),
        ) from None
