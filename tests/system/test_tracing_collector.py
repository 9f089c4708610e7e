"""``hostcall serve`` with tracing on and its collector failing: a collector that accepts
connections and never answers, and one that refuses them. Spans are waiting to be sent when
SIGTERM comes; the process still exits promptly, and says what it dropped."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hostcall.qa.servers import free_port, start_hostcall

ORIGIN = {"Origin": "http://localhost:8001"}  # one the demo planner allows
# Well below what the SDK's defaults took (a 10 s export timeout, retried within it, behind a
# 30 s flush): on a loaded 2-core machine a healthy SIGTERM takes well under a second.
EXIT_WITHIN = 6.0


@contextlib.contextmanager
def collector(kind: str) -> Iterator[str]:
    """An OTLP endpoint on loopback that fails: ``hangs`` (the kernel completes connections
    into a backlog nobody accepts from, so a request waits for ever), or ``refuses``."""
    if kind == "refuses":
        yield f"http://127.0.0.1:{free_port()}"  # nothing listens there
        return
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def run_once(url: str) -> None:
    """A conversation whose run called a tool: its spans are queued for the collector."""
    with httpx.Client(base_url=url, headers=ORIGIN, timeout=10) as client:
        body = client.post("/api/agents/planner/conversations").json()
        auth = {"Authorization": f"Bearer {body['sessionToken']}"}
        cid = body["conversationId"]
        r = client.post(f"/api/conversations/{cid}/messages", json={"text": "What next?"},
                        headers=auth)  # fmt: skip
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 20
        while (client.get(f"/api/conversations/{cid}", headers=auth).json()["run"]["status"]
               == "running"):  # fmt: skip
            assert time.monotonic() < deadline, "the run did not settle"
            time.sleep(0.05)


@pytest.mark.parametrize("kind", ["hangs", "refuses"])
def test_sigterm_exits_promptly_when_the_collector_fails(tmp_path: Path, kind: str) -> None:
    with collector(kind) as endpoint:
        server = start_hostcall(tmp_path, extra=["--otlp-endpoint", endpoint], log_level="info")
        try:
            run_once(server.url)
            server.process.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            try:
                code = server.process.wait(EXIT_WITHIN)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"still running {EXIT_WITHIN:g} s after SIGTERM:\n{server.output()}"
                ) from None
            took = time.monotonic() - sent
        finally:
            server.stop(signal.SIGKILL)
    text = server.output()
    assert code in (0, -signal.SIGTERM), text
    assert took < EXIT_WITHIN, text
    assert "the collector did not take the last spans within 2 s" in text, text
    assert "Finished server process" in text, text
