"""Stream tickets, the access log, timeouts, a quiet SIGTERM.

These run the real server: the CLI as a subprocess (its own logging, its own signals), or
``server_config`` under uvicorn in a thread on a raw socket.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from hostcall.app import create_app
from hostcall.connections import GuardedH11Protocol
from hostcall.serving import server_config
from tests.support.harness import Harness
from tests.support.live import settings_for
from tests.unit.test_bad_input import assert_error, state


def open_stream(h: Harness, conv_id: str, token: str, **params: str) -> httpx.Response:
    """Open the stream, read its first frame, close it; the response (status, headers)."""
    with h.http.stream(
        "GET", f"/api/conversations/{conv_id}/events", params={"token": token, **params}
    ) as r:
        if r.status_code == 200:
            next(r.iter_lines())
        else:
            r.read()
        return r


def test_stream_ticket_opens_one_stream_once(harness: Harness) -> None:
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    harness.settle(conv)
    before = state(harness, conv)
    # A refused request does not use the ticket up ...
    assert_error(open_stream(harness, conv.id, conv.stream, after="nope"), 400, "bad_event_id")
    assert_error(open_stream(harness, conv.id, conv.stream, surface="bad!"), 400, "bad_request")
    assert open_stream(harness, conv.id, conv.stream).status_code == 200
    # ... an opened stream does: a replayed URL (from a log, a proxy) opens nothing.
    assert_error(open_stream(harness, conv.id, conv.stream), 401, "used_token", "already used")
    fresh = harness.http.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert open_stream(harness, conv.id, fresh.json()["streamToken"]).status_code == 200
    assert state(harness, conv) == before


# ---- the CLI as a subprocess -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def cli_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    port, log = free_port(), tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "hostcall", "serve", "--port", str(port),
             "--db", str(tmp_path / "h.db"), "--log-level", "info"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"server did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield url, process, log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


def test_access_log_never_prints_a_token_and_sigterm_is_quiet(tmp_path: Path) -> None:
    with cli_server(tmp_path) as (url, process, log):
        client = httpx.Client(base_url=url, headers={"Origin": url}, timeout=5)
        tokens: list[str] = []
        streams = []
        for _ in range(3):
            body = client.post("/api/agents/planner/conversations").json()
            tokens += [body["sessionToken"], body["streamToken"]]
            r = client.send(
                client.build_request(
                    "GET",
                    f"/api/conversations/{body['conversationId']}/events",
                    params={"token": body["streamToken"], "after": ""},
                ),
                stream=True,
            )
            assert r.status_code == 200
            streams.append(r)
        # A token in the query of any URL, even a wrong one, is not logged either.
        client.get("/api/conversations/c_x/events", params={"token": tokens[0]})
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it captured (by design).
        assert process.wait(15) in (0, -signal.SIGTERM)
        for r in streams:
            r.close()
        text = log.read_text()
    assert "/events?token=…" in text, text
    for token in tokens:
        assert token not in text and token.split(".")[0] not in text
    # Shutting down with three open streams is not an error, three times over.
    assert "Finished server process" in text, text
    assert "ERROR" not in text and "Traceback" not in text, text


# ---- timeouts on stalled requests ----------------------------------------------------------


class QuickHeaders(GuardedH11Protocol):
    header_timeout = 0.5


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[int]:
    app = create_app(settings_for(tmp_path, body_timeout_seconds=0.5))
    port = free_port()
    config = server_config(app, host="127.0.0.1", port=port, log_level="warning")
    config.http = QuickHeaders
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield port
    server.should_exit = True
    thread.join(10)


def read_all(sock: socket.socket, limit: float) -> bytes:
    sock.settimeout(limit)
    data = b""
    with contextlib.suppress(TimeoutError):
        while chunk := sock.recv(4096):
            data += chunk
    return data


@pytest.mark.parametrize(
    "partial",
    [b"", b"GET /heal", b"POST /api/agents/planner/conversations HTTP/1.1\r\nHost: x\r\n"],
)
def test_request_stalled_before_its_headers_end_is_closed(guarded: int, partial: bytes) -> None:
    with socket.create_connection(("127.0.0.1", guarded)) as sock:
        sock.sendall(partial)
        started = time.monotonic()
        assert read_all(sock, 5) == b""  # closed by the server, not by our 5 s limit
        assert time.monotonic() - started < 3


def test_request_stalled_mid_body_gets_a_408(guarded: int) -> None:
    with socket.create_connection(("127.0.0.1", guarded)) as sock:
        sock.sendall(
            b"POST /api/agents/planner/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Origin: http://127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"loc'
        )
        reply = read_all(sock, 5)
    assert reply.startswith(b"HTTP/1.1 408 "), reply
    assert b'"code":"request_timeout"' in reply


def test_idle_connection_between_requests_is_left_to_keep_alive(guarded: int) -> None:
    with socket.create_connection(("127.0.0.1", guarded)) as sock:
        for pause in (0, 1):  # the second request comes after the header deadline
            time.sleep(pause)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.settimeout(3)
            reply = b""
            while not reply.endswith(b"}"):
                reply += sock.recv(4096)
            assert reply.startswith(b"HTTP/1.1 200 "), reply


# ---- a client that goes away mid-body ----------------------------------------------------


def wait_for_log(log: Path, count: int, *needles: str, timeout: float = 20) -> str:
    """The log once it holds ``needles`` ``count`` times in all (what the server printed
    when it did)."""
    deadline = time.monotonic() + timeout
    while sum((text := log.read_text(errors="replace")).count(n) for n in needles) < count:
        assert time.monotonic() < deadline, f"not {count} of {needles} in the log:\n{text}"
        time.sleep(0.05)
    return text


@pytest.mark.parametrize("path", ["/api/agents/planner/conversations", "/agui/planner"])
def test_a_client_that_disconnects_mid_body_is_one_quiet_line(tmp_path: Path, path: str) -> None:
    gone = f"POST {path}: the client went away before its request body ended"
    with cli_server(tmp_path) as (url, _, log):
        for times in (1, 2):  # and again: the server is none the worse for it
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as sock:
                sock.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
                    + b"Origin: http://localhost:8001\r\nContent-Type: application/json\r\n"
                    b'Content-Length: 100\r\n\r\n{"threadId": "t-1", "me'
                )
            # What it printed for the request: the line, or (as it did) a traceback.
            wait_for_log(log, times, gone, "Exception in ASGI application")
            assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        text = log.read_text()
    assert "Traceback" not in text and "Exception in ASGI" not in text, text
    assert "ERROR" not in text and " 500 " not in text, text
    assert text.count(gone) == 2, text
    # No conversation was made of half a request.
    assert "201 Created" not in text, text
