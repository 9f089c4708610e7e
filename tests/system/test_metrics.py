"""``/metrics`` of ``hostcall serve --workers 2``: whichever worker answers a scrape reports
the whole server (prometheus-client's multiprocess mode), read with the client's own parser."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from hostcall.settings import ROOT
from tests.support.databases import fresh_schema
from tests.support.harness import SECRET
from tests.support.processes import free_port, unlimited_agents

ORIGIN = {"Origin": "http://localhost:8001"}  # one the demo planner allows
CONVERSATIONS = 6


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:  # fmt: skip
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls)


def scrape(url: str, **headers: str) -> httpx.Response:
    # A connection per scrape, so the two workers take turns answering.
    with httpx.Client(timeout=5) as client:
        return client.get(f"{url}/metrics", headers=headers)


@pytest.fixture
def metrics_dir() -> Iterator[Path]:
    # Not under tmp_path: its *.db files are prometheus-client's, which the suite's check of
    # every stored event would take for databases.
    with tempfile.TemporaryDirectory(prefix="hostcall-metrics-test-") as directory:
        yield Path(directory)


def test_two_workers_report_the_same_totals_whichever_answers(
    tmp_path: Path, pg_url: str, metrics_dir: Path
) -> None:
    (metrics_dir / "counter_1.db").write_bytes(b"left by an earlier run")
    port = free_port()
    env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET[0],
           "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}  # fmt: skip
    env.pop("HOSTCALL_METRICS_TOKEN", None)
    agents = unlimited_agents(tmp_path / "agents")
    process = subprocess.Popen(
        [sys.executable, "-m", "hostcall", "serve", "--db", pg_url, "--port", str(port),
         "--agents", str(agents), "--workers", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        workers: list[psutil.Process] = []
        while len(workers) < 2:
            assert process.poll() is None, "the supervisor exited"
            assert time.monotonic() < deadline, f"{len(workers)} workers after 60 s"
            children = psutil.Process(process.pid).children()
            workers = [p for p in children if "spawn_main" in " ".join(p.cmdline())]
            time.sleep(0.2)
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "no worker answered in 60 s"
            time.sleep(0.2)

        pids = {p.pid for p in workers}

        def counted() -> set[int]:
            return {int(f.stem.rsplit("_", 1)[1]) for f in metrics_dir.glob("counter_*.db")}

        conversations = []
        for _ in range(CONVERSATIONS):
            # The kernel may hand every connection to one worker (a quiet machine does):
            # until each has counted a run, the workers that have are paused for the next
            # conversation, so that only another can accept its connection.
            paused = [p for p in workers if p.pid in counted()] if pids - counted() else []
            for p in paused:
                p.suspend()
            try:
                client = httpx.Client(base_url=url, timeout=10)  # a connection each
                created = client.post("/api/agents/planner/conversations", headers=ORIGIN)
                assert created.status_code == 201, created.text
                body = created.json()
                auth = {**ORIGIN, "Authorization": f"Bearer {body['sessionToken']}"}
                sent = client.post(f"/api/conversations/{body['conversationId']}/messages",
                                   json={"text": "hello"}, headers=auth)  # fmt: skip
                assert sent.status_code == 202, sent.text
                conversations.append((body["conversationId"], auth, body["streamToken"]))
                client.close()
            finally:
                for p in paused:
                    p.resume()
        for cid, auth, _ in conversations:
            while True:
                run = httpx.get(f"{url}/api/conversations/{cid}", headers=auth).json()["run"]
                if run and run["status"] in ("finished", "failed"):
                    break
                assert time.monotonic() < deadline + 60, f"run of {cid} did not end"
                time.sleep(0.05)
        # Both workers counted runs, each in its own files; the earlier run's file was cleared
        # at start.
        assert pids <= counted() and 1 not in counted(), (pids, counted())

        cid, auth, ticket = conversations[0]
        with httpx.Client(timeout=10) as streaming, streaming.stream(
            "GET", f"{url}/api/conversations/{cid}/events", params={"token": ticket},
            headers=ORIGIN,
        ) as stream:  # fmt: skip
            assert stream.status_code == 200
            for _ in range(8):
                found = samples(scrape(url).text)
                assert value(found, "hostcall_runs_total", outcome="started") == CONVERSATIONS
                assert value(found, "hostcall_runs_total", outcome="finished") == CONVERSATIONS
                assert value(found, "hostcall_model_tokens_total", direction="output",
                             source="estimate") > 0  # fmt: skip
                assert value(found, "hostcall_http_request_seconds_count", method="POST",
                             route="/api/agents/{agent_id}/conversations",
                             status="2xx") == CONVERSATIONS  # fmt: skip
                assert value(found, "hostcall_http_request_seconds_count", method="GET",
                             route="/healthz") >= 1  # fmt: skip
                assert value(found, "hostcall_open_streams") == 1
        found = samples(scrape(url).text)
        assert value(found, "hostcall_open_streams") == 0

        refused = scrape(url, **{"X-Forwarded-For": "203.0.113.9"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "wrong_token"

        # A worker killed with a stream open: its replacement takes the stream out of the sum.
        ticket = httpx.post(f"{url}/api/conversations/{cid}/stream-token", headers=auth)
        assert ticket.status_code == 200, ticket.text
        with httpx.Client(timeout=10) as streaming, streaming.stream(
            "GET", f"{url}/api/conversations/{cid}/events",
            params={"token": ticket.json()["streamToken"]}, headers=ORIGIN,
        ) as stream:  # fmt: skip
            assert stream.status_code == 200
            local = stream.extensions["network_stream"].get_extra_info("client_addr")[1]
            [holder] = [w for w in workers if any(
                c.raddr and c.raddr.port == local and c.status == psutil.CONN_ESTABLISHED
                for c in w.net_connections(kind="tcp"))]  # fmt: skip
            assert value(samples(scrape(url).text), "hostcall_open_streams") == 1
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)
        deadline = time.monotonic() + 60
        while True:
            children = psutil.Process(process.pid).children()
            alive = [p for p in children if "spawn_main" in " ".join(p.cmdline())]
            if len(alive) == 2 and holder.pid not in {p.pid for p in alive}:
                try:
                    if value(samples(scrape(url).text), "hostcall_open_streams") == 0:
                        break
                except httpx.TransportError:
                    pass  # the replacement is still starting
            assert time.monotonic() < deadline, "the killed worker's stream is still counted"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    # A worker that stopped took its live gauge with it.
    assert not list(metrics_dir.glob("gauge_livesum_*.db"))


def in_files(metrics_dir: Path) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """What the workers' files say, read here: no worker answers a scrape for it."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    return samples(generate_latest(registry).decode())


