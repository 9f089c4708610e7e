"""PostgreSQL's pool as the environment sets it: HOSTCALL_DB_POOL_SIZE and
HOSTCALL_DB_POOL_WAIT_SECONDS (docs/operations.md). A value that is not a usable number
stops the server at start, quoting it, rather than running with a pool nobody chose."""

from __future__ import annotations

import pytest

from hostcall.errors import StoreError
from hostcall.store import open_store
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
        assert (store._pool.max_size, store._pool.min_size, store._pool.timeout) == (1, 1, 0.5)
        default = open_store(url, environ={})
        assert isinstance(default, PostgresStore)
        assert (default._pool.max_size, default._pool.timeout) == (5, 3.0)
