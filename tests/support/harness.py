"""The real app on a real SQLite file in a temp dir, driven over HTTP (``Harness``)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from starlette.testclient import TestClient

from hostcall.app import create_app
from hostcall.runtime import Runtime
from hostcall.settings import DEMO_AGENTS, Settings
from tests.support.clock import Clock

T = TypeVar("T")
SECRET = ("unit-test-secret-key-0123456789abcdef",)
# What the widget's own fetches carry (TestClient's base URL): creating needs an Origin.
ORIGIN = {"Origin": "http://testserver"}


@dataclass
class Conv:
    id: str
    session: str
    stream: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.session}"}


class Harness:
    """One server on one database; ``restart()`` keeps the file, as a new process would."""

    def __init__(self, tmp_path: Path, agents_dir: Path, **settings: Any) -> None:
        self.tmp_path = tmp_path
        self.agents_dir = agents_dir
        self.settings = Settings(
            agents_dir=agents_dir,
            db_path=tmp_path / "hostcall.db",
            secret_keys=SECRET,
            sweep_seconds=settings.pop("sweep_seconds", 0.05),
            environ=settings.pop("environ", {}),
            **settings,
        )
        # The app's time, kept across restarts: a test moves it on instead of sleeping.
        self.clock = Clock()
        self.client: TestClient | None = None
        self.start()

    def start(self) -> None:
        self.app = create_app(self.settings, clock=self.clock)
        self.client = TestClient(self.app, raise_server_exceptions=True)
        self.client.__enter__()
        # The server's event loop, for other clients of it (tests/unit/console_client.py).
        self.app.state.test_portal = self.client.portal

    def stop(self) -> None:
        if self.client is not None:
            self.client.__exit__(None, None, None)
            self.client = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def http(self) -> TestClient:
        assert self.client is not None
        return self.client

    @property
    def runtime(self) -> Runtime:
        runtime: Runtime = self.app.state.hostcall
        return runtime

    def call(self, function: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Await ``function(*args, **kwargs)`` on the app's event loop (the store is async,
        and its connections belong to the loop the app runs on), from this test's thread."""
        assert self.client is not None and self.client.portal is not None
        return self.client.portal.call(partial(function, *args, **kwargs))

    # ---- conversation helpers -------------------------------------------------------------

    def conversation(self, agent: str = "planner") -> Conv:
        r = self.http.post(f"/api/agents/{agent}/conversations", headers=ORIGIN)
        assert r.status_code == 201, r.text
        body = r.json()
        return Conv(body["conversationId"], body["sessionToken"], body["streamToken"])

    def say(self, conv: Conv, text: str) -> str:
        r = self.http.post(
            f"/api/conversations/{conv.id}/messages", json={"text": text}, headers=conv.auth
        )
        assert r.status_code == 202, r.text
        return str(r.json()["runId"])

    def snapshot(self, conv: Conv) -> dict[str, Any]:
        r = self.http.get(f"/api/conversations/{conv.id}", headers=conv.auth)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def settle(self, conv: Conv, timeout: float = 5.0) -> dict[str, Any]:
        """Wait until the latest run is no longer running; return the snapshot."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snapshot(conv)
            if snap["run"] and snap["run"]["status"] != "running":
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(f"run still running after {timeout}s: {snap['run']}")
            time.sleep(0.02)

    def finish(self, conv: Conv, timeout: float = 5.0) -> dict[str, Any]:
        """Wait until the latest run has ended (finished or failed); return the snapshot.
        Unlike ``settle``, not done by a run waiting for its claim after an answer (on
        PostgreSQL the claim may still be on its way when the answer's response is)."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snapshot(conv)
            if snap["run"] and snap["run"]["status"] in ("finished", "failed"):
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(f"run not ended after {timeout}s: {snap['run']}")
            time.sleep(0.02)

    def open_call(self, conv: Conv, state: str | None = None) -> dict[str, Any]:
        calls = [c for c in self.settle(conv)["calls"] if c["outcome"] is None]
        if state:
            calls = [c for c in calls if c["state"] == state]
        assert calls, "no open call"
        return dict(calls[-1])

    def events(self, conv: Conv) -> list[tuple[str, dict[str, Any]]]:
        """(SSE event name, payload): a CUSTOM event's payload is its ``value``."""
        return [
            (e.name, e.data["value"] if e.data["type"] == "CUSTOM" else e.data)
            for e in self.call(self.runtime.store.events_after, conv.id, 0)
        ]

    def answer(self, call: dict[str, Any], output: Any) -> Any:
        return self.http.post(
            f"/api/calls/{call['toolCallId']}/result",
            json={"token": call["resultToken"], "output": output},
        )

    def decide(self, call: dict[str, Any], decision: str, **extra: Any) -> Any:
        return self.http.post(
            f"/api/calls/{call['toolCallId']}/decision",
            json={"token": call["decisionToken"], "decision": decision, **extra},
        )

    def model_error(self, call: dict[str, Any]) -> dict[str, Any]:
        """A failed call's error as the model (and the operator's console) read it; the
        visitor's snapshot has only its code and a sentence."""
        stored = self.call(self.runtime.store.get_call, call["toolCallId"])
        assert stored is not None and stored.outcome is not None
        error: dict[str, Any] = stored.outcome["error"]
        return error

    def assistant_texts(self, conv: Conv) -> list[str]:
        return [
            m["text"]
            for m in self.snapshot(conv)["messages"]
            if m["role"] == "assistant" and m["text"]
        ]


def write_agent(directory: Path, data: dict[str, Any], name: str | None = None) -> Path:
    """Write an agent file; a directory without a platform file gets the demo's."""
    directory.mkdir(parents=True, exist_ok=True)
    platform = directory / "_platform.json"
    if not platform.exists() and name != "_platform.json":
        shutil.copy(DEMO_AGENTS / "_platform.json", platform)
    path = directory / (name or f"{data.get('id', 'agent')}.json")
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def allow_hosts(directory: Path, *urls: str, env: tuple[str, ...] = ()) -> None:
    """Let every environment of the directory's platform file (the default one included)
    reach the hosts of ``urls`` (a model on loopback), and agents read the variables ``env``."""
    from hostcall.blocks.http_request import host_port

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "_platform.json"
    source = path if path.exists() else DEMO_AGENTS / "_platform.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    environments = data.setdefault("environments", {})
    environments.setdefault("default", {})
    for environment in environments.values():
        hosts = environment.setdefault("allowed_hosts", [])
        hosts += [h for h in map(host_port, urls) if h not in hosts]
    data["allowed_env"] = sorted({*data.get("allowed_env", []), *env})
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def planner_definition() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DEMO_AGENTS / "planner.json").read_text())
    return data


BOARD = {
    "tasks": [
        {
            "id": "t1",
            "title": "Write release notes",
            "status": "todo",
            "assignee": "Ana",
            "dueDate": "Thursday",
        },
        {"id": "t2", "title": "Fix login bug", "status": "in-progress", "assignee": "Kenji"},
        {"id": "t3", "title": "Plan sprint", "status": "done", "assignee": "Ana"},
    ]
}
