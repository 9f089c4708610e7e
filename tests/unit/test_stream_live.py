"""Live events on an open stream (hostcall/stream.py, hostcall/sse_response.py), against a real
uvicorn server on 127.0.0.1 and a real SQLite file: a stream that waits for its next event has
it written by the task that published it, and what must hold then (order, exactly once, the
claim of a dispatch before its write, a slow reader neither holding its publisher nor kept)."""

from __future__ import annotations

import asyncio
import re
import select
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from hostcall import stream as stream_module
from hostcall.protocol.events import CustomName, TextMessageContent
from hostcall.runtime import Runtime
from tests.support.harness import Conv
from tests.support.live import Live, live_server, settings_for

T = TypeVar("T")

DEADLINE = 20.0  # seconds; a ceiling for a loaded machine, never a wait
DISPATCH = CustomName.TOOL_CALL_DISPATCH.value
SURFACE = "page-one"
# Events enough that a reader that takes nothing fills its socket and the server's (whose
# send buffer the kernel grows up to tcp_wmem's maximum, 4 MiB by default) and the rest
# wait in the transport's buffer, its flow control paused: then a write waits.
BIG = "x" * 128 * 1024
_SEND_BUFFER_MOST = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
MANY = _SEND_BUFFER_MOST // len(BIG) + 16
# One event more than the sockets can hold: its write pauses the transport at once.
HUGE = "x" * (_SEND_BUFFER_MOST + 1024 * 1024)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    with live_server(settings_for(tmp_path)) as server:
        yield server


@pytest.fixture
def unpinged(tmp_path: Path) -> Iterator[Live]:
    """A server that sends no pings: only its events wake a waiting stream's task."""
    with live_server(settings_for(tmp_path, ping_seconds=0)) as server:
        yield server


