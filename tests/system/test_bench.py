"""The benchmarks' parts that would otherwise rot unseen (a benchmark is run by hand, so a
change of the product can break one for weeks): the agent file the A/B gives an older
checkout, and the load benchmark's visitors against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from hostcall.settings import DEMO_AGENTS, ROOT

sys.path.insert(0, str(ROOT / "bench"))  # the benchmarks import each other by module name
import load_bench
import load_flow
import servers


def older_checkout(root: Path, limit_keys: list[str] | None) -> Path:
    """A checkout from before ``page_context`` and (``None``) before any limits."""
    package = root / "server" / "hostcall"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if limit_keys is not None:
        (package / "quotas.py").write_text(f"LIMIT_KEYS = frozenset({limit_keys!r})\n")
    agents = root / "demo" / "agents"
    agents.mkdir(parents=True)
    planner = json.loads((DEMO_AGENTS / "planner.json").read_text())
    del planner["page_context"]
    (agents / "planner.json").write_text(json.dumps(planner))
    return root


def test_the_ab_gives_an_older_checkout_an_agent_file_of_its_own_keys(tmp_path: Path) -> None:
    old = older_checkout(tmp_path / "old", ["conversations_per_minute"])
    bench = json.loads((servers.bench_agents(tmp_path / "work", old) / "bench.json").read_text())
    assert "page_context" not in bench
    assert bench["limits"] == {"conversations_per_minute": 0}
    assert bench["id"] == "bench"


def test_the_ab_gives_a_checkout_without_limits_no_limits(tmp_path: Path) -> None:
    old = older_checkout(tmp_path / "old", None)
    bench = json.loads((servers.bench_agents(tmp_path / "work", old) / "bench.json").read_text())
    assert "limits" not in bench


async def test_every_kind_of_load_visitor_finishes_on_a_real_server(tmp_path: Path) -> None:
    load_bench.write_agent(tmp_path)
    argv = servers.serve_argv(tmp_path, tmp_path / "load.db")
    env = dict(os.environ, HOSTCALL_SECRET_KEYS=secrets.token_urlsafe(32))
    kinds = ["plain", "approval", "slow"]
    with servers.running("hostcall", argv, tmp_path, env) as server:
        for keep_alive in (False, True):
            tally = load_flow.Tally()
            for kind in kinds:
                await load_flow.visit(server.port, kind, tally, 60.0, keep_alive)
            assert (tally.finished, tally.errors, tally.failed_runs) == (3, {}, {}), tally
            assert len(tally.round_trips) == 3  # one tool call each, the approved one too
            assert len(tally.turns) == 4  # the slow visitor's greeting is a turn of its own
        server.check_alive()


async def test_a_load_visitor_waits_out_a_503_and_counts_it() -> None:
    """A busy door answers 503 with Retry-After: the visitor asks again, and the tally says
    where it met it (a raw server on loopback, one connection per request)."""
    answers = [
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 15\r\n\r\n"
        b'{"code":"busy"}',
        b'HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n{"made":42}',
    ]
    asked: list[bytes] = []

    async def door(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        asked.append(head.split(b"\r\n")[0] + b" " + await reader.readexactly(length))
        writer.write(answers[len(asked) - 1])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(door, servers.HOST, 0)
    port = server.sockets[0].getsockname()[1]
    tally = load_flow.Tally()
    visitor = load_flow.Visitor(port, tally, keep_alive=False)
    try:
        made = await visitor.post("create", "/api/agents/load/conversations", {}, 201, {})
    finally:
        visitor.close()
        server.close()
        await server.wait_closed()
    assert made == {"made": 42}
    assert asked == [b"POST /api/agents/load/conversations HTTP/1.1 {}"] * 2
    assert tally.busy == {"create": 1}


async def test_a_load_visitor_waits_at_the_door_for_as_long_as_the_widget_would() -> None:
    """Refused ``overloaded`` (the door's 503, before any work was taken), the visitor asks
    again past ``RETRIES``, as the widget does while it shows "Busy, retrying…"; another 503
    it takes ``RETRIES`` times only."""
    door = (
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 21\r\n\r\n"
        b'{"code":"overloaded"}'
    )
    other = door.replace(b"21", b"26").replace(b"overloaded", b"store_unavailable")
    made = b'HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\n{"made":42}'

    async def visit(answers: list[bytes]) -> tuple[Any, load_flow.Tally]:
        asked = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal asked
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(int(head.lower().split(b"content-length:")[1].split()[0]))
            writer.write(answers[min(asked, len(answers) - 1)])
            asked += 1
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, servers.HOST, 0)
        tally = load_flow.Tally()
        visitor = load_flow.Visitor(server.sockets[0].getsockname()[1], tally, keep_alive=False)
        try:
            return await visitor.post(
                "create", "/api/agents/load/conversations", {}, 201, {}
            ), tally
        except load_flow.VisitorError as exc:
            return exc.reason, tally
        finally:
            visitor.close()
            server.close()
            await server.wait_closed()

    waited, tally = await visit([door] * (load_flow.RETRIES + 5) + [made])
    assert waited == {"made": 42}
    assert tally.busy == {"create": load_flow.RETRIES + 5}
    gave_up, _ = await visit([other])
    assert gave_up == f"create 503 x{load_flow.RETRIES}"


def test_the_load_ab_drives_each_server_and_prints_their_ratio(tmp_path: Path) -> None:
    """``load_ab.py``: two servers of this checkout (one with a setting of its own), a round
    of a few visitors each, a table with each one's CPU and ratio."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "server"))
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "load_ab.py"), "-n", "4", "--rounds", "2",
         "sqlite=.", "sqlite=.,HOSTCALL_MAX_DB_WAITERS=5"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith(("1:", "2:"))]
    assert len(rows) == 2, done.stdout
    for row in rows:  # two rounds' figures, their median, the ratio and each round's
        cells = row.split()
        assert cells[-3].endswith("x") and cells[-4] == "ms", done.stdout
        assert all(float(c) > 0 for c in (*cells[-7:-5], *cells[-2:])), done.stdout
    assert done.stdout.count("  round ") == 2


def test_the_claim_bench_reads_one_dispatch_on_both_streams() -> None:
    """``dispatch_claim.py``: a few conversations, each dispatch read on the surface's stream
    and the observer's; a row of three gaps, in order."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dispatch_claim.py"), "-n", "4"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("the surface's")]
    gaps = [float(cell.replace(",", "")) for cell in row.split()[-6::2]]
    assert gaps == sorted(gaps), done.stdout
    assert row.split()[-5::2] == ["us", "us", "us"], done.stdout
