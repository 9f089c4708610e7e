"""``scripts/apt-get-waiting``, which scripts/install and scripts/with-postgres install Debian's
packages with: another apt or dpkg holding the lock (unattended-upgrades on a machine that has
just booted) is waited for, visibly and up to a ceiling, instead of failing the install.

apt-get here is a stand-in on PATH that answers as apt does while the lock is held: a real
lock would stop every other apt on the machine for the test's length."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hostcall.settings import ROOT

HELD = (
    "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 "
    "(unattended-upgr)\nE: Unable to acquire the dpkg frontend lock "
    "(/var/lib/dpkg/lock-frontend), is another process using it?"
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="as root, the script runs apt-get without sudo (which resets PATH)"
)


def _apt(tmp_path: Path, *, locked_for: int, then: str = "") -> Path:
    """An apt-get that answers ``HELD`` to its first ``locked_for`` calls, then succeeds
    (or, with ``then``, fails with that message). Each call's arguments go to calls.txt."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "apt-get"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {tmp_path}/calls.txt\n'
        f"n=$(wc -l < {tmp_path}/calls.txt)\n"
        f'if [ "$n" -le {locked_for} ]; then echo "{HELD}" >&2; exit 100; fi\n'
        + (f'echo "{then}" >&2; exit 100\n' if then else "echo done\n")
    )
    script.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, bin_dir: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "HOSTCALL_APT_LOCK_STEP": "1", **environ}  # fmt: skip
    return subprocess.run(
        [ROOT / "scripts" / "apt-get-waiting", "install", "-y", "-qq", "nodejs"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.txt").read_text().splitlines()


def test_a_held_lock_is_waited_for_and_said_so(tmp_path: Path) -> None:
    done = _run(tmp_path, _apt(tmp_path, locked_for=2))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "install: another apt or dpkg is running (held by process 4242 (unattended-upgr));"
        " waiting for it, up to 600s"
    ]
    assert _calls(tmp_path) == ["install -y -qq nodejs"] * 3


def test_a_lock_held_past_the_ceiling_fails_with_apts_message(tmp_path: Path) -> None:
    done = _run(tmp_path, _apt(tmp_path, locked_for=1000), HOSTCALL_APT_LOCK_WAIT="2")
    assert done.returncode == 1
    assert "install: gave up after 2s waiting for another apt or dpkg to finish:" in done.stderr
    assert "It is held by process 4242 (unattended-upgr)" in done.stderr
    assert len(_calls(tmp_path)) == 3  # at 0, 1 and 2 seconds


def test_any_other_failure_is_reported_at_once(tmp_path: Path) -> None:
    bin_dir = _apt(tmp_path, locked_for=0, then="E: Unable to locate package nodejs")
    done = _run(tmp_path, bin_dir)
    assert done.returncode == 1
    assert done.stderr.strip() == "E: Unable to locate package nodejs"
    assert len(_calls(tmp_path)) == 1
