"""``hostcall serve --workers 2`` under its supervisor: a starved worker keeps its connections,
a dead or hung one is replaced, and each decision is said at WARNING or above.

A worker is starved on purpose with SIGSTOP: the extreme of a machine too busy to give it
CPU (or of a debugger pausing it). It is alive, and everything it holds is answered once it
runs again. The waits are for signals: the supervisor's log lines, processes appearing or
going, bytes on a stream.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import psutil
import pytest

from hostcall.settings import ROOT
from tests.support.databases import fresh_schema
from tests.support.harness import SECRET
from tests.support.processes import free_port

SLOW = 90.0  # the ceiling of every wait, on a loaded 2-core machine
ORIGIN = {"Origin": "http://localhost:8001"}  # an origin the demo agents allow
T = TypeVar("T")


@dataclass
class Served:
    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def workers(self) -> list[psutil.Process]:
        # uvicorn's workers are multiprocessing "spawn" children of the supervisor (not its
        # resource tracker); a worker just gone is not one.
        found = []
        try:
            children = psutil.Process(self.popen.pid).children()
        except psutil.NoSuchProcess:
            return []
        for child in children:
            try:
                if "spawn_main" in " ".join(child.cmdline()) and _alive(child):
                    found.append(child)
            except psutil.Error:
                pass
        return found


def _until(what: str, found: Callable[[], T | None], served: Served) -> T:
    deadline = time.monotonic() + SLOW
    while True:
        assert served.popen.poll() is None, f"the supervisor exited:\n{served.text()}"
        if (value := found()) is not None:
            return value
        assert time.monotonic() < deadline, f"no {what} in {SLOW:g} s:\n{served.text()}"
        time.sleep(0.05)


@contextmanager
def serve(tmp_path: Path, *options: str) -> Iterator[Served]:
    with fresh_schema() as url:
        port, log = free_port(), tmp_path / "serve.log"
        env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET[0]}
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "hostcall", "serve", "--db", url, "--port", str(port),
                 "--workers", "2", "--log-level", "warning", *options],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        served = Served(popen, port, log)
        try:
            _until("two workers", lambda: served.workers()[1:] or None, served)
            _until("answer from /healthz", lambda: _healthy(served.url) or None, served)
            yield served
        finally:
            workers = served.workers()
            for worker in workers:  # one left stopped must not hold up the stop
                worker.send_signal(signal.SIGCONT)
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(60)
            except subprocess.TimeoutExpired:  # nothing of it may outlive the test
                for process in [*workers, popen]:
                    process.kill()
                popen.wait(10)
            print(served.text())  # shown by pytest when the test failed


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _alive(worker: psutil.Process) -> bool:
    try:
        return worker.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _holder(served: Served, client: socket.socket) -> psutil.Process:
    """The worker whose end of the connection ``client`` is."""
    port = client.getsockname()[1]

    def find() -> psutil.Process | None:
        for worker in served.workers():
            for conn in worker.net_connections(kind="tcp"):
                if conn.raddr and conn.raddr.port == port:
                    return worker
        return None

    return _until("worker holding the stream", find, served)


def _said(served: Served, pattern: str) -> Callable[[], re.Match[str] | None]:
    return lambda: re.search(pattern, served.text())


def test_a_starved_worker_keeps_its_stream_and_finishes_the_run_it_carries(
    tmp_path: Path,
) -> None:
    with serve(tmp_path) as served:
        created = httpx.post(f"{served.url}/api/agents/planner/conversations", headers=ORIGIN)
        assert created.status_code == 201, created.text
        body = created.json()
        cid, auth = body["conversationId"], {"Authorization": f"Bearer {body['sessionToken']}"}
        stream = socket.create_connection(("127.0.0.1", served.port), timeout=SLOW)
        path = f"/api/conversations/{cid}/events?token={body['streamToken']}"
        stream.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        assert stream.recv(65536).startswith(b"HTTP/1.1 200"), "the stream did not open"
        starved = _holder(served, stream)

        starved.send_signal(signal.SIGSTOP)
        # uvicorn's supervisor kills it here, 5 s on: the stream is cut with it.
        _until(
            "word of the starved worker, nor its end",
            lambda: (
                _said(served, rf"worker \[{starved.pid}\] has not answered")()
                or (None if _alive(starved) else "killed")
            ),
            served,
        )
        assert _alive(starved), "the supervisor killed a worker that was only starved"
        starved.send_signal(signal.SIGCONT)
        _until("word that it answered again",
               _said(served, rf"worker \[{starved.pid}\] answered again"), served)  # fmt: skip

        sent = httpx.post(f"{served.url}/api/conversations/{cid}/messages",
                          json={"text": "hello"}, headers=auth)  # fmt: skip
        assert sent.status_code == 202, sent.text
        read = b""
        while b"RUN_FINISHED" not in read:
            chunk = stream.recv(65536)
            assert chunk, f"the starved worker's stream was cut; it read {read[-300:]!r}"
            read += chunk
        stream.close()
        assert starved.pid in {w.pid for w in served.workers()}


def test_a_dead_worker_and_a_hung_one_are_replaced_and_said_so(tmp_path: Path) -> None:
    with serve(tmp_path, "--worker-timeout", "6") as served:
        dead, hung = served.workers()
        dead.send_signal(signal.SIGKILL)
        _until("word of the dead worker",
               _said(served, rf"WARNING .*worker \[{dead.pid}\] exited \(killed by SIGKILL\)"),
               served)  # fmt: skip

        hung.send_signal(signal.SIGSTOP)  # stays silent past --worker-timeout
        _until("word of the hung worker",
               _said(served, rf"ERROR .*worker \[{hung.pid}\] has not answered for \d+ s"),
               served)  # fmt: skip
        old = {dead.pid, hung.pid}

        def replaced() -> bool | None:
            pids = {w.pid for w in served.workers()}
            return (len(pids) == 2 and pids.isdisjoint(old)) or None

        _until("two new workers", replaced, served)
        _until("answer from a new worker", lambda: _healthy(served.url) or None, served)


@pytest.mark.parametrize("timeout", ["-1"])
def test_a_negative_worker_timeout_is_refused(timeout: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hostcall", "serve", "--worker-timeout", timeout],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--worker-timeout must be 0 (never) or more, not -1" in done.stderr
