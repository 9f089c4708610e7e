"""The README's commands, as a new user types them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from hostcall.settings import ROOT


def test_the_demo_command_installs_and_starts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # scripts/demo runs scripts/install (no test extras) and then the demo; --help proves
    # both halves work without holding the demo's fixed ports.
    result = subprocess.run(
        ["scripts/demo", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--host-port" in result.stdout


def test_ctrl_c_stops_the_server_without_a_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "HOSTCALL_SECRET_KEYS": "k" * 32}
    process = subprocess.Popen(
        [sys.executable, "-m", "hostcall", "serve", "--port", "0",
         "--db", str(tmp_path / "x.db")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    # Interrupt only once the server is up: a signal during start-up tests something else
    # (and a loaded machine can take seconds to import).
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if "Uvicorn running on" in line or "Application startup complete" in line:
            break
    assert any("startup complete" in s or "running on" in s for s in seen), "".join(seen)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=20)
    out = "".join(seen) + out
    assert process.returncode == 0, out
    assert "Traceback" not in out
