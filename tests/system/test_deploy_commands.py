"""``hostcall serve`` for several processes: what it runs, and what it refuses."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from hostcall.settings import ROOT
from tests.support.databases import fresh_schema
from tests.support.harness import SECRET
from tests.support.processes import free_port


def _serve(*args: str, keys: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCALL_")}
    if keys:
        env["HOSTCALL_SECRET_KEYS"] = SECRET[0]
    return subprocess.run(
        [sys.executable, "-m", "hostcall", "serve", "--port", str(free_port()), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


def test_workers_on_a_sqlite_file_are_refused_with_the_way_out(tmp_path: Path) -> None:
    result = _serve("--workers", "2", "--db", str(tmp_path / "one.db"))
    assert result.returncode == 2
    assert "--workers 2 needs PostgreSQL" in result.stderr
    assert "--db postgresql://" in result.stderr
    assert not (tmp_path / "one.db").exists()  # refused before anything was created


def test_postgresql_without_shared_secret_keys_is_refused(pg_url: str) -> None:
    result = _serve("--db", pg_url, keys=False)
    assert result.returncode == 1
    assert "HOSTCALL_SECRET_KEYS is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreachable_database_is_named_without_its_password() -> None:
    result = _serve("--db", "postgresql://hostcall:s3cret@127.0.0.1:1/hostcall")
    assert result.returncode == 1
    assert "cannot connect to PostgreSQL" in result.stderr
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr


def test_workers_serve_one_port_with_n_processes_on_postgresql(pg_url: str) -> None:
    port = free_port()
    env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET[0]}
    process = subprocess.Popen(
        [sys.executable, "-m", "hostcall", "serve", "--db", pg_url, "--port", str(port),
         "--workers", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        workers: list[psutil.Process] = []
        while len(workers) < 2:
            assert process.poll() is None, "the supervisor exited"
            assert time.monotonic() < deadline, f"{len(workers)} workers after 60 s"
            # uvicorn's workers are multiprocessing "spawn" children of the supervisor.
            children = psutil.Process(process.pid).children()
            workers = [p for p in children if "spawn_main" in " ".join(p.cmdline())]
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "no worker answered in 60 s"
            time.sleep(0.2)
        created = {
            httpx.post(
                f"{url}/api/agents/planner/conversations",
                headers={"Origin": "http://localhost:8001"},  # an allowed origin
            ).status_code
            for _ in range(10)
        }
        assert created == {201}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert process.returncode == 0


def test_users_add_works_beside_a_server_on_its_sqlite_file_and_on_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    from tests.support.processes import Cluster

    def users_add(db: str, name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hostcall", "users", "add", name, "--role", "operator",
             "--db", db],
            input="a-long-enough-password\n", cwd=ROOT, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip

    cluster = Cluster(str(tmp_path / "served.db"), tmp_path)
    try:
        cluster.start()  # the server holds the file; a brief command may still write to it
        done = users_add(str(tmp_path / "served.db"), "olga")
        assert done.returncode == 0, done.stderr
    finally:
        cluster.close()
    done = users_add(pg_url, "ada")
    assert done.returncode == 0, done.stderr
    from hostcall.store import open_store

    async def saved() -> bool:
        store = open_store(pg_url)
        try:
            return await store.get_user("ada") is not None
        finally:
            await store.close()

    assert asyncio.run(saved())
