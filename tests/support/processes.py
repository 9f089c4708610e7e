"""Real Hostcall processes sharing one PostgreSQL schema, driven as a page and a balancer.

``Cluster`` starts ``python -m hostcall serve`` subprocesses on free ports; ``Page`` plays the
widget of one conversation: it sends a message, answers the call once, and retries a
request on another process when the one it used is gone, as a load balancer would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from hostcall.quotas import LIMIT_KEYS
from hostcall.settings import DEMO_AGENTS, ROOT
from tests.support.harness import BOARD, SECRET

# Short, so a killed process's runs move quickly; long enough for a loaded 2-core machine.
LEASE_SECONDS = 3.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Process:
    port: int
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None


def unlimited_agents(where: Path) -> Path:
    """The demo agents with rate limits off: these tests are one client creating hundreds
    of conversations a minute on purpose (the default limits would refuse them)."""
    directory = where / "agents-unlimited"
    if not directory.exists():
        shutil.copytree(DEMO_AGENTS, directory)
        planner = directory / "planner.json"
        data = json.loads(planner.read_text())
        data["limits"] = {key: 0 for key in LIMIT_KEYS}
        planner.write_text(json.dumps(data))
    return directory


@dataclass
class Cluster:
    database_url: str
    logs: Path
    processes: list[Process] = field(default_factory=list)
    # The agents directory (else the demo's, without rate limits), and more environment.
    agents: Path | None = None
    environ: dict[str, str] = field(default_factory=dict)

    def start(self) -> Process:
        port = free_port()
        env = {**os.environ, "HOSTCALL_SECRET_KEYS": SECRET[0], **self.environ}
        agents = self.agents or unlimited_agents(self.logs)
        log = self.logs / f"hostcall-{port}.log"
        # A file, not a pipe: a pipe nobody reads fills up and blocks the server.
        with open(log, "wb") as out:
            popen = subprocess.Popen(
            [sys.executable, "-m", "hostcall", "serve", "--db", self.database_url,
             "--agents", str(agents),
             "--port", str(port), "--log-level", "warning",
             "--lease-seconds", str(LEASE_SECONDS)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        process = Process(port, popen, log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if popen.poll() is not None:
                raise AssertionError(f"server exited with {popen.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{process.url}/healthz", timeout=0.5).status_code == 200:
                    self.processes.append(process)
                    return process
            except httpx.HTTPError:
                time.sleep(0.05)
        popen.kill()
        raise AssertionError("server did not start in 30 s")

    def kill(self, process: Process) -> None:
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait(10)

    def stop(self, process: Process) -> None:
        process.popen.send_signal(signal.SIGTERM)
        try:
            process.popen.wait(15)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait(5)

    def live(self) -> list[Process]:
        return [p for p in self.processes if p.alive]

    def close(self) -> None:
        for process in self.processes:
            if process.alive:
                self.stop(process)

    def output(self) -> str:
        """Every process's log, for a failing test's report."""
        return "\n".join(f"--- {p.url}\n{p.log.read_text()[-4000:]}" for p in self.processes)


class Balancer:
    """Sends each request to a live process, moving on when one is gone."""

    def __init__(self, cluster: Cluster, client: httpx.AsyncClient) -> None:
        self.cluster = cluster
        self.client = client
        self.turn = 0

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for _ in range(200):
            live = self.cluster.live()
            if live:
                self.turn += 1
                process = live[self.turn % len(live)]
                try:
                    return await self.client.request(method, process.url + path, **kwargs)
                except httpx.TransportError:
                    pass
            await asyncio.sleep(0.05)
        raise AssertionError(f"no process answered {method} {path}")


async def converse(balancer: Balancer, handled: dict[str, list[str]]) -> str:
    """One conversation: a message, its client-side calls each handled once, a reply.

    ``handled[conversation]`` lists the calls the "page" ran a handler for.
    """
    created = await balancer.request(
        "POST", "/api/agents/planner/conversations", headers={"Origin": "http://localhost:8001"}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    cid = body["conversationId"]
    ran = handled.setdefault(cid, [])
    auth = {"Authorization": f"Bearer {body['sessionToken']}"}
    sent = await balancer.request(
        "POST", f"/api/conversations/{cid}/messages",
        json={"text": "What should I work on next?"}, headers=auth,
    )  # fmt: skip
    # A retried message may have been taken by a process that died answering: 409 is fine.
    assert sent.status_code in (202, 409), sent.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        snap = (await balancer.request("GET", f"/api/conversations/{cid}", headers=auth)).json()
        run = snap.get("run")
        if run and run["status"] in ("finished", "failed"):
            return cid
        for call in snap["calls"]:
            if not call.get("resultToken") or call["toolCallId"] in ran:
                continue
            ran.append(call["toolCallId"])
            r = await balancer.request(
                "POST", f"/api/calls/{call['toolCallId']}/result",
                json={"token": call["resultToken"], "output": BOARD},
            )  # fmt: skip
            # 409: an earlier attempt reached a process that died after committing it.
            assert r.status_code in (200, 409), r.text
        await asyncio.sleep(0.2)
    raise AssertionError(f"conversation {cid} did not finish: {snap}")
