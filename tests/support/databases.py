"""PostgreSQL for tests: the URL scripts/test provides, and a fresh schema per test.

scripts/test runs the suite through scripts/with-postgres, which sets
HOSTCALL_TEST_DATABASE_URL (a throwaway cluster, or the database you point it at). Without
it the PostgreSQL tests fail, loudly: they never skip.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
import pytest

VARIABLE = "HOSTCALL_TEST_DATABASE_URL"


def database_url() -> str:
    url = os.environ.get(VARIABLE, "")
    if not url:
        pytest.fail(
            f"{VARIABLE} is not set: the PostgreSQL tests need a database. Run them with "
            "scripts/test (it starts a throwaway cluster), or "
            "`scripts/with-postgres .venv/bin/python -m pytest ...`, or set it yourself.",
            pytrace=False,
        )
    return url


def with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = "&".join(
        q for q in (parts.query, urlencode({"options": f"-csearch_path={schema}"})) if q
    )
    return urlunsplit(parts._replace(query=query))


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A URL whose tables live in a new, empty schema, dropped afterwards."""
    url = database_url()
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def store_url(store: str) -> Iterator[str | None]:
    """The ``database_url`` of a test run on ``store``: None for "sqlite" (the harness's own
    file), a fresh schema's URL for "postgres"; the fixtures parametrized on both use it."""
    if store == "sqlite":
        yield None
    else:
        with fresh_schema() as url:
            yield url
