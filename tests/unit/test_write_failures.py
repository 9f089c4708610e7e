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
from typing import Any

import psycopg
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.databases import fresh_schema
from tests.support.harness import Harness, allow_hosts, planner_definition, write_agent
from tests.support.loopback import serve_in_thread
from tests.support.provider import HeldProvider

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


def unended(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Messages started and neither ended nor discarded before a RUN_ERROR (or the end)."""
    started: list[str] = []
    for name, data in events:
        if name == "TEXT_MESSAGE_START":
            started.append(data["messageId"])
        elif name in ("TEXT_MESSAGE_END", "hostcall.text_message_discarded"):
            if name == "TEXT_MESSAGE_END" and data["messageId"] not in started:
                continue
            if data["messageId"] in started:
                started.remove(data["messageId"])
        elif name == "RUN_ERROR" and started:
            return started
    return started


def test_a_write_failure_mid_text_discards_and_ends_the_message_before_run_error(
    tmp_path: Path,
) -> None:
    fake = HeldProvider(rest=LONG, hold=10)
    with fake.serving() as port:
        data = planner_definition()
        data["model"] = {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}
        write_agent(tmp_path / "agents", data, name="planner.json")
        allow_hosts(tmp_path / "agents", data["model"]["base_url"])
        h = Harness(tmp_path, tmp_path / "agents")
        try:
            conv = h.conversation()
            h.say(conv, "Hello")
            deadline = time.monotonic() + 10
            while not any(
                n == "TEXT_MESSAGE_CONTENT" and d["delta"] == "Let me think"
                for n, d in h.events(conv)
            ):
                assert time.monotonic() < deadline, "the first chunk was never committed"
                time.sleep(0.02)
            db = h.runtime.store._db
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {pages}")
            fake.go.set()
            time.sleep(1.0)  # the next append fails; recording the failure may fail too
            db.execute("PRAGMA max_page_count = 1073741823")
            snap = h.settle(conv, timeout=15)
            assert snap["run"]["status"] == "failed"
            assert snap["run"]["error"]["code"] == "store_unavailable"
            events = h.events(conv)
            names = [n for n, _ in events]
            assert names.count("RUN_ERROR") == 1
            assert unended(events) == [], names
            # The cut-off message was discarded, as after a crash: the snapshot (which never
            # stored its text) and the stream agree, and nothing of it was stored twice.
            discarded = [
                d["messageId"] for n, d in events if n == "hostcall.text_message_discarded"
            ]
            assert len(discarded) == 1
            assert discarded[0] not in {m["id"] for m in snap["messages"]}
            assert LONG not in json.dumps(events)
            h.say(conv, "Hello again")
            assert h.settle(conv, timeout=15)["run"]["status"] == "finished"
        finally:
            h.stop()


def test_a_failure_the_store_refuses_for_long_is_recorded_once_it_takes_writes(
    tmp_path: Path, provider: tuple[Provider, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage longer than the step's own retries (one here): the run does not stay
    ``running`` (refusing every message with run_in_progress until a restart, its lease
    renewed by this very process); the sweeper's ticks record its failure once they can."""
    monkeypatch.setattr("hostcall.runs.stepping.FAIL_RETRIES", 1)
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
        db = h.runtime.store._db  # type: ignore[attr-defined]
        db.execute("PRAGMA query_only = ON")  # every write refused, small ones too
        fake.go.set()
        time.sleep(1.0)  # the step fails, and so does its one try to record it
        assert h.snapshot(conv)["run"]["status"] == "running"
        db.execute("PRAGMA query_only = OFF")
        snap = h.settle(conv, timeout=10)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "store_unavailable"
        assert [n for n, _ in h.events(conv)].count("RUN_ERROR") == 1
        h.say(conv, "Hello again")
        assert h.settle(conv, timeout=15)["run"]["status"] == "finished"
    finally:
        h.stop()


# ---- /healthz while writes fail ----------------------------------------------------------

WORDS = "a full disk refuses this " * 300  # ~7.5 KB: a few of them need new pages


def post(h: Harness, conv: Any, text: str) -> Any:
    return h.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": text}, headers=conv.auth
    )


