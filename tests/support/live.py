"""The real Hostcall app under uvicorn on loopback, driven over HTTP and SSE as a widget would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource

from hostcall.app import create_app
from hostcall.settings import DEMO_AGENTS, Settings
from tests.support.clock import Clock
from tests.support.harness import BOARD, SECRET, Conv
from tests.support.loopback import serve_in_thread

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
def live_server(settings: Settings, clock: Clock | None = None) -> Iterator[Live]:
    """The real app under uvicorn in a background thread, on a free port of 127.0.0.1;
    ``clock``: the app's clock, for a test that moves time instead of sleeping."""
    app = create_app(settings) if clock is None else create_app(settings, clock=clock)
    with serve_in_thread(app, lifespan="on") as port:
        live = Live(f"http://127.0.0.1:{port}", app)
        try:
            yield live
        finally:
            live.client.close()


class Live:
    """Drives a live server over HTTP, as a widget would."""

    def __init__(self, url: str, app: Any) -> None:
        self.url = url
        self.app = app
        self.client = httpx.Client(base_url=url, timeout=READ, headers={"Origin": url})

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
    """The stream's events, parsed by httpx-sse (comments, our pings, are skipped)."""
    for sse in EventSource(response).iter_sse():
        yield Frame(sse.id, sse.event, sse.json())
