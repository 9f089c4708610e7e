"""The app reads the time from one seam, ``Runtime.clock`` (``create_app(settings, clock=...)``):
deadlines, expiries and the times it stores follow the clock a test moves
(tests/support/clock.py). A bare ``time.time()`` in the server bypasses it; the few that must
read the wall clock are listed here, each with its reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hostcall.console.session import SESSION_MAX_AGE
from tests.support.harness import Harness
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

SERVER = Path(__file__).resolve().parents[2] / "server" / "hostcall"
WALL_CLOCK = re.compile(r"\btime\.time\(\)")

# Path under server/hostcall -> how many bare reads it may have, and why.
ALLOWED = {
    # The schema's history on SQLite, as PostgreSQL's now() writes it: no request's time.
    "store/sqlite/database.py": 1,
    # Only ``hostcall users`` adds an account, on the command line, outside any server.
    "console/accounts.py": 1,
}


def bare_reads() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted(SERVER.rglob("*.py")):
        count = len(WALL_CLOCK.findall(path.read_text(encoding="utf-8")))
        if count:
            found[path.relative_to(SERVER).as_posix()] = count
    return found


def test_the_server_reads_the_wall_clock_only_where_it_is_allowed() -> None:
    found = bare_reads()
    assert found, f"no time.time() found under {SERVER}: is the path right?"
    over = {path: n for path, n in found.items() if n > ALLOWED.get(path, 0)}
    assert not over, (
        f"time.time() bypasses the app's clock in {over}: read runtime.clock (or take a clock=)"
        " instead, or list the file in ALLOWED with the reason the wall clock is needed"
    )
    stale = {path: n for path, n in ALLOWED.items() if found.get(path, 0) < n}
    assert not stale, f"fewer bare reads than ALLOWED lists in {stale}: lower the count"


def test_a_console_session_ends_when_the_apps_clock_passes_its_expiry(harness: Harness) -> None:
    ada = ConsoleClient(harness.app, harness.runtime, "ada", "operator")
    assert ada.http.get("/console/conversations").status_code == 200
    harness.clock.advance(SESSION_MAX_AGE + 1)
    r = ada.http.get("/console/conversations")
    assert r.status_code == 303 and r.headers["location"].startswith("/console/login")


def test_the_audit_log_is_written_at_the_apps_time(harness: Harness) -> None:
    week = 7 * 24 * 3600.0
    harness.clock.advance(week)
    ConsoleClient(harness.app, harness.runtime, "ada", "operator")
    (login,) = harness.call(harness.runtime.store.list_audit)
    assert login.action == "login"
    assert harness.clock() - 60 < login.at <= harness.clock()
