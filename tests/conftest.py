"""Suite-wide: the fixtures both the unit and the system tier use (the app on a real SQLite
file, a store on SQLite and on PostgreSQL), and every event any test stored checked against
AG-UI's official schemas."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hostcall.settings import DEMO_AGENTS
from hostcall.store import Store, open_store
from tests.agui import check_events, event_name, stored_events
from tests.support.databases import fresh_schema
from tests.support.harness import Harness

# The fake OpenAI-compatible provider's fixtures (``provider``), for any test of a model.
pytest_plugins = ("tests.support.provider",)


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, directory)
    return directory


@pytest.fixture
def harness(tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, agents_dir)
    yield h
    h.stop()


@pytest.fixture
def made() -> Iterator[list[Harness]]:
    """Harnesses a test starts itself (other agents, settings, platforms), each stopped after."""
    harnesses: list[Harness] = []
    yield harnesses
    for h in harnesses:
        h.stop()


# ---- stores: every store test runs on SQLite and on PostgreSQL ---------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | Path]:
    """Where a store lives: a SQLite file, or a PostgreSQL URL on a fresh schema."""
    if request.param == "sqlite":
        yield tmp_path / "store.db"
    else:
        with fresh_schema() as url:
            yield url


@pytest.fixture
async def store(store_target: str | Path) -> AsyncIterator[Store]:
    opened = open_store(store_target)
    yield opened
    await opened.close()


# ---- AG-UI conformance of everything stored ----------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def every_stored_event_is_valid_ag_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the tests: each event in each database they wrote validates against
    ``@ag-ui/core``, and its SSE name is its type (or its CUSTOM name)."""
    yield
    events = []
    for db in sorted(tmp_path_factory.getbasetemp().rglob("*.db")):
        events.extend(stored_events(db))
    misnamed = [(w, n) for w, n, e in events if n != event_name(e)]
    assert not misnamed, f"SSE names that are not the event's type: {misnamed[:5]}"
    failures = check_events([(w, e) for w, _, e in events]) if events else []
    assert not failures, f"{len(failures)} of {len(events)} events are not AG-UI: {failures[:5]}"
