"""Suite-wide: every event any test stored is checked against AG-UI's official schemas."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agui import check_events, event_name, stored_events


@pytest.fixture(scope="session", autouse=True)
def every_stored_event_is_valid_ag_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the tests: each event in each database they wrote validates against
    ``@ag-ui/core``, and its SSE name is its type (or its CUSTOM name) — issue 8."""
    yield
    events = []
    for db in sorted(tmp_path_factory.getbasetemp().rglob("*.db")):
        events.extend(stored_events(db))
    misnamed = [(w, n) for w, n, e in events if n != event_name(e)]
    assert not misnamed, f"SSE names that are not the event's type: {misnamed[:5]}"
    failures = check_events([(w, e) for w, _, e in events]) if events else []
    assert not failures, f"{len(failures)} of {len(events)} events are not AG-UI: {failures[:5]}"
