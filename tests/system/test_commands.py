"""The README's commands, as a new user types them."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

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
        if "Uvicorn running on" in line:
            break
    # Said once the application has started, not where the socket is bound: a Ctrl-C taken
    # at that word before uvicorn's signal handlers were in place was a traceback.
    said = [s for s in seen if "startup complete" in s or "running on" in s]
    assert len(said) == 2 and "startup complete" in said[0], "".join(seen)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=20)
    out = "".join(seen) + out
    assert process.returncode == 0, out
    assert "Traceback" not in out


def test_the_demo_service_takes_the_port_it_is_given(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--services-port 0`: a free port, and the demo's agent files point at it (the
    public_holidays tool reaches it), whatever holds 8002."""
    from hostcall.qa.servers import start_hostcall

    demo = start_hostcall(tmp_path, command="demo", extra=["--services-port", "0"])
    try:
        found = re.search(r"Demo service: +http://127\.0\.0\.1:(\d+)", demo.output())
        assert found, demo.output()
        # The banner says where the console is, and how to make an account for it.
        console = re.search(r"Operator console: +(\S+)/console\n +an account for it: +"
                            r"hostcall users add NAME --role admin --db (\S+)\n",
                            demo.output())  # fmt: skip
        assert console, demo.output()
        assert console.group(1) == demo.url.rstrip("/")
        assert Path(console.group(2)).is_absolute()
        port = int(found.group(1))
        assert port != 8002
        assert httpx.get(f"http://127.0.0.1:{port}/holidays/FR").json()["country"] == "FR"

        board = demo.board.rstrip("/")
        created = httpx.post(
            f"{demo.url}/api/agents/planner/conversations",
            json={"locale": "en", "parentOrigin": board},
            headers={"Origin": board},
        ).json()
        auth = {"Authorization": f"Bearer {created['sessionToken']}", "Origin": board}
        conversation = f"{demo.url}/api/conversations/{created['conversationId']}"
        sent = httpx.post(f"{conversation}/messages", json={"text": "holidays in France"},
                          headers=auth)  # fmt: skip
        assert sent.status_code in (200, 202), sent.text
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            snap = httpx.get(conversation, headers=auth).json()
            if snap["run"] and snap["run"]["status"] in ("finished", "failed"):
                break
            time.sleep(0.1)
        assert snap["run"]["status"] == "finished", snap
        [call] = snap["calls"]
        assert call["toolCallName"] == "public_holidays"
        assert call["outcome"]["output"]["status"] == 200, call
        assert call["outcome"]["output"]["body"]["country"] == "FR"
    finally:
        demo.stop()


def test_a_busy_services_port_is_refused_with_its_number(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "hostcall", "demo", "--port", "0", "--host-port", "0",
             "--services-port", str(port), "--db", str(tmp_path / "x.db")],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "HOSTCALL_SECRET_KEYS": "k" * 32},
        )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"hostcall: --services-port: port {port} of 127.0.0.1 is busy" in result.stderr


def test_every_documented_wheel_build_keeps_dependencies_out_of_the_checkout() -> None:
    """`pip wheel .` alone drops every dependency's wheel into the working directory: each
    place that tells someone to build the wheel says `--no-deps` and where to write it."""
    places = [ROOT / "README.md", ROOT / "Dockerfile", *sorted((ROOT / "docs").glob("*.md")),
              *sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file())]  # fmt: skip
    builds = []
    for path in places:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bpip3? wheel\b", line):
                builds.append((path.name, number, line))
                assert "--no-deps" in line and re.search(r"(-w|--wheel-dir)\s+\S", line), (
                    f"{path.name}:{number}: {line.strip()}"
                )
    assert len(builds) >= 3, builds  # README, docs/testing.md, Dockerfile


def test_built_wheels_are_not_part_of_the_checkout() -> None:
    """``python -m build`` and ``pip wheel -w dist`` write under dist/: never committed."""
    ignored = subprocess.run(["git", "check-ignore", "-q", "dist/hostcall-0.1.0.whl"], cwd=ROOT)
    assert ignored.returncode == 0
