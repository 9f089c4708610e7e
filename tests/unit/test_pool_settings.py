"""PostgreSQL's pool as the environment sets it: HOSTCALL_DB_POOL_SIZE and
HOSTCALL_DB_POOL_WAIT_SECONDS (docs/operations.md). A value that is not a usable number
stops the server at start, quoting it, rather than running with a pool nobody chose."""

from __future__ import annotations

import pytest

from hostcall.errors import StoreError
from hostcall.store import open_store, pool_share
from hostcall.store.postgres import PostgresStore
from tests.support.databases import fresh_schema

URL = "postgresql://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HOSTCALL_DB_POOL_SIZE", "0"),
        ("HOSTCALL_DB_POOL_SIZE", "five"),
        ("HOSTCALL_DB_POOL_SIZE", "2.5"),
        ("HOSTCALL_DB_POOL_WAIT_SECONDS", "-1"),
        ("HOSTCALL_DB_POOL_WAIT_SECONDS", "soon"),
    ],
)
def test_an_unusable_pool_setting_is_refused_at_start(name: str, value: str) -> None:
    with pytest.raises(StoreError) as refused:
        open_store(URL, environ={name: value})
    assert name in str(refused.value) and repr(value) in str(refused.value)


def test_the_pool_takes_its_size_and_wait_from_the_environment() -> None:
    with fresh_schema() as url:
        store = open_store(
            url, environ={"HOSTCALL_DB_POOL_SIZE": "1", "HOSTCALL_DB_POOL_WAIT_SECONDS": "0.5"}
        )
        assert isinstance(store, PostgresStore)
        pool = store.db._pool
        assert (pool.max_size, pool.min_size, pool.timeout) == (1, 1, 0.5)
        default = open_store(url, environ={})
        assert isinstance(default, PostgresStore)
        assert (default.db._pool.max_size, default.db._pool.timeout) == (5, 3.0)


@pytest.mark.parametrize(
    ("budget", "workers", "share"),
    [("7", "1", 5), ("20", "2", 8), ("40", "4", 8), ("9", "3", 1)],
)
def test_a_connection_budget_is_shared_by_the_workers(
    budget: str, workers: str, share: int
) -> None:
    # Each worker's share less its LISTEN and lease connections: the whole never passes it.
    assert pool_share(budget, workers) == share
    assert (share + 2) * int(workers) <= int(budget)


@pytest.mark.parametrize(("budget", "workers"), [("8", "3"), ("0", "1"), ("many", "1"), ("9", "x")])
def test_a_budget_too_small_for_the_workers_is_refused_at_start(budget: str, workers: str) -> None:
    with pytest.raises(StoreError) as refused:
        open_store(URL, environ={"HOSTCALL_DB_CONNECTIONS": budget, "HOSTCALL_WORKERS": workers})
    assert "HOSTCALL_DB_CONNECTIONS" in str(refused.value) and repr(budget) in str(refused.value)


def test_the_pool_is_sized_from_the_budget_unless_its_size_is_given() -> None:
    with fresh_schema() as url:
        shared = {"HOSTCALL_DB_CONNECTIONS": "16", "HOSTCALL_WORKERS": "2"}
        store = open_store(url, environ=shared)
        assert isinstance(store, PostgresStore)
        assert store.db._pool.max_size == 6
        given = open_store(url, environ={**shared, "HOSTCALL_DB_POOL_SIZE": "3"})
        assert isinstance(given, PostgresStore)
        assert given.db._pool.max_size == 3