def test_workers_share_the_connection_budget_and_report_its_use_without_a_scrape(
    tmp_path: Path, pg_url: str, metrics_dir: Path
) -> None:
    """``HOSTCALL_DB_CONNECTIONS=10`` with ``--workers 2``: each worker's pool is its share
    less its LISTEN and lease connections, 3, so the server's pools hold 6 and the whole
    server at most 10 connections. A worker counts the connections it uses in plain
    numbers and writes them to its files every second, so a scrape that the other worker
    answers reports them too."""
    port = free_port()
    env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET[0], "HOSTCALL_DB_CONNECTIONS": "10",
           "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}  # fmt: skip
    for name in ("HOSTCALL_METRICS_TOKEN", "HOSTCALL_DB_POOL_SIZE", "HOSTCALL_WORKERS"):
        env.pop(name, None)
    agents = unlimited_agents(tmp_path / "agents")
    process = subprocess.Popen(
        [sys.executable, "-m", "hostcall", "serve", "--db", pg_url, "--port", str(port),
         "--agents", str(agents), "--workers", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        pools = 0.0
        while pools != 6:  # both workers started: 3 + 3
            assert process.poll() is None, "the supervisor exited"
            assert time.monotonic() < deadline, f"pools of {pools} after 60 s"
            try:
                pools = value(samples(scrape(url).text), "hostcall_db_pool_size")
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        created = httpx.post(f"{url}/api/agents/planner/conversations", headers=ORIGIN)
        assert created.status_code == 201, created.text
        cid = created.json()["conversationId"]
        auth = {"Authorization": f"Bearer {created.json()['sessionToken']}"}
        in_use = "hostcall_db_connections_in_use"
        with psycopg.connect(pg_url) as locker, ThreadPoolExecutor(1) as background:
            locker.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (cid,))
            # The message's statement holds a connection of one worker, blocked on the lock.
            sent = background.submit(
                httpx.post, f"{url}/api/conversations/{cid}/messages", json={"text": "Hello"},
                headers=auth, timeout=30,
            )  # fmt: skip
            deadline = time.monotonic() + 30
            while value(in_files(metrics_dir), in_use) < 1:
                assert time.monotonic() < deadline, "the connection in use never reached a file"
                time.sleep(0.1)
            locker.rollback()
            assert sent.result().status_code == 202, sent.result().text
        deadline = time.monotonic() + 30
        while value(in_files(metrics_dir), in_use) != 0:
            assert time.monotonic() < deadline, "a connection given back is still counted"
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
