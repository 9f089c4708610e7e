"""The conversation stream's response (hostcall/sse_response.py) under a real uvicorn server:
pings while idle, a client's leaving, and what an open stream holds in memory."""

from __future__ import annotations

import gc
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hostcall.runtime import Runtime
from tests.support.harness import Conv
from tests.support.live import Live, live_server, settings_for

DEADLINE = 20.0  # seconds; a ceiling for a loaded machine, never a wait
STREAMS = 40
# Objects the collector tracks per open, idle stream (its connection, request, response,
# generator and subscription): 281 with sse-starlette's response and its task group of
# four tasks, 163 with one task writing the body and one waiting for the client to leave.
OBJECTS_PER_STREAM = 220


@pytest.fixture
def pinging(tmp_path: Path) -> Iterator[Live]:
    with live_server(settings_for(tmp_path, ping_seconds=1.0)) as server:
        yield server


def _ticket(live: Live, conv: Conv) -> str:
    r = live.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["streamToken"])


def _open(live: Live, conv: Conv, ticket: str) -> socket.socket:
    """A stream on a plain socket, once its response's headers have arrived."""
    url = httpx.URL(live.url)
    raw = socket.create_connection((url.host, url.port), timeout=DEADLINE)
    target = httpx.URL(live.events_url(conv, token=ticket)).raw_path.decode()
    raw.sendall(f"GET {target} HTTP/1.1\r\nHost: {url.host}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"content-type: text/event-stream" in head.lower(), head
    return raw


def _until_pinged(raw: socket.socket) -> None:
    seen = b""
    deadline = time.monotonic() + DEADLINE
    while b": ping" not in seen:
        assert time.monotonic() < deadline, seen
        seen = seen[-16:] + raw.recv(4096)


def test_an_idle_stream_is_pinged(pinging: Live) -> None:
    conv = pinging.conversation()
    with _open(pinging, conv, _ticket(pinging, conv)) as raw:
        _until_pinged(raw)
        _until_pinged(raw)  # and again: the stream is still live after a ping


def test_a_client_that_leaves_ends_its_stream_and_subscription(pinging: Live) -> None:
    runtime: Runtime = pinging.app.state.hostcall
    conv = pinging.conversation()
    raw = _open(pinging, conv, _ticket(pinging, conv))
    _until_pinged(raw)
    assert runtime.broker.watching(conv.id)
    raw.close()
    deadline = time.monotonic() + DEADLINE
    while runtime.broker.watching(conv.id):
        assert time.monotonic() < deadline, "the stream outlived its client"
        time.sleep(0.02)
    assert pinging.snapshot(conv)  # the server serves on


def test_an_open_stream_holds_few_objects(pinging: Live) -> None:
    conv = pinging.conversation()
    tickets = [_ticket(pinging, conv) for _ in range(STREAMS + 2)]
    for ticket in tickets[:2]:  # warm up, then leave
        with _open(pinging, conv, ticket) as raw:
            _until_pinged(raw)
    gc.collect()
    before = len(gc.get_objects())
    raws = [_open(pinging, conv, ticket) for ticket in tickets[2:]]
    try:
        for raw in raws:  # each stream's generator waits for its next event
            _until_pinged(raw)
        gc.collect()
        per_stream = (len(gc.get_objects()) - before) / STREAMS
    finally:
        for raw in raws:
            raw.close()
    assert per_stream <= OBJECTS_PER_STREAM, per_stream


def test_a_head_request_leaves_nothing_subscribed_and_the_ticket_good(pinging: Live) -> None:
    # A HEAD took the stream's set-up (its ticket, a subscription) and never ran its body,
    # whose end gives them back: the subscription stayed for good.
    runtime: Runtime = pinging.app.state.hostcall
    conv = pinging.conversation()
    ticket = _ticket(pinging, conv)
    head = pinging.client.head(pinging.events_url(conv, token=ticket))
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/event-stream")
    assert not runtime.broker.watching(conv.id)
    with _open(pinging, conv, ticket) as raw:  # the ticket opens the stream itself
        _until_pinged(raw)
