"""A request body's deadline (hostcall/middleware.py): the timer is armed only when the body
has to be waited for, and a body waited for is still read whole, refused late with a 408, and
a request cancelled as it waits still answered 503 (the server stopping), never a 500.

The real app on its real store, called through ASGI with a ``receive`` the test holds: the
app waits on it until the test lets the body through, so the path where the body comes after
the request is taken every time, not when the machine happens to be slow.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from starlette.types import Message

from tests.support.harness import Harness

CREATE = "/api/agents/planner/conversations"


def scope_for(path: str, body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 50000),
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"origin", b"http://testserver"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "state": {},
    }


class HeldBody:
    """A ``receive`` that gives the body only once the test says so; ``asked`` is set when
    the app first waits on it."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.asked = asyncio.Event()
        self.let_through = asyncio.Event()
        self.given = False

    async def __call__(self) -> Message:
        if self.given:
            await asyncio.Event().wait()  # the client stays: no disconnect
        self.asked.set()
        await self.let_through.wait()
        self.given = True
        return {"type": "http.request", "body": self.body, "more_body": False}


async def _request(harness: Harness, body: HeldBody, then: str) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    task = asyncio.create_task(harness.app(scope_for(CREATE, body.body), body, send))
    await body.asked.wait()
    if then == "send the body":
        body.let_through.set()
    elif then == "cancel":
        task.cancel()
    await task
    return sent


def _answer(sent: list[Message]) -> tuple[int, dict[str, str], dict[str, Any]]:
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], headers, json.loads(body)


def test_a_body_that_comes_after_its_request_is_read_whole(harness: Harness) -> None:
    sent = harness.call(_request, harness, HeldBody(b'{"pageContext": null}'), "send the body")
    status, headers, body = _answer(sent)
    assert status == 201, body
    assert body["conversationId"] and body["sessionToken"]
    assert headers["cache-control"] == "no-store"
    assert headers["x-content-type-options"] == "nosniff"


def test_a_body_that_does_not_come_in_time_is_a_408(tmp_path: Path, agents_dir: Path) -> None:
    slow = Harness(tmp_path, agents_dir, body_timeout_seconds=0.05)
    try:
        sent = slow.call(_request, slow, HeldBody(b"{}"), "wait")
    finally:
        slow.stop()
    status, headers, body = _answer(sent)
    assert status == 408, body
    assert body["error"]["code"] == "request_timeout"
    assert headers["cache-control"] == "no-store"


def test_a_request_cancelled_while_its_body_is_awaited_is_a_503(harness: Harness) -> None:
    """The server cancels a request only as it stops: the cancellation reaches the request's
    layer through the wait for its body as through any other, and is answered so."""
    sent = harness.call(_request, harness, HeldBody(b"{}"), "cancel")
    status, headers, body = _answer(sent)
    assert status == 503, body
    assert body["error"]["code"] == "store_unavailable"
    assert headers["retry-after"] == "1"
    # Nothing was created by a request that never had its body.
    with sqlite3.connect(harness.settings.db_path) as db:
        assert db.execute("SELECT count(*) FROM conversations").fetchone() == (0,)
