"""The wheel, as a new user installs it: built from the repository, installed into a fresh
venv outside it, then ``hostcall demo`` run from an unrelated directory (issue 12).

The venv has no access to the checkout: if the widget or the demo were not package data,
``/embed.js`` or the board would fail here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hostcall.qa.servers import free_port
from hostcall.settings import ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel (and its dependencies) installed; returns its bin dir."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)], check=True)
    [wheel] = (tmp / "dist").glob("hostcall-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", str(wheel)],
                   check=True)  # fmt: skip
    return venv / "bin"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "HOSTCALL_SECRET_KEYS": "wheel-test-key-0123456789abcdef"}


def test_installed_package_finds_widget_and_demo_inside_itself(
    installed: Path, tmp_path: Path
) -> None:
    probe = "import hostcall.assets as a; print(a.WIDGET_DIR); print(a.DEMO_AGENTS)"
    out = subprocess.run([str(installed / "python"), "-c", probe], cwd=tmp_path, env=_clean_env(),
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    site = str(installed.parent / "lib")
    assert all(line.startswith(site) for line in out), out
    assert not any(line.startswith(str(ROOT)) for line in out)


def test_installed_hostcall_check_reads_the_shipped_demo_agents(
    installed: Path, tmp_path: Path
) -> None:
    result = subprocess.run([str(installed / "hostcall"), "check"], cwd=tmp_path,
                            env=_clean_env(), capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "ok: planner" in result.stdout


def test_installed_demo_serves_the_loader_the_widget_and_the_board(
    installed: Path, tmp_path: Path
) -> None:
    port, host_port = free_port(), free_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(installed / "hostcall"), "demo", "--port", str(port), "--host-port",
             str(host_port), "--db", str(tmp_path / "demo.db"), "--log-level", "warning"],
            cwd=tmp_path, env=_clean_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base, board = f"http://127.0.0.1:{port}", f"http://localhost:{host_port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        embed = httpx.get(f"{base}/embed.js")
        assert embed.status_code == 200 and "Hostcall" in embed.text
        assert embed.headers["content-type"].startswith("text/javascript")
        page = httpx.get(f"{base}/widget/planner", params={"origin": board})
        assert page.status_code == 200, page.text
        assert "hc-config" in page.text
        assert "interface HostcallApi" in httpx.get(f"{base}/embed.d.ts").text
        for name in (
            "app.js",
            "bridge.js",
            "chat.js",
            "drawing.js",
            "form.js",
            "widget.css",
            "calls.css",
            "toolcalls.js",
            "cards.js",
            "locale-ja.js",
            "locale-ja-calls.js",
        ):
            assert httpx.get(f"{base}/static/{name}").status_code == 200, name
        # The operator console's pages and scripts are package data too.
        login = httpx.get(f"{base}/console/login")
        assert login.status_code == 200, login.text[:300]
        assert httpx.get(f"{base}/console/static/console.css").status_code == 200
        host = httpx.get(f"{board}/")
        assert host.status_code == 200 and f"{base}/embed.js" in host.text
        assert httpx.get(f"{board}/board.js").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
    # The default database would have gone to ./var, never into site-packages.
    assert not (installed.parent / "lib" / "var").exists()
