"""A starting process on PostgreSQL LISTENs before it serves: a stream opened
before that could miss another process's notification for good."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hostcall import relay as relay_module
from tests.support.databases import fresh_schema
from tests.support.harness import Harness

LISTEN_DELAY = 0.5


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


@pytest.fixture
def slow_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay's connection takes LISTEN_DELAY to open (a database farther away)."""
    connect = psycopg.AsyncConnection.connect

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(LISTEN_DELAY)
        return await connect(*args, **kwargs)

    monkeypatch.setattr(relay_module.psycopg.AsyncConnection, "connect", slow)


def test_the_server_serves_once_it_listens(
    pg_url: str, tmp_path: Path, agents_dir: Path, slow_listen: None
) -> None:
    h = Harness(tmp_path, agents_dir, database_url=pg_url)
    try:
        relay = h.runtime.relay
        assert relay is not None
        # The app's start returned: the first request could come now.
        assert relay.connected.is_set()
        conv = h.conversation()
        assert h.http.get(f"/api/conversations/{conv.id}", headers=conv.auth).status_code == 200
    finally:
        h.stop()


def test_a_database_slower_than_the_wait_still_serves_and_says_so(
    pg_url: str,
    tmp_path: Path,
    agents_dir: Path,
    slow_listen: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(relay_module, "READY_SECONDS", LISTEN_DELAY / 10)
    h = Harness(tmp_path, agents_dir, database_url=pg_url)
    try:
        assert "not listening for other processes' events" in caplog.text
        conv = h.conversation()
        assert h.http.get(f"/api/conversations/{conv.id}", headers=conv.auth).status_code == 200
    finally:
        h.stop()
