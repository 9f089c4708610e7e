"""Two real Hostcall processes on one PostgreSQL database (issue 10).

Streams served by one process get what another commits (LISTEN/NOTIFY); a killed process's
runs finish on the survivor; a rolling restart duplicates nothing. The checks read the
database itself: every call ended once, every event sequence has no gap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.store import Store, open_store
from server.store.records import CallState, RunStatus
from tests.unit.conftest import BOARD
from tests.unit.databases import fresh_schema
from tests.unit.processes import Balancer, Cluster, converse


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with fresh_schema() as url:
        group = Cluster(url, tmp_path)
        try:
            yield group
        finally:
            group.close()
            print(group.output())  # shown by pytest when the test failed


def _check_every_conversation(store: Store, handled: dict[str, list[str]]) -> None:
    """Each run finished once, with one call handled once, and a gapless event log."""
    assert handled
    for cid, ran in handled.items():
        run = store.latest_run(cid)
        assert run is not None and run.status is RunStatus.FINISHED, (cid, run)
        calls = store.list_calls(cid)
        assert [c.state for c in calls] == [CallState.ANSWERED], (cid, calls)
        assert ran == [calls[0].id], (cid, ran)
        roles = [m.role for m in store.list_messages(cid)]
        assert roles == ["user", "assistant", "tool", "assistant"], (cid, roles)
        events = store.events_after(cid, 0)
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), cid
        types = [e.name for e in events]
        for once in ("RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_RESULT", "RUN_FINISHED"):
            assert types.count(once) == 1, (cid, once, types)


async def _stream_until_finished(client: httpx.AsyncClient, url: str) -> list[tuple[int, str]]:
    seen: list[tuple[int, str]] = []
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.strip()
            elif not line and "id" in fields:
                seen.append((int(fields["id"].rpartition(":")[2]), fields["event"]))
                fields = {}
                if seen[-1][1] == "RUN_FINISHED":
                    return seen
    raise AssertionError(f"stream ended before RUN_FINISHED: {seen}")


async def _send(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request, retried when a kept-alive connection was closed under it (uvicorn closes
    idle ones after 5 s; a loaded test client can leave one idle that long)."""
    for _ in range(5):
        try:
            return await client.request(method, url, **kwargs)
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"{method} {url} failed 5 times")


def test_streams_on_one_process_get_what_another_commits(cluster: Cluster) -> None:
    a, b = cluster.start(), cluster.start()

    async def one(client: httpx.AsyncClient) -> tuple[str, list[tuple[int, str]]]:
        created = (
            await _send(
                client,
                "POST",
                f"{a.url}/api/agents/planner/conversations",
                headers={"Origin": "http://localhost:8001"},  # an allowed origin (issue 7)
            )
        ).json()
        cid = created["conversationId"]
        auth = {"Authorization": f"Bearer {created['sessionToken']}"}
        stream = asyncio.create_task(
            _stream_until_finished(
                client, f"{a.url}/api/conversations/{cid}/events?token={created['streamToken']}"
            )
        )
        await asyncio.sleep(0.2)  # the stream is open on A before anything happens on B
        r = await _send(
            client, "POST", f"{b.url}/api/conversations/{cid}/messages",
            json={"text": "What should I work on next?"}, headers=auth,
        )  # fmt: skip
        assert r.status_code in (202, 409), r.text  # 409: a retry of a message that arrived
        while True:
            snap = (
                await _send(client, "GET", f"{b.url}/api/conversations/{cid}", headers=auth)
            ).json()
            calls = [c for c in snap["calls"] if c.get("resultToken")]
            if calls:
                break
            await asyncio.sleep(0.2)
        r = await _send(
            client, "POST", f"{b.url}/api/calls/{calls[0]['toolCallId']}/result",
            json={"token": calls[0]["resultToken"], "output": BOARD},
        )  # fmt: skip
        assert r.status_code in (200, 409), r.text  # 409: a retry of an answer that arrived
        return cid, await asyncio.wait_for(stream, 60)

    async def main() -> list[tuple[str, list[tuple[int, str]]]]:
        limits = httpx.Limits(max_connections=400)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            return await asyncio.gather(*(one(client) for _ in range(100)))

    results = asyncio.run(main())
    store = open_store(cluster.database_url)
    try:
        for cid, seen in results:
            stored = [(e.seq, e.name) for e in store.events_after(cid, 0)]
            assert seen == stored, cid  # every event, in order, no gap, no reconnect
        handled = {cid: [store.list_calls(cid)[0].id] for cid, _ in results}
        _check_every_conversation(store, handled)
    finally:
        store.close()


