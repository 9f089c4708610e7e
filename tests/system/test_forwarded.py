"""Per-client limits behind a reverse proxy, with real processes on loopback: ``hostcall
serve`` as a subprocess, and a small reverse proxy process
(tests/support/forwarding_proxy.py) that
appends the address it was connected from to ``X-Forwarded-For``, as the shipped nginx does.

Clients connect from addresses of their own (127.0.0.2, 127.0.0.3: Linux routes all of
127/8 to the loopback interface); the proxy connects to Hostcall from 127.0.0.1. With the
proxy trusted (``--forwarded-allow-ips 127.0.0.1``) each client has its own limit; with no
proxy trusted (the default) no ``X-Forwarded-For`` is believed, whoever sends it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hostcall.settings import ROOT
from tests.support.harness import planner_definition, write_agent
from tests.support.processes import free_port

BOARD = "http://localhost:8001"  # one of the demo planner's allowed origins
CREATE = "/api/agents/planner/conversations"
PER_CLIENT = 2  # conversations a minute per client address


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{url} did not start:\n{log.read_text()}")
        time.sleep(0.1)


@contextlib.contextmanager
def running(command: list[str], log: Path, url: str) -> Iterator[str]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        wait_until_up(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def hostcall(tmp_path: Path, *extra: str) -> Iterator[str]:
    agents = tmp_path / "agents"
    data = planner_definition()
    data["limits"] = {"conversations_per_minute_per_client": PER_CLIENT}
    write_agent(agents, data, name="planner.json")
    port = free_port()
    command = [sys.executable, "-m", "hostcall", "serve", "--port", str(port),
               "--db", str(tmp_path / "h.db"), "--agents", str(agents), *extra]  # fmt: skip
    with running(command, tmp_path / "hostcall.log", f"http://127.0.0.1:{port}") as url:
        yield url


@contextlib.contextmanager
def proxy(tmp_path: Path, upstream: str) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "tests.support.forwarding_proxy", "--port", str(port),
               "--upstream", upstream]  # fmt: skip
    with running(command, tmp_path / "proxy.log", f"http://127.0.0.1:{port}") as url:
        yield url


def create(url: str, *, source: str, forwarded: str | None = None) -> int:
    """Create a conversation from ``source`` (the client's own address); its status."""
    headers = {"Origin": BOARD}
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.post(url + CREATE, headers=headers).status_code


def test_behind_a_trusted_proxy_each_client_has_its_own_limit(tmp_path: Path) -> None:
    with (
        hostcall(tmp_path, "--forwarded-allow-ips", "127.0.0.1") as upstream,
        proxy(tmp_path, upstream) as url,
    ):
        one = [create(url, source="127.0.0.2") for _ in range(PER_CLIENT + 1)]
        assert one == [201] * PER_CLIENT + [429]
        # Another client behind the same proxy still has its whole allowance.
        assert [create(url, source="127.0.0.3") for _ in range(PER_CLIENT)] == [201] * PER_CLIENT
        # A client that forges X-Forwarded-For through the proxy is still itself: the proxy
        # appends its real address, the one Hostcall believes (the first one it does not trust).
        assert create(url, source="127.0.0.2", forwarded="198.51.100.7") == 429
        assert create(url, source="127.0.0.3", forwarded="198.51.100.8") == 429


def test_with_no_trusted_proxy_a_forged_forwarded_for_is_not_believed(tmp_path: Path) -> None:
    with hostcall(tmp_path) as url:
        # Straight from 127.0.0.1, each request claiming another client: one limit for all.
        got = [
            create(url, source="127.0.0.1", forwarded=f"198.51.100.{n}")
            for n in range(PER_CLIENT + 1)
        ]
        assert got == [201] * PER_CLIENT + [429]
        # The real address of another client still counts on its own.
        assert create(url, source="127.0.0.2", forwarded="198.51.100.1") == 201
        with proxy(tmp_path, url) as front:
            # Behind a proxy it does not trust, every client is the proxy (127.0.0.1, spent).
            assert create(front, source="127.0.0.3") == 429


@pytest.mark.parametrize("value", ["10.0.0.300", "nginx", "10.0.0.0/33", "127.0.0.1,,x"])
def test_a_bad_forwarded_allow_ips_is_refused_at_start(tmp_path: Path, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hostcall", "serve", "--db", str(tmp_path / "h.db"),
         "--forwarded-allow-ips", value],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "--forwarded-allow-ips" in done.stderr and "address" in done.stderr, done.stderr
