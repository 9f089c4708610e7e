"""The SSE endpoint, against a real uvicorn server on 127.0.0.1, read with httpx."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostcall.backlog import PAGE
from hostcall.protocol.events import TextMessageContent
from hostcall.runtime import Runtime
from tests.support.clock import Clock
from tests.support.databases import fresh_schema
from tests.support.harness import Conv
from tests.support.live import Frame, Live, live_server, settings_for


def take(stream: Iterator[Frame], count: int) -> list[Frame]:
    return [next(stream) for _ in range(count)]


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return str(error["message"])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(settings_for(tmp_path_factory.mktemp("live"))) as server:
        yield server


# ---- replay ---------------------------------------------------------------------------------


def test_fresh_stream_replays_the_whole_log_with_ids_increasing_by_one(live: Live) -> None:
    conv, last = live.finished_conversation()
    with live.stream(live.events_url(conv)) as stream:
        got = take(stream, last)
    assert [f.id for f in got] == [f"{conv.id}:{n}" for n in range(1, last + 1)]
    assert got[0].event == "RUN_STARTED" and got[0].data["threadId"] == conv.id
    assert got[-1].event == "RUN_FINISHED"
    assert "hostcall.tool_call_dispatch" in [f.event for f in got]
    events = asyncio.run(live.app.state.hostcall.store.events_after(conv.id, 0))
    stored = [(e.name, e.data) for e in events]
    assert [(f.event, f.data) for f in got] == stored


def test_last_event_id_replays_exactly_what_was_missed_then_follows_live(live: Live) -> None:
    conv, last = live.finished_conversation()
    seen = last - 4
    with live.stream(live.events_url(conv), {"Last-Event-ID": f"{conv.id}:{seen}"}) as stream:
        missed = take(stream, 4)
        assert [f.seq for f in missed] == list(range(seen + 1, last + 1))
        # Nothing more is queued: the next frame is the live one caused by a new message.
        live.say(conv, "Tell me a joke")
        following = next(stream)
    assert following.id == f"{conv.id}:{last + 1}"
    assert following.event == "RUN_STARTED"
    live.settle(conv)


def test_after_query_replays_like_last_event_id(live: Live) -> None:
    conv, last = live.finished_conversation()
    with live.stream(live.events_url(conv, after=f"{conv.id}:{last - 2}")) as stream:
        got = take(stream, 2)
        assert [f.seq for f in got] == [last - 1, last]
        live.say(conv, "hello")
        assert next(stream).seq == last + 1
    live.settle(conv)


def test_last_event_id_header_wins_over_after(live: Live) -> None:
    conv, last = live.finished_conversation()
    url = live.events_url(conv, after=f"{conv.id}:2")
    with live.stream(url, {"Last-Event-ID": f"{conv.id}:{last - 1}"}) as stream:
        assert next(stream).seq == last


def test_replay_never_includes_another_conversations_events(live: Live) -> None:
    first, first_last = live.finished_conversation()
    second, second_last = live.finished_conversation()
    with live.stream(live.events_url(first)) as stream:
        got = take(stream, first_last)
        live.say(second, "hello")  # live events of the other conversation must not leak in
        live.settle(second)
        live.say(first, "hello")
        following = next(stream)
    assert all(f.id.startswith(f"{first.id}:") for f in [*got, following])
    assert following.seq == first_last + 1
    assert all(f.data.get("threadId", first.id) == first.id for f in [*got, following])
    assert second_last > 0
    live.settle(first)


# ---- bad event ids --------------------------------------------------------------------------


def test_event_id_of_another_conversation_is_refused(live: Live) -> None:
    conv, other = live.conversation(), live.conversation()
    foreign = f"{other.id}:1"
    r = live.client.get(live.events_url(conv), headers={"Last-Event-ID": foreign})
    assert other.id in assert_error(r, 400, "foreign_event_id")
    r = live.client.get(live.events_url(conv, after=foreign))
    assert_error(r, 400, "foreign_event_id")


@pytest.mark.parametrize("bogus", ["abc", "c_x:", "12", ":5", "{conv}:-1", "{conv}:1.5"])
def test_unparsable_event_id_is_refused(live: Live, bogus: str) -> None:
    conv = live.conversation()
    raw = bogus.format(conv=conv.id)
    for r in (
        live.client.get(live.events_url(conv), headers={"Last-Event-ID": raw}),
        live.client.get(live.events_url(conv, after=raw)),
    ):
        assert raw in assert_error(r, 400, "bad_event_id")


def test_a_bad_after_parameter_is_named_as_such_not_as_a_header(live: Live) -> None:
    conv = live.conversation()
    r = live.client.get(live.events_url(conv, after="nonsense"))
    message = assert_error(r, 400, "bad_event_id")
    assert message.startswith("after 'nonsense'") and "Last-Event-ID" not in message
    r = live.client.get(live.events_url(conv), headers={"Last-Event-ID": "nonsense"})
    assert assert_error(r, 400, "bad_event_id").startswith("Last-Event-ID 'nonsense'")


def test_event_id_ahead_of_the_log_is_refused(live: Live) -> None:
    conv, last = live.finished_conversation()
    r = live.client.get(live.events_url(conv), headers={"Last-Event-ID": f"{conv.id}:{last + 1}"})
    message = assert_error(r, 400, "bad_event_id")
    assert f"{conv.id}:{last}" in message  # names the last real event


def test_event_id_with_a_non_ascii_digit_is_refused_not_a_server_error(live: Live) -> None:
    # "²" passes str.isdigit() but int() rejects it; a client must get 400, not 500.
    conv = live.conversation()
    raw = f"{conv.id}:\u00b2"
    r = live.client.get(live.events_url(conv, after=raw))
    assert_error(r, 400, "bad_event_id")


@pytest.mark.parametrize("digits", [25, 5000])  # past 64 bits; past int()'s 4,300 digits
def test_event_id_with_a_number_too_large_is_refused_not_a_server_error(
    live: Live, digits: int
) -> None:
    conv = live.conversation()
    raw = f"{conv.id}:{'9' * digits}"
    for r in (
        live.client.get(live.events_url(conv), headers={"Last-Event-ID": raw}),
        live.client.get(live.events_url(conv, after=raw)),
    ):
        assert raw[:80] in assert_error(r, 400, "bad_event_id")


# ---- stream tokens --------------------------------------------------------------------------


def test_stream_without_token_is_refused(live: Live) -> None:
    conv = live.conversation()
    r = live.client.get(f"/api/conversations/{conv.id}/events")
    assert_error(r, 401, "missing_token")


def test_tampered_stream_token_is_refused(live: Live) -> None:
    conv = live.conversation()
    payload, timestamp, signature = conv.stream.rsplit(".", 2)
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    r = live.client.get(live.events_url(conv, token=f"{payload}.{timestamp}.{flipped}"))
    assert_error(r, 401, "bad_token")


def test_session_token_in_place_of_stream_token_is_refused(live: Live) -> None:
    conv = live.conversation()
    r = live.client.get(live.events_url(conv, token=conv.session))
    assert_error(r, 403, "wrong_token")


def test_stream_token_of_another_conversation_is_refused(live: Live) -> None:
    conv, other = live.conversation(), live.conversation()
    r = live.client.get(live.events_url(conv, token=other.stream))
    assert conv.id in assert_error(r, 403, "wrong_token")


def test_expired_stream_token_is_refused(tmp_path: Path) -> None:
    clock = Clock()
    with live_server(settings_for(tmp_path, stream_max_age=1), clock) as server:
        conv = server.conversation()
        clock.advance(2.1)  # itsdangerous ages in whole seconds and expires past max_age
        r = server.client.get(server.events_url(conv))
        assert_error(r, 401, "expired_token")
        fresh = server.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
        assert fresh.status_code == 200
        with server.stream(server.events_url(conv, token=fresh.json()["streamToken"])):
            pass


# ---- the backlog read, on both stores ------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def any_live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Live]:
    if request.param == "sqlite":
        with live_server(settings_for(tmp_path)) as server:
            yield server
    else:
        with fresh_schema() as url, live_server(settings_for(tmp_path, database_url=url)) as server:
            yield server


def _runtime(live: Live) -> Runtime:
    runtime: Runtime = live.app.state.hostcall
    return runtime


def _log_reads(live: Live, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every read of the event log the server makes from here on: (conversation, after)."""
    store = _runtime(live).store
    reads: list[tuple[str, int]] = []
    events_after = store.events_after

    async def counted(conversation_id: str, seq: int, limit: int = 1000) -> Any:
        reads.append((conversation_id, seq))
        return await events_after(conversation_id, seq, limit)

    monkeypatch.setattr(store, "events_after", counted)
    return reads