def assert_cannot_write(h: Harness, *mentions: str) -> None:
    health = h.http.get("/healthz")
    assert health.status_code == 503, health.text
    error = health.json()["error"]
    assert error["code"] == "store_unavailable"
    assert all(m in error["details"]["reason"] for m in mentions), error
    assert int(health.headers["Retry-After"]) > 0


def test_healthz_says_a_full_sqlite_file_cannot_write(harness: Harness) -> None:
    """The probe's one small row fits in a page the file has: it passes while every real
    write fails. /healthz must say 503, with the reason, until a write goes through."""
    assert harness.http.get("/healthz").status_code == 200
    db = harness.runtime.store._db  # type: ignore[attr-defined]
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        refused = [post(harness, harness.conversation(), WORDS) for _ in range(6)]
        assert any(r.status_code == 503 for r in refused), [r.status_code for r in refused]
        for r in refused:
            assert r.status_code in (202, 503), r.text  # never 500
            if r.status_code == 503:
                assert r.json()["error"]["code"] == "store_unavailable"
                assert int(r.headers["Retry-After"]) > 0
        assert_cannot_write(harness, "full")
    finally:
        db.execute("PRAGMA max_page_count = 1073741823")
    conv = harness.conversation()
    assert post(harness, conv, "Hello").status_code == 202
    assert harness.http.get("/healthz").status_code == 200


def test_healthz_says_a_read_only_sqlite_file_cannot_write(harness: Harness) -> None:
    db = harness.runtime.store._db  # type: ignore[attr-defined]
    conv = harness.conversation()
    db.execute("PRAGMA query_only = ON")  # writes fail as on a read-only file: SQLITE_READONLY
    try:
        refused = post(harness, conv, "Hello")
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "store_unavailable"
        assert_cannot_write(harness, "readonly")
    finally:
        db.execute("PRAGMA query_only = OFF")
    assert post(harness, conv, "Hello").status_code == 202
    assert harness.http.get("/healthz").status_code == 200


def test_healthz_says_a_full_postgresql_disk_cannot_write(tmp_path: Path, agents_dir: Path) -> None:
    """PostgreSQL refuses the writes that need space (disk_full, SQLSTATE 53100) while the
    probe's row, rolled back, goes through: a trigger stands in for the disk."""
    with fresh_schema() as url:
        # No sweeper: the stand-in refuses only rows of events, so the sweeper's turn (a
        # lease row written every pass) commits, and a commit is what says that writes go
        # through again; it could land between the refused message and /healthz.
        h = Harness(tmp_path, agents_dir, database_url=url, sweep_seconds=3600)
        try:
            conv = h.conversation()
            assert h.http.get("/healthz").status_code == 200
            with psycopg.connect(url, autocommit=True) as db:
                db.execute(FULL_DISK)
            try:
                refused = post(h, conv, "Hello")
                assert refused.status_code == 503, refused.text
                assert refused.json()["error"]["code"] == "store_unavailable"
                assert "No space" not in refused.text  # the driver's words stay in the log
                assert_cannot_write(h, "No space left on device")
            finally:
                with psycopg.connect(url, autocommit=True) as db:
                    db.execute("DROP TRIGGER full_disk ON events")
            assert post(h, conv, "Hello").status_code == 202
            assert h.http.get("/healthz").status_code == 200
            assert h.settle(conv)["run"]["error"] is None
        finally:
            h.stop()


FULL_DISK = """
CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'could not extend file "base/16384/16385": No space left on device'
        USING ERRCODE = 'disk_full';
END $$;
CREATE TRIGGER full_disk BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION full_disk();
"""