def _load(cluster: Cluster, count: int, during: Any) -> dict[str, list[str]]:
    """``count`` conversations through the balancer while ``during`` does its harm."""
    handled: dict[str, list[str]] = {}

    async def main() -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            balancer = Balancer(cluster, client)
            load = asyncio.gather(*(converse(balancer, handled) for _ in range(count)))
            await during()
            await asyncio.wait_for(load, 120)

    asyncio.run(main())
    return handled


def test_sigkill_of_one_of_two_processes_loses_nothing_and_runs_nothing_twice(
    cluster: Cluster,
) -> None:
    processes = [cluster.start(), cluster.start()]
    store = open_store(cluster.database_url)
    try:
        # Three moments: as messages arrive (steps in flight), while runs wait on their
        # calls, and as answers arrive (resumed steps in flight).
        for round_, delay in enumerate((0.05, 0.6, 0.25)):
            victim = processes[round_ % 2]

            async def kill(victim: Any = victim, delay: float = delay) -> None:
                await asyncio.sleep(delay)
                cluster.kill(victim)

            handled = _load(cluster, 30, kill)
            _check_every_conversation(store, handled)
            processes[round_ % 2] = cluster.start()  # back to two for the next round
        # Every lease of work was ended or adopted; only the live processes' own remain.
        leftover = [
            k for k in store.expired_leases(now=float("inf")) if not k.startswith("process:")
        ]
        assert leftover == [], leftover
    finally:
        store.close()


def test_rolling_restart_duplicates_no_step_and_no_handler_run(cluster: Cluster) -> None:
    old = cluster.start()
    store = open_store(cluster.database_url)
    try:

        async def roll() -> None:
            await asyncio.sleep(0.1)
            await asyncio.to_thread(cluster.start)  # the new process starts mid-load...
            await asyncio.sleep(0.3)
            await asyncio.to_thread(cluster.stop, old)  # ...then the old one stops

        handled = _load(cluster, 40, roll)
        _check_every_conversation(store, handled)
        assert not old.alive
    finally:
        store.close()