def test_a_new_conversation_s_first_stream_reads_no_backlog_and_follows_live(
    any_live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stream's opening read says the log is empty; reading it cost a statement.
    conv = any_live.conversation()
    reads = _log_reads(any_live, monkeypatch)
    with any_live.stream(any_live.events_url(conv)) as stream:
        any_live.say(conv, "What should I work on next?")
        got = take(stream, 4)
    assert [f.seq for f in got] == [1, 2, 3, 4] and got[0].event == "RUN_STARTED"
    assert reads == []
    any_live.settle(conv)


def test_a_stream_on_a_conversation_with_events_replays_them_all(
    any_live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv, last = any_live.finished_conversation()
    reads = _log_reads(any_live, monkeypatch)
    with any_live.stream(any_live.events_url(conv)) as stream:
        got = take(stream, last)
    assert [f.seq for f in got] == list(range(1, last + 1))
    assert got[0].event == "RUN_STARTED" and got[-1].event == "RUN_FINISHED"
    assert reads[0] == (conv.id, 0)
    # Reconnected one event short, it replays that one; at the last, it reads nothing.
    reads.clear()
    url = any_live.events_url(conv, token=_ticket(any_live, conv))
    with any_live.stream(url, _resume(conv.id, last - 1)) as stream:
        assert next(stream).seq == last
    assert reads[0] == (conv.id, last - 1)
    reads.clear()
    url = any_live.events_url(conv, token=_ticket(any_live, conv))
    with any_live.stream(url, _resume(conv.id, last)) as stream:
        any_live.say(conv, "hello")
        assert next(stream).seq == last + 1
    assert reads == []
    any_live.settle(conv)


def _ticket(live: Live, conv: Conv) -> str:
    """A new stream ticket (each is good for one stream)."""
    r = live.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["streamToken"])


def _resume(conversation_id: str, seq: int) -> dict[str, str]:
    return {"Last-Event-ID": f"{conversation_id}:{seq}"}


@pytest.mark.parametrize("reconnect", [False, True])
def test_an_event_committed_just_after_the_stream_s_read_of_the_log_reaches_it(
    any_live: Live, monkeypatch: pytest.MonkeyPatch, reconnect: bool
) -> None:
    # The stream subscribes before it reads the conversation's last seq: an event committed
    # (and published) after that read comes through the queue, though no backlog is read.
    runtime = _runtime(any_live)
    conv = any_live.conversation()
    name = "last_seq" if reconnect else "open_stream"
    read = getattr(runtime.store, name)

    async def then_an_event(*args: Any) -> Any:
        found = await read(*args)
        await runtime.engine.journal.emit(conv.id, TextMessageContent("m_late", "late"))
        return found

    monkeypatch.setattr(runtime.store, name, then_an_event)
    headers = _resume(conv.id, 0) if reconnect else None
    with any_live.stream(any_live.events_url(conv), headers) as stream:
        frame = next(stream)
    assert (frame.seq, frame.event, frame.data["delta"]) == (1, "TEXT_MESSAGE_CONTENT", "late")


# ---- a client that leaves during a replay ---------------------------------------------------


def test_a_client_gone_mid_replay_is_not_written_to_event_after_event(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    """Each write to the dead socket logged an asyncio warning (310 for one replay)."""
    conv = live.conversation()
    for _ in range(12):  # 144 events: more than a page of the replay
        live.say(conv, "hello")
        live.settle(conv)
    host, port = httpx.URL(live.url).host, httpx.URL(live.url).port
    caplog.set_level(logging.WARNING, logger="asyncio")
    with socket.create_connection((host, port)) as raw:
        target = httpx.URL(live.events_url(conv)).raw_path.decode()
        raw.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert raw.recv(100).startswith(b"HTTP/1.1 200")
        # Close with a reset (linger 0), as a browser tab killed mid-download does.
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    time.sleep(1)
    failed = [r for r in caplog.records if "socket.send() raised" in r.getMessage()]
    assert failed == []
    assert live.snapshot(conv)["run"]["status"] == "finished"  # the server serves on


# ---- a crowd replaying one long log -------------------------------------------------------


def _long_conversation(live: Live) -> tuple[Conv, int]:
    """A conversation whose log holds two full replay pages and part of a third."""
    conv = live.conversation()
    for _ in range(12):  # 12 events a run: 144
        live.say(conv, "hello")
        live.settle(conv)
    last = int(live.snapshot(conv)["lastEventId"].rpartition(":")[2])
    assert 2 * PAGE < last < 3 * PAGE, last
    return conv, last


def _replay_reads(live: Live, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The reads of a replay from here on, a page at most each (on PostgreSQL a snapshot
    reads the log too, up to 1,000 events)."""
    store = _runtime(live).store
    reads: list[tuple[str, int]] = []
    events_after = store.events_after

    async def counted(conversation_id: str, seq: int, limit: int = 1000) -> Any:
        if limit <= PAGE:
            reads.append((conversation_id, seq))
        return await events_after(conversation_id, seq, limit)

    monkeypatch.setattr(store, "events_after", counted)
    return reads


def _stall(live: Live, conv: Conv, count: int) -> list[socket.socket]:
    """``count`` streams that send their GET and never read a byte."""
    host, port = httpx.URL(live.url).host, httpx.URL(live.url).port
    stalled = []
    for _ in range(count):
        raw = socket.create_connection((host, port))
        target = httpx.URL(live.events_url(conv, token=_ticket(live, conv))).raw_path.decode()
        raw.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        stalled.append(raw)
    return stalled


def test_a_crowd_of_stalled_readers_reads_each_full_page_of_the_log_once(
    any_live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each stream read and framed the whole log for itself: 20 readers, 20 reads per page.
    conv, last = _long_conversation(any_live)
    reads = _replay_reads(any_live, monkeypatch)
    stalled = _stall(any_live, conv, 20)
    try:
        with any_live.stream(any_live.events_url(conv, token=_ticket(any_live, conv))) as stream:
            got = take(stream, last)
        deadline = time.monotonic() + 10
        while reads.count((conv.id, 2 * PAGE)) < 21:  # every stream has read the log's end
            assert time.monotonic() < deadline, reads
            time.sleep(0.02)
    finally:
        for raw in stalled:
            raw.close()
    assert [f.seq for f in got] == list(range(1, last + 1))
    assert reads.count((conv.id, 0)) == 1 and reads.count((conv.id, PAGE)) == 1
    assert sorted(set(reads)) == [(conv.id, 0), (conv.id, PAGE), (conv.id, 2 * PAGE)]


def test_a_stream_resuming_inside_a_kept_page_gets_exactly_what_it_missed(
    any_live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv, last = _long_conversation(any_live)
    with any_live.stream(any_live.events_url(conv)) as stream:
        take(stream, last)  # the full pages are kept now
    read_log = _runtime(any_live).store.events_after  # the test's own reads, not counted
    stored = asyncio.run(read_log(conv.id, 0))
    reads = _replay_reads(any_live, monkeypatch)
    for seen in (0, 7, PAGE - 1, PAGE, PAGE + 23, 2 * PAGE, last - 1):
        url = any_live.events_url(conv, token=_ticket(any_live, conv))
        with any_live.stream(url, _resume(conv.id, seen)) as stream:
            got = take(stream, last - seen)
            any_live.say(conv, "hello")  # then live, with no gap and no repeat
            after = next(stream)
        assert [f.seq for f in got] == list(range(seen + 1, last + 1)), seen
        assert [(f.event, f.data) for f in got] == [(e.name, e.data) for e in stored[seen:]]
        assert after.seq == last + 1 and after.event == "RUN_STARTED"
        any_live.settle(conv)
        stored = asyncio.run(read_log(conv.id, 0))
        last = stored[-1].seq
    # Only the part past the last full page was read again; the kept pages never.
    assert all(seq >= 2 * PAGE for _, seq in reads), reads
