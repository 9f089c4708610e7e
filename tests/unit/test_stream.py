"""The SSE endpoint, against a real uvicorn server on 127.0.0.1, read with httpx."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings
from tests.unit.conftest import BOARD, SECRET, Conv

READ = httpx.Timeout(5.0)


@dataclass(frozen=True)
class Frame:
    id: str
    event: str
    data: dict[str, Any]

    @property
    def seq(self) -> int:
        return int(self.id.rpartition(":")[2])


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    """The same settings as conftest's Harness, on a database of its own."""
    return Settings(
        agents_dir=DEMO_AGENTS,
        db_path=tmp_path / "hostcall.db",
        secret_keys=SECRET,
        sweep_seconds=0.05,
        environ={},
        **overrides,
    )


@contextmanager
def live_server(settings: Settings) -> Iterator[Live]:
    """The real app under uvicorn in a background thread, on a free port of 127.0.0.1."""
    app = create_app(settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", ws="none", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    live = Live(f"http://127.0.0.1:{port}", app)
    try:
        yield live
    finally:
        live.client.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


class Live:
    """Drives a live server over HTTP, as a widget would."""

    def __init__(self, url: str, app: Any) -> None:
        self.url = url
        self.app = app
        self.client = httpx.Client(base_url=url, timeout=READ)

    def conversation(self) -> Conv:
        r = self.client.post("/api/agents/planner/conversations")
        assert r.status_code == 201, r.text
        body = r.json()
        return Conv(body["conversationId"], body["sessionToken"], body["streamToken"])

    def say(self, conv: Conv, text: str) -> None:
        r = self.client.post(
            f"/api/conversations/{conv.id}/messages", json={"text": text}, headers=conv.auth
        )
        assert r.status_code == 202, r.text

    def snapshot(self, conv: Conv) -> dict[str, Any]:
        r = self.client.get(f"/api/conversations/{conv.id}", headers=conv.auth)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def settle(self, conv: Conv) -> dict[str, Any]:
        deadline = time.monotonic() + 5
        while True:
            snap = self.snapshot(conv)
            if snap["run"] and snap["run"]["status"] != "running":
                return snap
            assert time.monotonic() < deadline, f"run still running: {snap['run']}"
            time.sleep(0.02)

    def finished_conversation(self) -> tuple[Conv, int]:
        """A conversation with one whole run (a tool call answered); and its last seq."""
        conv = self.conversation()
        self.say(conv, "What should I work on next?")
        call = self.settle(conv)["calls"][-1]
        r = self.client.post(
            f"/api/calls/{call['toolCallId']}/result",
            json={"token": call["resultToken"], "output": BOARD},
        )
        assert r.status_code == 200, r.text
        snap = self.settle(conv)
        assert snap["run"]["status"] == "finished"
        return conv, int(snap["lastEventId"].rpartition(":")[2])

    def events_url(self, conv: Conv, token: str | None = None, **params: str) -> str:
        query = {"token": conv.stream if token is None else token, **params}
        return str(httpx.URL(f"{self.url}/api/conversations/{conv.id}/events", params=query))

    @contextmanager
    def stream(self, url: str, headers: dict[str, str] | None = None) -> Iterator[Iterator[Frame]]:
        with self.client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            yield frames(response)


def frames(response: httpx.Response) -> Iterator[Frame]:
    """Parse SSE framing by hand: fields until a blank line; comments (pings) skipped."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if fields:
                yield Frame(fields["id"], fields["event"], json.loads(fields["data"]))
                fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value


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
    assert "TOOL_CALL_DISPATCH" in [f.event for f in got]
    stored = [
        (e.type.value, e.data) for e in live.app.state.hostcall.store.events_after(conv.id, 0)
    ]
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
    with live_server(settings_for(tmp_path, stream_max_age=1)) as server:
        conv = server.conversation()
        time.sleep(2.1)  # itsdangerous ages in whole seconds and expires past max_age
        r = server.client.get(server.events_url(conv))
        assert_error(r, 401, "expired_token")
        fresh = server.client.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
        assert fresh.status_code == 200
        with server.stream(server.events_url(conv, token=fresh.json()["streamToken"])):
            pass
