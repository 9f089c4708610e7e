"""``hostcall users add|list|remove|passwd|role`` as a subprocess, beside a running server on
the same SQLite file: each change to a user ends that user's console sessions at once, in the
server that issued them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from hostcall.settings import ROOT
from tests.support.processes import Cluster

PASSWORD = "a-long-enough-password"


def _users(db: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostcall", "users", *args, "--db", str(db)],
        input=stdin, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _sign_in(url: str, name: str, password: str) -> httpx.Client:
    http = httpx.Client(base_url=url, follow_redirects=False, timeout=30)
    form = http.get("/console/login")
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert found, form.text
    r = http.post(
        "/console/login", data={"csrf": found.group(1), "name": name, "password": password}
    )
    assert r.status_code == 303, (name, r.status_code)
    return http


def _signed_in(http: httpx.Client) -> bool:
    status = http.get("/console/api/conversations").status_code
    assert status in (200, 401), status
    return status == 200


def test_users_commands_change_accounts_and_end_their_sessions(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    cluster = Cluster(str(db), tmp_path)
    try:
        url = cluster.start().url  # the server holds the file; the commands write beside it
        for name, role in (("ada", "admin"), ("bob", "operator")):
            done = _users(db, "add", name, "--role", role, stdin=PASSWORD + "\n")
            assert done.returncode == 0, done.stderr
            # A link to open, not a path: where `hostcall serve` listens unless told.
            signs_in = "can sign in at http://127.0.0.1:8000/console/login"
            assert done.stdout.strip() == f"ok: {name} ({role}) {signs_in}"
        done = _users(db, "add", "cy", "--role", "designer", "--url", "https://help.example/",
                      stdin=PASSWORD + "\n")  # fmt: skip
        assert done.stdout.strip().endswith("can sign in at https://help.example/console/login")
        assert _users(db, "remove", "cy").returncode == 0
        bad = _users(db, "add", "dee", "--role", "admin", "--url", "help.example")
        assert bad.returncode == 2 and "must be an http(s) URL, not 'help.example'" in bad.stderr
        listed = _users(db, "list")
        assert listed.returncode == 0, listed.stderr
        assert [line.split()[:2] for line in listed.stdout.splitlines()] == [
            ["ada", "admin"], ["bob", "operator"],
        ]  # fmt: skip

        ada, bob = _sign_in(url, "ada", PASSWORD), _sign_in(url, "bob", PASSWORD)
        done = _users(db, "role", "ada", "--role", "operator")
        assert done.returncode == 0 and "now operator" in done.stdout, done.stderr
        assert not _signed_in(ada) and _signed_in(bob)
        ada = _sign_in(url, "ada", PASSWORD)
        assert ada.get("/console/audit").status_code == 403  # the new role

        done = _users(db, "passwd", "ada", stdin="another-long-password\n")
        assert done.returncode == 0, done.stderr
        assert not _signed_in(ada)
        ada = _sign_in(url, "ada", "another-long-password")

        done = _users(db, "remove", "ada")
        assert done.returncode == 0, done.stderr
        assert not _signed_in(ada) and _signed_in(bob)
        listed = _users(db, "list")
        assert [line.split()[0] for line in listed.stdout.splitlines()] == ["bob"]

        for args, stdin, message in (
            (("remove", "ada"), "", "no user called 'ada'"),
            (("role", "bob", "--role", "root"), "", "invalid choice: 'root'"),
            (("passwd", "bob"), "short\n", "10 to 1024 characters"),
        ):
            done = _users(db, *args, stdin=stdin)
            assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr
        assert _signed_in(bob)  # refused changes end nothing
    finally:
        cluster.close()


def test_importing_the_app_hashes_no_password() -> None:
    """Every process that imports the app (a server, each of these commands, a test's server)
    paid half a second of CPU for the console's dummy password hash before it did anything."""
    code = (
        "import argon2\n"
        "made = []\n"
        "real = argon2.PasswordHasher.hash\n"
        "argon2.PasswordHasher.hash = lambda self, *a, **k: made.append(1) or real(self, *a, **k)\n"
        "import hostcall.app, hostcall.cli\n"
        "assert not made, 'a password was hashed at import'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
