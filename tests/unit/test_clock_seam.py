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

# Path under server/hostcall -> how many bare reads it may have, and why. None may: where
# there is no app (a command line, the store's own migration stamp) the default clock is
# the wall clock, passed as ``time.time`` and never called in place; or a client of
# another server.
ALLOWED: dict[str, int] = {
    # A client of another server, with no app of its own: an interrupt's expiresAt is that
    # server's wall-clock time, which the case waits out.
    "conformance/cases.py": 3,
}


def bare_reads() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted(SERVER.rglob("*.py")):
        count = len(WALL_CLOCK.findall(path.read_text(encoding="utf-8")))
        if count:
            found[path.relative_to(SERVER).as_posix()] = count
    return found


def test_the_server_reads_the_wall_clock_only_where_it_is_allowed() -> None:
    assert (SERVER / "app.py").is_file(), f"no server under {SERVER}: is the path right?"
    found = bare_reads()
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


def test_an_account_added_in_the_app_is_created_at_the_apps_time(harness: Harness) -> None:
    harness.clock.advance(30 * 24 * 3600.0)
    ConsoleClient(harness.app, harness.runtime, "ada", "operator")
    user = harness.call(harness.runtime.store.get_user, "ada")
    assert user is not None
    assert harness.clock() - 60 < user.created_at <= harness.clock()
