"""The MCP Apps test server (tests/fixtures/mcp_apps/server.mjs) as a subprocess.

Built with the official SDKs from npm (``scripts/install --test`` installs them), it serves
tools with views over streamable HTTP on 127.0.0.1 only, and reads back what its views
reported (``reports``) and which tools were called (``calls``).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "mcp_apps" / "server.mjs"
READY = "mcp-apps fixture ready on "
START_TIMEOUT = 60.0


class AppsServerMissing(RuntimeError):
    """node or the npm packages are not installed."""


@dataclass(frozen=True)
class AppsServer:
    """A running fixture: its origin (``http://127.0.0.1:PORT``) and MCP endpoint."""

    origin: str
    process: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return f"{self.origin}/mcp"

    def reports(self, view: str, *, wait: bool = True, timeout: float = 60.0) -> list[Any]:
        """The reports ``view`` posted; with ``wait``, the server holds the answer until
        there is one (or 30 s)."""
        params = {"view": view, **({"wait": "1"} if wait else {})}
        answer = httpx.get(f"{self.origin}/reports", params=params, timeout=timeout)
        answer.raise_for_status()
        reports: list[Any] = answer.json()
        return reports

    def calls(self) -> list[dict[str, Any]]:
        """The tools called so far, in order: ``{"name", "arguments"}``."""
        answer = httpx.get(f"{self.origin}/calls", timeout=10)
        answer.raise_for_status()
        calls: list[dict[str, Any]] = answer.json()
        return calls


def available() -> str | None:
    """Why the fixture cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (scripts/install --test)"
    for package in ("ext-apps", "sdk"):
        if not (ROOT / "node_modules" / "@modelcontextprotocol" / package).is_dir():
            return f"@modelcontextprotocol/{package} is not installed (scripts/install --test)"
    return None


@contextmanager
def apps_server(port: int = 0) -> Iterator[AppsServer]:
    """Start the fixture on ``port`` of 127.0.0.1 (0: a free one), wait for its ready line,
    and stop it when the block ends."""
    missing = available()
    if missing:
        raise AppsServerMissing(missing)
    process = subprocess.Popen(
        ["node", str(SERVER), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        # Reads every line (the server's errors too) so its pipe never fills.
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith(READY):
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait(START_TIMEOUT)
        said = [line for line in lines if line.startswith(READY)]
        if not said or process.poll() is not None:
            raise RuntimeError(f"the MCP Apps fixture did not start:\n{''.join(lines)}")
        url = said[0][len(READY) :].strip()
        yield AppsServer(url.removesuffix("/mcp"), process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