def test_a_second_process_on_one_sqlite_file_is_refused(tmp_path: Any) -> None:
    import subprocess
    import sys

    from server.settings import ROOT
    from tests.unit.processes import free_port

    cluster = Cluster(str(tmp_path / "one.db"), tmp_path)
    try:
        cluster.start()
        out = subprocess.run(
            [sys.executable, "-m", "server", "serve", "--db", str(tmp_path / "one.db"),
             "--port", str(free_port())],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert out.returncode == 1
        assert "another Hostcall process (pid" in out.stderr
        assert "PostgreSQL" in out.stderr
        json.dumps(out.stderr)
    finally:
        cluster.close()


# ---- surfaces across processes (issue 9) -----------------------------------------------------


def test_a_dead_process_s_surfaces_go_away_reads_move_and_writes_go_to_the_form(
    cluster: Cluster,
) -> None:
    """Two pages of each conversation, one streaming from each process. A is SIGKILLed
    holding the stream of the page every call went to: once A's lease lapses and the grace
    period passes, a read runs again on the page served by B, and a write goes to the form
    (it may have run on the dead page: never twice). Before issue 9's second round, A's
    streams stayed counted on PostgreSQL and both calls waited forever."""
    a, b = cluster.start(), cluster.start()
    origin = {"Origin": "http://localhost:8001"}

    async def page(client: httpx.AsyncClient, process: Any, conv: dict[str, Any],
                   surface: str) -> asyncio.Task[None]:  # fmt: skip
        cid, auth = conv["conversationId"], {"Authorization": f"Bearer {conv['sessionToken']}"}
        r = await _send(client, "POST", f"{process.url}/api/conversations/{cid}/capabilities",
                        json={"surfaceId": surface, "tools": ["read_board_tasks", "create_task"]},
                        headers=auth)  # fmt: skip
        assert r.status_code == 200, r.text
        ticket = await _send(client, "POST", f"{process.url}/api/conversations/{cid}/stream-token",
                             headers=auth)  # fmt: skip
        url = f"{process.url}/api/conversations/{cid}/events?token={ticket.json()['streamToken']}"

        async def hold() -> None:
            async with client.stream("GET", f"{url}&surface={surface}") as response:
                assert response.status_code == 200
                async for _ in response.aiter_lines():
                    pass

        task = asyncio.create_task(hold())
        await asyncio.sleep(0.3)  # attached
        return task

    async def snapshot(client: httpx.AsyncClient, conv: dict[str, Any]) -> dict[str, Any]:
        auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
        r = await _send(client, "GET", f"{b.url}/api/conversations/{conv['conversationId']}",
                        headers=auth)  # fmt: skip
        return r.json()  # type: ignore[no-any-return]

    async def first_call(client: httpx.AsyncClient, conv: dict[str, Any], **want: Any
                         ) -> dict[str, Any]:  # fmt: skip
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            calls = (await snapshot(client, conv))["calls"]
            if calls and all(calls[0].get(k) == v for k, v in want.items()):
                return calls[0]  # type: ignore[no-any-return]
            await asyncio.sleep(0.2)
        raise AssertionError(f"no call with {want}: {calls}")

    async def main() -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            convs = []
            for _ in range(2):
                r = await _send(client, "POST", f"{b.url}/api/agents/planner/conversations",
                                headers=origin)  # fmt: skip
                convs.append(r.json())
            read, write = convs
            pages = []
            for conv in convs:  # the page on B first: the page on A is the most recent
                pages.append(await page(client, b, conv, "page-on-b-0001"))
                pages.append(await page(client, a, conv, "page-on-a-0001"))
            for conv, text in ((read, "What should I work on next?"),
                               (write, "Add a task to water the plants")):  # fmt: skip
                auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
                r = await _send(client, "POST",
                                f"{b.url}/api/conversations/{conv['conversationId']}/messages",
                                json={"text": text}, headers=auth)  # fmt: skip
                assert r.status_code == 202, r.text
            # The read went to the most recent page, whose stream (on A) delivered it.
            call = await first_call(client, read, state="delivered")
            assert call["surfaceId"] == "page-on-a-0001", call
            # The write asks first; the person approves it on the page served by A.
            ask = await first_call(client, write, state="awaiting_confirmation")
            r = await _send(client, "POST", f"{b.url}/api/calls/{ask['toolCallId']}/decision",
                            json={"token": ask["decisionToken"], "decision": "approve",
                                  "surfaceId": "page-on-a-0001"})  # fmt: skip
            assert r.status_code == 200, r.text
            await first_call(client, write, state="delivered", surfaceId="page-on-a-0001")

            cluster.kill(a)  # its streams die with it; nobody says "leave"
            started = time.monotonic()
            moved = await first_call(client, read, surfaceId="page-on-b-0001")
            # Not before the dead process's lease lapsed (3 s) and the grace period (5 s).
            assert time.monotonic() - started > 3.0
            assert moved["toolCallId"] == call["toolCallId"] and moved["route"] == "handler"
            assert moved["assignment"] == call["assignment"] + 1
            formed = await first_call(client, write, route="form")
            assert formed["formReason"] == "surface_gone" and formed["surfaceId"] is None
            assert formed["state"] == "delivered"  # still open: the person answers it
            for task in pages:
                task.cancel()
            await asyncio.gather(*pages, return_exceptions=True)

    asyncio.run(main())
    store = open_store(cluster.database_url)
    try:  # the dead process's lease was taken over and let go: nothing of A is left
        assert not [k for k in store.expired_leases(now=float("inf")) if "process:" in k
                    and k.split(":", 1)[1].split(":")[1] == str(a.popen.pid)]  # fmt: skip
    finally:
        store.close()
