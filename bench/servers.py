"""The servers under test, as subprocesses on 127.0.0.1 that are always stopped."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from hostcall.quotas import LIMIT_KEYS

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PING_SECONDS = 15  # hostcall/settings.py's ping_seconds default; the floor uses the same
LOG_LEVEL = "warning"  # both servers: no per-request access log in the measurement
START_TIMEOUT = 30.0


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (this process; children inherit it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def rss(self) -> int:
        return int(psutil.Process(self.proc.pid).memory_info().rss)

    def cpu(self) -> float:
        """Seconds of CPU the server has used (user and system)."""
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def established(self) -> int:
        conns = psutil.Process(self.proc.pid).net_connections(kind="tcp")
        return sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}"
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextlib.contextmanager
def running(
    name: str, argv: list[str], workdir: Path, env: dict[str, str], cwd: Path = ROOT
) -> Iterator[Server]:
    """Start ``argv + --port N`` in ``cwd``, wait for /healthz, yield; stop it whatever
    happens."""
    port = _free_port()
    log_path = workdir / f"{name}-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*argv, "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=raise_fd_limit,
            start_new_session=True,  # our Ctrl-C stops it via finally
        )
    server = Server(name, port, proc, log_path)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            server.check_alive()
            with contextlib.suppress(httpx.TransportError):
                health = httpx.get(f"{server.url}/healthz", timeout=1.0, trust_env=False)
                if health.status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{name} not healthy after {START_TIMEOUT}s:\n{server.log_tail()}"
                )
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def limit_keys(root: Path = ROOT) -> list[str]:
    """The agent file's ``limits`` keys that checkout ``root`` knows: an older checkout
    refuses a key it lacks, so its own are asked for (none, if it has no limits)."""
    if root == ROOT:
        return sorted(LIMIT_KEYS)
    if not (root / "server" / "hostcall" / "quotas.py").is_file():
        # Not asked: this environment's editable install would answer for a module the
        # checkout lacks.
        return []
    ask = (
        "import json; from hostcall.quotas import LIMIT_KEYS; print(json.dumps(sorted(LIMIT_KEYS)))"
    )
    found = subprocess.run(
        [sys.executable, "-c", ask],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root / "server")),
        capture_output=True,
        text=True,
        check=False,
    )
    keys: list[str] = json.loads(found.stdout) if found.returncode == 0 else []
    return keys


def bench_agents(workdir: Path, root: Path = ROOT) -> Path:
    """The demo agents dir of checkout ``root`` (with its platform files), plus ``bench``: a
    copy of its planner, whose read_board_tasks flow needs no approval. Each checkout's own
    demo agents, so a checkout from before a key of today's agent files accepts them."""
    directory = workdir / "agents"
    if not directory.exists():
        shutil.copytree(root / "demo" / "agents", directory)
        agent = json.loads((directory / "planner.json").read_text())
        agent["id"] = "bench"
        # A benchmark is one client sending as fast as it can: rate limits off (0).
        if keys := limit_keys(root):
            agent["limits"] = {key: 0 for key in keys}
        # The page tool's run (browser bench, section 4) shaped as the client tool's: a
        # sentence, then the call, so the two round trips differ by the tool alone.
        rules = agent["model"]["rules"]
        said = next((r["say"] for r in rules if r.get("tool") == "read_board_tasks"), None)
        for rule in rules:
            if rule.get("tool") == "count_tasks" and said:
                rule.setdefault("say", said)
        (directory / "bench.json").write_text(json.dumps(agent, indent=2))
        # The browser bench's section 5 (bench/attach_bench.py): the same agent taking PNG
        # images, answering a message with one at once. Its own agent: the others' widget
        # opens without the attach button, as the weight section measures it. Only for a
        # checkout that reads an attachments block (an older one would refuse the file).
        if (root / "server" / "hostcall" / "attachments").is_dir():
            files = dict(agent, id="bench-files", attachments={"types": {"image/png": "5MB"}})
            image = {"match": "", "attachment": {"type": "image/png"},
                     "reply": "I see your image {{ attachment.name }}."}  # fmt: skip
            files["model"] = dict(agent["model"], rules=[image, *rules])
            (directory / "bench-files.json").write_text(json.dumps(files, indent=2))
    return directory


def serve_argv(workdir: Path, db: str | Path, root: Path = ROOT) -> list[str]:
    """``hostcall serve`` of checkout ``root``'s bench agents on ``db`` (a file or a URL), on
    loopback, quiet; ``running`` adds ``--port``."""
    return [sys.executable, "-m", "hostcall", "serve", "--agents", str(bench_agents(workdir, root)),
            "--db", str(db), "--host", HOST, "--log-level", LOG_LEVEL]  # fmt: skip


def hostcall(
    workdir: Path, db: Path, secret: str, root: Path = ROOT, extra_env: dict[str, str] | None = None
) -> contextlib.AbstractContextManager[Server]:
    """Hostcall's server; ``root``: the checkout whose ``hostcall`` package it runs (its source
    root ``server/`` goes first on ``PYTHONPATH``), with this Python environment."""
    argv = serve_argv(workdir, db, root)
    env = dict(
        os.environ,
        HOSTCALL_SECRET_KEYS=secret,
        PYTHONPATH=str(root / "server"),
        **(extra_env or {}),
    )
    return running("hostcall", argv, workdir, env, cwd=root)


def floor(workdir: Path) -> contextlib.AbstractContextManager[Server]:
    argv = [
        sys.executable,
        str(ROOT / "bench" / "floor_app.py"),
        "--ping",
        str(PING_SECONDS),
        "--log-level",
        LOG_LEVEL,
    ]
    return running("floor", argv, workdir, dict(os.environ))
