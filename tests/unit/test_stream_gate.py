"""Streams take turns to connect (hostcall/stream_gate.py), against a real uvicorn server.

A stream's set-up is held open here by a store read that waits for the test's word (the
real read, then a wait), so that the streams behind it wait at the gate for as long as the
test needs: what they then get, and what a stream past the bound is told.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostcall.runtime import Runtime
from hostcall.settings import Capacity
from hostcall.stream_gate import TURNS
from tests.support.harness import Conv
from tests.support.live import Frame, Live, frames, live_server, settings_for

WAIT = 10.0


def _runtime(live: Live) -> Runtime:
    runtime: Runtime = live.app.state.hostcall
    return runtime


def _ticket(live: Live, conv: Conv) -> str:
    r = live.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["streamToken"])


def _until(done: Callable[[], bool], what: str) -> None:
    """Wait for a state of the server's, read from this thread."""
    deadline = time.monotonic() + WAIT
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


class HeldSetUps:
    """First streams' set-ups of ``conversation_id`` wait inside their store read until
    ``release``; ``inside`` counts those waiting, ``most`` the most ever at once."""

    def __init__(self, runtime: Runtime, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.inside = 0
        self.most = 0
        self._go = threading.Event()
        self._read = runtime.store.open_stream

    async def open_stream(self, conversation_id: str, *args: Any) -> Any:
        found = await self._read(conversation_id, *args)
        if conversation_id == self.conversation_id:
            self.inside += 1
            self.most = max(self.most, self.inside)
            try:
                await asyncio.to_thread(self._go.wait, WAIT)
            finally:
                self.inside -= 1
        return found

    def release(self) -> None:
        self._go.set()


@contextmanager
def held(live: Live, monkeypatch: pytest.MonkeyPatch, conv: Conv) -> Iterator[HeldSetUps]:
    hold = HeldSetUps(_runtime(live), conv.id)
    monkeypatch.setattr(_runtime(live).store, "open_stream", hold.open_stream)
    try:
        yield hold
    finally:
        hold.release()


def _open(live: Live, conv: Conv, token: str | None = None) -> httpx.Response:
    """A stream's GET, its response open (headers read, body not); the caller closes it."""
    client = httpx.Client(base_url=live.url, timeout=httpx.Timeout(WAIT))
    request = client.build_request("GET", live.events_url(conv, token=token))
    response = client.send(request, stream=True)
    response.extensions["client"] = client
    return response


def _close(response: httpx.Response) -> None:
    response.close()
    response.extensions["client"].close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    settings = settings_for(tmp_path, capacity=Capacity(max_stream_waiters=3, retry_after=4))
    with live_server(settings) as server:
        yield server


def test_streams_connecting_at_once_set_up_one_turn_at_a_time(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every connecting stream's set-up ran at once, ahead of other users' requests.
    conv = live.conversation()
    tickets = [_ticket(live, conv) for _ in range(3)]
    gate = _runtime(live).stream_gate
    with held(live, monkeypatch, conv) as hold, ThreadPoolExecutor(3) as pool:
        opening = [pool.submit(_open, live, conv, t) for t in tickets]
        _until(lambda: hold.inside == TURNS and gate.waiting == 3 - TURNS, "streams at the gate")
        # Another user is answered meanwhile.
        assert live.snapshot(conv)["conversationId"] == conv.id
        hold.release()
        responses = [f.result(WAIT) for f in opening]
    for response in responses:
        assert response.status_code == 200
        _close(response)
    assert hold.most == TURNS


def test_a_stream_that_waited_at_the_gate_gets_the_whole_log_then_live_events(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = live.conversation()
    conv, last = live.finished_conversation()
    gate = _runtime(live).stream_gate
    with held(live, monkeypatch, blocker) as hold, ThreadPoolExecutor(2) as pool:
        first = pool.submit(_open, live, blocker)
        _until(lambda: hold.inside == TURNS, "the blocker's set-up holding the turn")
        waiting: Future[httpx.Response] = pool.submit(_open, live, conv)
        _until(lambda: gate.waiting == 1, "the stream waiting at the gate")
        # Committed while it waits, before it has subscribed: its replay must hold them.
        live.say(conv, "hello")
        end = int(live.settle(conv)["lastEventId"].rpartition(":")[2])
        hold.release()
        response = waiting.result(WAIT)
        _close(first.result(WAIT))
    try:
        assert response.status_code == 200
        got = frames(response)
        replayed = [next(got) for _ in range(end)]
        live.say(conv, "hello")  # then live, with no gap and no repeat
        following = next(got)
    finally:
        _close(response)
    stored = asyncio.run(_runtime(live).store.events_after(conv.id, 0))
    assert end > last and [f.seq for f in replayed] == list(range(1, end + 1))
    assert [(f.event, f.data) for f in replayed] == [(e.name, e.data) for e in stored[:end]]
    assert replayed[-1].event == "RUN_FINISHED"
    assert (following.seq, following.event) == (end + 1, "RUN_STARTED")
    live.settle(conv)


def test_a_stream_past_the_bound_of_waiters_is_refused_with_retry_after_and_its_ticket_kept(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Waiting streams were unbounded: each a request and a connection held in memory.
    conv = live.conversation()
    gate = _runtime(live).stream_gate
    tickets = [_ticket(live, conv) for _ in range(TURNS + 3 + 1)]  # in, waiting, refused
    with held(live, monkeypatch, conv) as hold, ThreadPoolExecutor(len(tickets)) as pool:
        opening = [pool.submit(_open, live, conv, t) for t in tickets[:-1]]
        _until(lambda: hold.inside == TURNS and gate.waiting == 3, "the gate full")
        refused = live.client.get(live.events_url(conv, token=tickets[-1]))
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "overloaded", error
        assert error["details"] == {"retryAfter": 4, "reason": "stream_waiters"}, error
        assert refused.headers["Retry-After"] == "4"
        hold.release()
        opened = [f.result(WAIT) for f in opening]
    for response in opened:
        assert response.status_code == 200
        _close(response)
    # Refused before its ticket was looked at: sent again, the same ticket opens it.
    with live.stream(live.events_url(conv, token=tickets[-1])) as stream:
        live.say(conv, "hello")
        first: Frame = next(stream)
    assert (first.seq, first.event) == (1, "RUN_STARTED")
    live.settle(conv)


def test_the_bound_of_stream_waiters_is_read_from_the_environment() -> None:
    read = Capacity.from_environ({"HOSTCALL_MAX_STREAM_WAITERS": "7"})
    assert read.max_stream_waiters == 7
    assert Capacity().max_stream_waiters == 1000
