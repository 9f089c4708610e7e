"""A write that fails inside a model step (a full disk) ends the run with
RUN_ERROR instead of leaving it ``running`` (409 run_in_progress) until a restart.

The disk fills for real, as far as SQLite can tell: ``PRAGMA max_page_count`` caps the file
at its current size, so the step's writes fail with SQLITE_FULL ("database or disk is
full"). The model is an OpenAI-compatible provider on loopback that holds its answer until
the test has filled the disk.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.harness import Harness, allow_hosts, planner_definition, write_agent
from tests.support.loopback import serve_in_thread

LONG = "x" * 40_000  # needs new pages: cannot fit in the free space of existing ones


class Provider:
    def __init__(self) -> None:
        self.go = threading.Event()
        self.asked = threading.Event()

    async def chat(self, request: Request) -> Response:
        self.asked.set()
        await asyncio.to_thread(self.go.wait, 10)
        delta = {"choices": [{"index": 0, "delta": {"content": LONG}}]}
        body = f"data: {json.dumps(delta)}\n\ndata: [DONE]\n\n"
        return Response(body, media_type="text/event-stream")


@pytest.fixture
def provider() -> Iterator[tuple[Provider, int]]:
    p = Provider()
    app = Starlette(routes=[Route("/v1/chat/completions", p.chat, methods=["POST"])])
    with serve_in_thread(app) as port:
        yield p, port


def test_a_full_disk_during_a_step_ends_the_run_and_the_person_may_send_again(
    tmp_path: Path, provider: tuple[Provider, int]
) -> None:
    fake, port = provider
    data = planner_definition()
    data["model"] = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}
    write_agent(tmp_path / "agents", data, name="planner.json")
    allow_hosts(tmp_path / "agents", data["model"]["base_url"])
    h = Harness(tmp_path, tmp_path / "agents")
    try:
        conv = h.conversation()
        h.say(conv, "Hello")
        assert fake.asked.wait(10)
        db = h.runtime.store._db  # the server's own connection: its file is now "full"
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        fake.go.set()
        time.sleep(1.0)  # the step fails; recording the failure may fail too, and retries
        db.execute("PRAGMA max_page_count = 1073741823")  # space again
        snap = h.settle(conv, timeout=15)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "store_unavailable"
        errors = [d for t, d in h.events(conv) if t == "RUN_ERROR"]
        assert len(errors) == 1 and errors[0]["code"] == "store_unavailable"
        assert LONG not in json.dumps(h.events(conv))  # the failed step left nothing half-written
        # Not 409 run_in_progress: the person can send again, and this time it goes through.
        h.say(conv, "Hello again")
        assert h.settle(conv, timeout=15)["run"]["status"] == "finished"
    finally:
        h.stop()
