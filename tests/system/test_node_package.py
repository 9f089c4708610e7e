"""The node package docs/agents.md shows, as written there: built and installed by pip from a
local directory, listed by ``hostcall blocks``, checked by ``hostcall check``, and run by a
served agent when a visitor's message calls it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from hostcall.qa.servers import start_hostcall
from hostcall.settings import ROOT

DOC = ROOT / "docs" / "agents.md"


def doc_block(language: str, first_line: str) -> str:
    """The fenced ``language`` block of the doc whose first line is ``first_line``."""
    for body in re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        if body.startswith(first_line):
            return str(body)
    raise AssertionError(f"{DOC.name} has no {language} block starting {first_line!r}")


def node_tool_of_the_doc() -> dict[str, object]:
    for body in re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        if '"kind": "block"' in body:
            tool: dict[str, object] = json.loads(body)
            return tool
    raise AssertionError(f"{DOC.name} has no tool of kind block")


def run(*args: str, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostcall", *args], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(site)}, timeout=60,
    )  # fmt: skip


def test_the_documented_node_package_installs_lists_checks_and_runs(tmp_path: Path) -> None:
    source = tmp_path / "acme-nodes"
    source.mkdir()
    (source / "pyproject.toml").write_text(doc_block("toml", "# acme-nodes/pyproject.toml"))
    (source / "acme_nodes.py").write_text(doc_block("python", "# acme-nodes/acme_nodes.py"))
    site = tmp_path / "site"
    # Hostcall itself is the environment's already (and no index is reached for it).
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr

    listed = run("blocks", site=site)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        "acme.crm_lookup\tacme-nodes 1.0.0\tLook up a customer in Acme's CRM by e-mail.\n"
    )

    customers = tmp_path / "customers.csv"
    customers.write_text("email,name,plan\nada@example.com,Ada Lovelace,gold\n")
    tool = node_tool_of_the_doc()
    tool["config"] = {**tool["config"], "file": str(customers)}  # type: ignore[dict-item]
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "crm.json").write_text(json.dumps({
        "id": "crm",
        "model": {"kind": "scripted", "rules": [{
            "match": "who is (?P<email>\\S+)", "tool": "crm_lookup",
            "arguments": {"email": "{{ email }}"},
            "reply": "{{ result.name }}, {{ result.plan }}",
            "error_reply": "{{ error.code }}: {{ error.message }}",
        }]},
        "tools": [tool],
    }))  # fmt: skip
    checked = run("check", "--agents", str(agents), site=site)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == "ok: crm (1 tools: crm_lookup)\n"

    server = start_hostcall(tmp_path, agents=agents, env={"PYTHONPATH": str(site)})
    try:
        with httpx.Client(base_url=server.url, headers={"Origin": server.url}) as client:
            conv = client.post("/api/agents/crm/conversations").json()
            auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
            path = f"/api/conversations/{conv['conversationId']}"
            for text, reply in [
                ("who is ada@example.com", "Ada Lovelace, gold"),
                ("who is bob@example.com",
                 "block_failed: The block failed: no customer with the e-mail bob@example.com"),
            ]:  # fmt: skip
                sent = client.post(f"{path}/messages", json={"text": text}, headers=auth)
                assert sent.status_code == 202, sent.text
                deadline = time.monotonic() + 15
                while (snap := client.get(path, headers=auth).json())["run"]["status"] not in (
                    "finished",
                    "failed",
                ):
                    assert time.monotonic() < deadline, snap["run"]
                    time.sleep(0.05)
                texts = [m["text"] for m in snap["messages"] if m["role"] == "assistant"]
                assert texts[-1] == reply
    finally:
        server.stop()
