"""End-to-end fixtures: the real ``hostcall demo`` command as a subprocess, on free ports,
and Debian's Chromium driven by Playwright (never Playwright's own browser download).

The host page is served on ``localhost`` and the widget on ``127.0.0.1``: two origins, as on
a real site.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from server.settings import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SECRET = "e2e-secret-key-0123456789abcdef0123456789"
SHOTS = ROOT / "test-results" / "screenshots"

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Demo:
    """A running ``hostcall demo``: Hostcall on 127.0.0.1, the task board on localhost."""

    process: subprocess.Popen[bytes]
    port: int
    host_port: int
    db: Path
    log: Path

    @property
    def hostcall(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def board(self) -> str:
        return f"http://localhost:{self.host_port}/"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_demo(tmp: Path, *, db: Path | None = None, port: int | None = None,
               host_port: int | None = None, extra: list[str] | None = None) -> Demo:  # fmt: skip
    port = port or free_port()
    host_port = host_port or free_port()
    db = db or tmp / "e2e.db"
    log = tmp / f"demo-{port}-{time.monotonic_ns()}.log"
    env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "server", "demo", "--port", str(port),
               "--host-port", str(host_port), "--db", str(db), "--log-level", "warning",
               *(extra or [])]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    demo = Demo(process, port, host_port, db, log)
    # Generous: on a loaded 2-core machine a cold start (imports, first SQLite file) is slow.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"hostcall demo exited with {process.returncode}:\n{demo.output()}")
        try:
            ok = httpx.get(f"{demo.hostcall}/healthz", timeout=0.5).status_code == 200
            if ok and httpx.get(demo.board, timeout=0.5).status_code == 200:
                return demo
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    demo.stop(signal.SIGKILL)
    raise RuntimeError(f"hostcall demo did not start in 60 s:\n{demo.output()}")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = start_demo(tmp_path)
    yield running
    running.stop()


# Module-scoped, not session-scoped: Playwright's sync API runs an event loop on the main
# thread while it is open, and the async unit tests collected after e2e could not run.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/install --test")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def shot(page: Page, name: str) -> Path:
    """Save a screenshot under test-results/screenshots (look at them: a person will)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