class ServerLoop:
    """The live server's event loop, caught as a stream subscribes: the test's writes run
    on it, as a request's handler would publish them."""

    def __init__(self, runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runtime = runtime
        self.loop: asyncio.AbstractEventLoop | None = None
        subscribe = runtime.broker.subscribe

        def caught(*args: Any) -> Any:
            self.loop = asyncio.get_running_loop()
            return subscribe(*args)

        monkeypatch.setattr(runtime.broker, "subscribe", caught)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self.loop is not None, "no stream has subscribed yet"
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(DEADLINE)

    async def emit(self, conversation_id: str, delta: str) -> int:
        event = await self.runtime.engine.journal.emit(
            conversation_id, TextMessageContent("m_live", delta)
        )
        return event.seq


def _runtime(live: Live) -> Runtime:
    runtime: Runtime = live.app.state.hostcall
    return runtime


def _open(
    live: Live, conv: Conv, *, receive_buffer: int | None = None, **params: str
) -> socket.socket:
    """A stream on a plain socket, once its response's headers have arrived (the stream
    then waits for its next event: its set-up and its first wait are one step)."""
    url = httpx.URL(live.url)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:  # before connecting: it sets the window offered
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.settimeout(DEADLINE)
    raw.connect((url.host, url.port))
    target = httpx.URL(live.events_url(conv, **params)).raw_path.decode()
    raw.sendall(f"GET {target} HTTP/1.1\r\nHost: {url.host}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)  # byte by byte: nothing of the body is taken here
    assert head.startswith(b"HTTP/1.1 200"), head
    return raw


def _seqs(raw: socket.socket, conv: Conv, count: int) -> list[int]:
    """The ids of the next ``count`` events on ``raw``, in the order they came (each chunk
    read is searched once: the whole, megabytes here, would be searched on every read)."""
    pattern = re.compile(rb"\nid: " + re.escape(conv.id.encode()) + rb":(\d+)\r\n")
    seqs: list[int] = []
    rest = b"\n"  # from the last line break read on: a line that may go on
    while len(seqs) < count:
        got = raw.recv(256 * 1024)
        assert got, f"the stream ended after {seqs}"
        lines = rest + got
        end = lines.rfind(b"\n")
        seqs += [int(n) for n in pattern.findall(lines, 0, end + 1)]
        rest = lines[end:]
    return seqs


def test_a_live_event_is_on_the_socket_when_its_publish_returns(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Published to the stream's queue, it waited for the stream's task to wake on a later
    # pass of the event loop and write it. The server's loop is held below until the frame
    # is readable: only a write made by the publisher itself can get there.
    server = ServerLoop(_runtime(live), monkeypatch)
    conv = live.conversation()
    with _open(live, conv) as raw:

        async def emit_then_look() -> bool:
            await server.emit(conv.id, "now")
            readable, _, _ = select.select([raw], [], [], DEADLINE / 4)
            return bool(readable)

        assert server.run(emit_then_look()), "the event was not written as it was published"
        assert _seqs(raw, conv, 1) == [1]
        # And again: the stream waits again once its write went out.
        assert server.run(emit_then_look())
        assert _seqs(raw, conv, 1) == [2]


def test_a_unit_s_events_reach_a_waiting_stream_in_one_write(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A unit of work publishes several events at once (a call's start, arguments, end and
    # dispatch): one write for them all, one chunk of the response, not a write each.
    runtime = _runtime(live)
    server = ServerLoop(runtime, monkeypatch)
    conv = live.conversation()
    deltas = [TextMessageContent("m_live", delta) for delta in ("one", "two", "three")]
    with _open(live, conv) as raw:
        server.run(runtime.engine.journal.emit_all(conv.id, deltas))
        got = b""
        while not got.endswith(b"\r\n\r\n\r\n"):  # a chunk's frames, then its end
            got += raw.recv(4096)
    size, _, chunk = got.partition(b"\r\n")
    assert len(chunk) == int(size, 16) + 2, got
    assert chunk.count(b"\nid: ") + chunk.startswith(b"id: ") == 3, got


def test_a_reader_that_stops_reading_neither_holds_its_publisher_nor_loses_an_event(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader takes nothing while MANY big events are published: the first writes fill
    # the sockets, then a write waits for the client, and every event published after it
    # is queued behind it. Each publish returns at once; the reader, once it reads, gets
    # every event once, in order.
    server = ServerLoop(_runtime(live), monkeypatch)
    conv = live.conversation()
    with _open(live, conv, receive_buffer=4096) as raw:
        published = [server.run(server.emit(conv.id, BIG)) for _ in range(MANY)]
        # The conversation serves on meanwhile: another request's events are published too.
        live.say(conv, "hello")
        snapshot = live.settle(conv)
        last = int(snapshot["lastEventId"].rpartition(":")[2])
        assert published == list(range(1, MANY + 1))
        assert _seqs(raw, conv, last) == list(range(1, last + 1))


def test_a_reader_that_takes_nothing_for_the_send_timeout_is_let_go(
    unpinged: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The write that waits is the publisher's, and the last: no event comes after it to wake
    # the stream's task, nor a ping. The client is dropped once it has taken nothing for
    # the send timeout, as when the stream's task made the write (it reconnects with
    # Last-Event-ID), and its subscription with it.
    monkeypatch.setattr(stream_module, "SEND_TIMEOUT", 0.5)
    live = unpinged
    runtime = _runtime(live)
    server = ServerLoop(runtime, monkeypatch)
    conv = live.conversation()
    with _open(live, conv, receive_buffer=4096) as raw:
        server.run(server.emit(conv.id, HUGE))  # taken by the transport, which then pauses
        server.run(server.emit(conv.id, "then"))
        deadline = time.monotonic() + DEADLINE
        while runtime.broker.watching(conv.id):
            assert time.monotonic() < deadline, "the slow reader was kept"
            time.sleep(0.02)
        while raw.recv(256 * 1024):  # what was sent, then the end: the server closed it
            pass
    assert live.snapshot(conv)  # the server serves on


def test_events_published_while_a_dispatch_is_claimed_follow_it_in_order(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dispatch addressed to the stream's surface is claimed (a write to the store) before
    # it is written; while the claim is under way the stream is not waiting, so an event
    # published meanwhile is queued behind the dispatch, not written ahead of it.
    runtime = _runtime(live)
    server = ServerLoop(runtime, monkeypatch)
    surfaces = runtime.services.surfaces
    claim = surfaces.claim
    claiming = threading.Event()
    release: list[asyncio.Event] = []

    async def held(*args: Any) -> bool:
        release.append(asyncio.Event())
        claiming.set()
        await release[0].wait()
        return await claim(*args)

    monkeypatch.setattr(surfaces, "claim", held)
    conv = live.conversation()
    r = live.client.post(
        f"/api/conversations/{conv.id}/capabilities",
        json={"tools": ["read_board_tasks", "create_task"], "surfaceId": SURFACE},
        headers=conv.auth,
    )
    assert r.status_code == 200, r.text
    with _open(live, conv, surface=SURFACE) as raw:
        live.say(conv, "What should I work on next?")
        assert claiming.wait(DEADLINE), "the dispatch was never claimed"
        after = server.run(server.emit(conv.id, "meanwhile"))
        assert server.loop is not None
        server.loop.call_soon_threadsafe(release[0].set)
        seqs = _seqs(raw, conv, after)
    assert seqs == list(range(1, after + 1))
    call = live.snapshot(conv)["calls"][-1]
    assert (call["state"], call["surfaceId"]) == ("delivered", SURFACE)
