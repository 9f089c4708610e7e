"""A real Hostcall server as a subprocess, and a host page on another origin, for tests.

The server listens on ``127.0.0.1`` and the host page on ``localhost``: two origins, as on a
real site, so the widget's origin checks run exactly as in production.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

#: A fixed development key: tokens stay valid across a restart of the same test's server.
TEST_SECRET = "hostcall-qa-secret-key-0123456789abcdef"
START_TIMEOUT = 60.0  # a cold start on a loaded 2-core CI machine is slow


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_agent(directory: Path, agent: Mapping[str, Any] | Path) -> Path:
    """An agents directory holding ``agent``: a dict (one agent file), an agent file, or a
    directory of them (copied, with its ``_platform.json`` if any)."""
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(agent, Path):
        if agent.is_dir():
            shutil.copytree(agent, directory, dirs_exist_ok=True)
        else:
            shutil.copy(agent, directory / agent.name)
        return directory
    name = str(agent.get("id", "agent"))
    (directory / f"{name}.json").write_text(json.dumps(agent, indent=2), encoding="utf-8")
    return directory


@dataclass
class HostcallServer:
    """A running ``hostcall serve`` (or ``hostcall demo``) subprocess."""

    process: subprocess.Popen[bytes]
    port: int
    db: Path
    log: Path
    host_port: int | None = None  # ``demo`` only: its task-board page on localhost

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # The names the project's own e2e tests grew up with.
    @property
    def hostcall(self) -> str:
        return self.url

    @property
    def board(self) -> str:
        assert self.host_port is not None, "only `hostcall demo` serves the board"
        return f"http://localhost:{self.host_port}/"

    def output(self) -> str:
        """What the server printed (its log: operators' details land here)."""
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_hostcall(
    tmp: Path,
    *,
    agents: Path | None = None,
    command: str = "serve",
    db: Path | None = None,
    port: int | None = None,
    host_port: int | None = None,
    allow_origins: tuple[str, ...] = (),
    extra: list[str] | None = None,
    log_level: str = "warning",
    env: Mapping[str, str] | None = None,
) -> HostcallServer:
    """Start ``hostcall COMMAND`` on free ports and wait until it answers ``/healthz``.

    If it exits or does not answer within a minute, raise with everything it printed.
    """
    port = port or free_port()
    db = db or tmp / "hostcall.db"
    log = tmp / f"hostcall-{port}-{time.monotonic_ns()}.log"
    args = [sys.executable, "-m", "hostcall", command, "--port", str(port), "--db", str(db),
            "--log-level", log_level]  # fmt: skip
    if agents is not None:
        args += ["--agents", str(agents)]
    if command == "demo":
        host_port = host_port or free_port()
        args += ["--host-port", str(host_port)]
    for origin in allow_origins:
        args += ["--allow-origin", origin]
    args += extra or []
    environ = {**os.environ, "HOSTCALL_SECRET_KEYS": TEST_SECRET, "PYTHONUNBUFFERED": "1"}
    environ.update(env or {})
    with log.open("wb") as out:
        process = subprocess.Popen(args, cwd=tmp, env=environ, stdout=out, stderr=subprocess.STDOUT)
    server = HostcallServer(process, port, db, log, host_port)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"hostcall {command} exited with {process.returncode}:\n"
                               f"{server.output()}")  # fmt: skip
        try:
            ok = httpx.get(f"{server.url}/healthz", timeout=0.5).status_code == 200
            if ok and host_port:
                ok = httpx.get(server.board, timeout=0.5).status_code == 200
            if ok:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"hostcall {command} did not start in {START_TIMEOUT:.0f} s:\n"
                       f"{server.output()}")  # fmt: skip


# ----------------------------------------------------------------------------- host page


@dataclass
class HostPage:
    """A page on ``http://localhost:PORT`` that embeds the widget with the README's snippet.

    ``snippet`` attributes become the script tag's ``data-*`` (``{"locale": "fr"}`` →
    ``data-locale="fr"``); ``body`` is extra HTML; ``script`` is JavaScript run where a
    page's own script runs, at the end of the body (the elements above it exist): register
    handlers there, or later with ``page.evaluate``.
    """

    hostcall_url: str
    agent: str
    snippet: dict[str, str] = field(default_factory=dict)
    script: str = ""
    body: str = ""
    port: int = 0

    @property
    def origin(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/"

    def html(self) -> str:
        attrs = "".join(
            f' data-{html.escape(k)}="{html.escape(v)}"' for k, v in self.snippet.items()
        )
        src = html.escape(f"{self.hostcall_url}/embed.js")
        # The snippet exactly as the README gives it (the queue stub, then the loader).
        return (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>Host page</title>"
            "<script>window.Hostcall=window.Hostcall||function(){(Hostcall.q=Hostcall.q||[])"
            ".push(arguments)}</script>"
            f'<script src="{src}" data-agent="{html.escape(self.agent)}"{attrs} async></script>'
            f"</head><body><main><h1>Host page</h1>{self.body}</main>"
            f"<script>{self.script}</script></body></html>"
        )


@contextmanager
def serve_host_page(page: HostPage) -> Iterator[HostPage]:
    """Serve ``page`` at ``http://localhost:<free port>/`` from a thread until the block ends."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    async def index(request: Any) -> HTMLResponse:
        return HTMLResponse(page.html(), headers={"Cache-Control": "no-store"})

    with serve_in_thread(Starlette(routes=[Route("/", index)]), port=page.port) as port:
        page.port = port
        yield page


@contextmanager
def serve_in_thread(app: Any, *, port: int = 0, lifespan: str = "off") -> Iterator[int]:
    """Run the ASGI ``app`` under uvicorn in a background thread on ``port`` of 127.0.0.1
    (0: a free one); yields the port."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(app, log_level="warning", lifespan=lifespan, ws="none",  # type: ignore[arg-type]
                            access_log=False, timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on 127.0.0.1:{port}")
        time.sleep(0.01)
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
