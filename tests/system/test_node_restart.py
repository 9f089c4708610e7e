"""An installed node's call cut off by the server's death (SIGKILL): a write is failed, never
run twice; the run goes on. The node package is the tests' own, on the server's path."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from hostcall.qa.servers import HostcallServer, start_hostcall
from tests.support.nodes import build_package


def snapshot_when(
    client: httpx.Client, path: str, auth: dict[str, str], done: Any, timeout: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not done(snap := client.get(path, headers=auth).json()):
        assert time.monotonic() < deadline, snap
        time.sleep(0.05)
    return dict(snap)


def test_a_write_node_cut_off_by_sigkill_is_failed_and_not_run_again(tmp_path: Path) -> None:
    site = build_package(tmp_path / "site")
    runs = tmp_path / "node-runs.jsonl"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "ops.json").write_text(json.dumps({
        "id": "ops",
        "model": {"kind": "scripted", "rules": [{
            "match": "go", "tool": "hang", "arguments": {},
            "reply": "done", "error_reply": "{{ error.code }}: {{ error.message }}",
        }]},
        "tools": [{"name": "hang", "kind": "block", "block": "acme.hang", "effect": "write",
                   "approval": "never", "deadline_seconds": 120}],
    }))  # fmt: skip
    env = {"PYTHONPATH": str(site), "ACME_NODES_LOG": str(runs)}
    db = tmp_path / "hostcall.db"

    def serve() -> HostcallServer:
        return start_hostcall(
            tmp_path, agents=agents, db=db, env=env, extra=["--lease-seconds", "1"]
        )

    server = serve()
    try:
        client = httpx.Client(base_url=server.url, headers={"Origin": server.url}, timeout=5)
        conv = client.post("/api/agents/ops/conversations").json()
        auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
        path = f"/api/conversations/{conv['conversationId']}"
        assert client.post(f"{path}/messages", json={"text": "go"}, headers=auth).status_code == 202
        deadline = time.monotonic() + 20
        while not (runs.exists() and runs.read_text()):  # the node is running
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.05)
        server.stop(signal.SIGKILL)

        server = serve()
        client = httpx.Client(base_url=server.url, headers={"Origin": server.url}, timeout=5)
        snap = snapshot_when(client, path, auth, lambda s: s["run"]["status"] == "finished")
        error = snap["calls"][0]["outcome"]["error"]
        assert error["code"] == "block_failed", error
        # The visitor's snapshot has the code and a sentence; the model's reply quotes what
        # the model read.
        texts = [m["text"] for m in snap["messages"] if m["role"] == "assistant"]
        assert texts[-1].startswith("block_failed: The server restarted")
        assert "not retried" in texts[-1], texts
        assert len(runs.read_text().splitlines()) == 1  # never run twice
    finally:
        server.stop()
