"""Two real Hostcall processes on one PostgreSQL database.

Streams served by one process get what another commits (LISTEN/NOTIFY); a killed process's
runs finish on the survivor; a rolling restart duplicates nothing. The checks read the
database itself: every call ended once, every event sequence has no gap.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from httpx_sse import EventSource

from hostcall.store import Store, open_store
from hostcall.store.console_records import ConversationQuery
from hostcall.store.records import CallState, RunStatus
from tests.support.databases import fresh_schema
from tests.support.harness import BOARD
from tests.support.processes import (
    LEASE_SECONDS,
    Balancer,
    Cluster,
    converse,
    unlimited_agents,
)

T = TypeVar("T")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with fresh_schema() as url:
        group = Cluster(url, tmp_path)
        try:
            yield group
        finally:
            group.close()
            print(group.output())  # shown by pytest when the test failed


def _read(url: str, reading: Callable[[Store], Awaitable[T]]) -> T:
    """``reading`` on a store of its own, opened and closed on an event loop of its own."""

    async def read() -> T:
        store = open_store(url)
        try:
            return await reading(store)
        finally:
            await store.close()

    return asyncio.run(read())


def _check_every_conversation(url: str, handled: dict[str, list[str]]) -> None:
    _read(url, lambda store: _check(store, handled))


async def _check(store: Store, handled: dict[str, list[str]]) -> None:
    """Each run finished once, with one call handled once, and a gapless event log."""
    assert handled
    for cid, ran in handled.items():
        run = await store.latest_run(cid)
        assert run is not None and run.status is RunStatus.FINISHED, (cid, run)
        calls = await store.list_calls(cid)
        assert [c.state for c in calls] == [CallState.ANSWERED], (cid, calls)
        assert ran == [calls[0].id], (cid, ran)
        roles = [m.role for m in await store.list_messages(cid)]
        assert roles == ["user", "assistant", "tool", "assistant"], (cid, roles)
        events = await store.events_after(cid, 0)
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), cid
        types = [e.name for e in events]
        for once in ("RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_RESULT", "RUN_FINISHED"):
            assert types.count(once) == 1, (cid, once, types)


async def _stream_until_finished(client: httpx.AsyncClient, url: str) -> list[tuple[int, str]]:
    seen: list[tuple[int, str]] = []
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        async for event in EventSource(response).aiter_sse():
            if not event.data:
                # A keep-alive ping (a comment) after an event: httpx_sse hands it on as an
                # empty "message" carrying the last event's id. A stream open past the
                # ping interval (15 s, a loaded machine) gets one.
                continue
            seen.append((int(event.id.rpartition(":")[2]), event.event))
            if event.event == "RUN_FINISHED":
                return seen
    raise AssertionError(f"stream ended before RUN_FINISHED: {seen}")


async def _send(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request, retried when a kept-alive connection was closed under it (uvicorn closes
    idle ones after 5 s; a loaded test client can leave one idle that long), and, as the
    widget does, after the server's Retry-After when it is too busy to take new work (a
    burst of conversations at once meets the door: docs/deploy.md, "Back-pressure")."""
    closed = busy = 0
    while True:
        try:
            response = await client.request(method, url, **kwargs)
        except httpx.TransportError:
            closed += 1
            assert closed < 5, f"{method} {url} failed 5 times"
            await asyncio.sleep(0.1)
            continue
        if response.status_code != 503 or response.json()["error"]["code"] != "overloaded":
            return response
        busy += 1
        assert busy < 60, f"{method} {url} was refused as too busy 60 times"
        await asyncio.sleep(float(response.headers["Retry-After"]))


def test_streams_on_one_process_get_what_another_commits(cluster: Cluster) -> None:
    a, b = cluster.start(), cluster.start()

    async def one(
        client: httpx.AsyncClient, streams: httpx.AsyncClient
    ) -> tuple[str, list[tuple[int, str]]]:
        created = (
            await _send(
                client,
                "POST",
                f"{a.url}/api/agents/planner/conversations",
                headers={"Origin": "http://localhost:8001"},  # an allowed origin
            )
        ).json()
        assert "conversationId" in created, created
        cid = created["conversationId"]
        auth = {"Authorization": f"Bearer {created['sessionToken']}"}
        stream = asyncio.create_task(
            _stream_until_finished(
                streams, f"{a.url}/api/conversations/{cid}/events?token={created['streamToken']}"
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
        # Streams on connections of their own: a kept-alive one that uvicorn closed after 5 s
        # idle (a loaded machine) failed the stream's GET, which cannot be retried (its
        # ticket is single use), with "Server disconnected without sending a response".
        fresh = httpx.Limits(max_connections=400, max_keepalive_connections=0)
        async with (
            httpx.AsyncClient(timeout=60, limits=limits) as client,
            httpx.AsyncClient(timeout=60, limits=fresh) as streams,
        ):
            return await asyncio.gather(*(one(client, streams) for _ in range(100)))

    results = asyncio.run(main())

    async def check(store: Store) -> None:
        for cid, seen in results:
            stored = [(e.seq, e.name) for e in await store.events_after(cid, 0)]
            assert seen == stored, cid  # every event, in order, no gap, no reconnect
        handled = {cid: [(await store.list_calls(cid))[0].id] for cid, _ in results}
        await _check(store, handled)

    _read(cluster.database_url, check)


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
    # Three moments: as messages arrive (steps in flight), while runs wait on their
    # calls, and as answers arrive (resumed steps in flight).
    for round_, delay in enumerate((0.05, 0.6, 0.25)):
        victim = processes[round_ % 2]

        async def kill(victim: Any = victim, delay: float = delay) -> None:
            await asyncio.sleep(delay)
            cluster.kill(victim)

        handled = _load(cluster, 30, kill)
        _check_every_conversation(cluster.database_url, handled)
        processes[round_ % 2] = cluster.start()  # back to two for the next round
    # Every lease of work was ended or adopted; only the live processes' own remain (their
    # lives, and the sweeper's turn).
    leases = _read(cluster.database_url, lambda store: store.expired_leases(now=float("inf")))
    leftover = [k for k in leases if not k.startswith(("process:", "turn:"))]
    assert leftover == [], leftover


def test_rolling_restart_duplicates_no_step_and_no_handler_run(cluster: Cluster) -> None:
    old = cluster.start()

    async def roll() -> None:
        await asyncio.sleep(0.1)
        await asyncio.to_thread(cluster.start)  # the new process starts mid-load...
        await asyncio.sleep(0.3)
        await asyncio.to_thread(cluster.stop, old)  # ...then the old one stops

    handled = _load(cluster, 40, roll)
    _check_every_conversation(cluster.database_url, handled)
    assert not old.alive


def test_a_process_stalled_past_its_lease_appends_nothing_more_to_the_run(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A process paused (SIGSTOP) mid-answer loses its lease; another adopts the
    step and streams the answer anew. Resumed (SIGCONT), the paused process's model goes on
    streaming, and every append it tries is refused: its message ends where it was cut."""
    agents = unlimited_agents(tmp_path)  # the cluster's processes read this directory
    data = json.loads((agents / "planner.json").read_text())
    story = " ".join(f"w{i}" for i in range(240))  # 60 chunks, 0.1 s apart: 6 s of answer
    data["model"]["rules"].insert(
        0, {"match": "(?i)tell me a long story", "reply": story, "pace_seconds": 0.1}
    )
    (agents / "planner.json").write_text(json.dumps(data))
    survivor = cluster.start()  # first: it holds the cluster's sweeper turn
    stalled = cluster.start()
    created = httpx.post(
        f"{stalled.url}/api/agents/planner/conversations",
        headers={"Origin": "http://localhost:8001"},
    ).json()
    cid = created["conversationId"]
    auth = {"Authorization": f"Bearer {created['sessionToken']}"}
    sent = httpx.post(
        f"{stalled.url}/api/conversations/{cid}/messages",
        json={"text": "Tell me a long story"},
        headers=auth,
    )
    assert sent.status_code == 202, sent.text

    def events() -> list[Any]:
        return _read(cluster.database_url, lambda store: store.events_after(cid, 0))

    deadline = time.monotonic() + 20
    while sum(e.name == "TEXT_MESSAGE_CONTENT" for e in events()) < 3:
        assert time.monotonic() < deadline, "the answer never started"
        time.sleep(0.05)
    os.kill(stalled.popen.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 40
        while (httpx.get(f"{survivor.url}/api/conversations/{cid}", headers=auth).json()
               ["run"]["status"] != "finished"):  # fmt: skip
            assert time.monotonic() < deadline, "the survivor never finished the step"
            time.sleep(0.2)
    finally:
        os.kill(stalled.popen.pid, signal.SIGCONT)
    time.sleep(2.0)  # the paused model streams on (20 chunks' worth), and its appends fail
    assert stalled.alive

    log = events()
    summary = [(e.seq, e.name) for e in log]
    started = [
        e.data["messageId"]
        for e in log
        if e.name == "TEXT_MESSAGE_START" and e.data["role"] == "assistant"
    ]
    assert len(started) == 2, summary  # the message cut off, and the one streamed anew
    cut, new = started
    discarded = [
        e.seq
        for e in log
        if e.name == "hostcall.text_message_discarded" and e.data["value"]["messageId"] == cut
    ]
    assert len(discarded) == 1, summary
    # Nothing of the paused process's answer after the discard: its appends were refused.
    # (The new owner ends the cut message just after discarding it: AG-UI ends every start.)
    late = [
        (e.seq, e.name)
        for e in log
        if e.seq > discarded[0] and e.data.get("messageId") == cut and "delta" in e.data
    ]
    assert late == [], late
    ends = [e.seq for e in log if e.name == "TEXT_MESSAGE_END" and e.data["messageId"] == cut]
    assert ends == [discarded[0] + 1], summary
    shown = [e.data["delta"] for e in log if e.data.get("messageId") == new and "delta" in e.data]
    assert " ".join(shown).split() == story.split()
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    messages = _read(cluster.database_url, lambda store: store.list_messages(cid))
    assert [(m.role, m.text) for m in messages] == [
        ("user", "Tell me a long story"), ("assistant", story),
    ]  # fmt: skip


def test_a_frozen_sweeper_loses_its_turn_and_nothing_runs_twice_when_it_wakes(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The process with the sweeper's turn is paused (SIGSTOP) mid-answer, with a call of
    its waiting on a deadline. Within the lease (docs/deploy.md) another process takes the
    turn: it expires the call and adopts the step. Once, the turn was an advisory lock on a
    connection the paused process kept open, and nobody expired or adopted anything until it
    woke. Resumed (SIGCONT), the paused process runs nothing a second time."""
    agents = unlimited_agents(tmp_path)
    data = json.loads((agents / "planner.json").read_text())
    story = " ".join(f"w{i}" for i in range(320))  # 80 chunks, 0.1 s apart: 8 s of answer
    data["model"]["rules"].insert(
        0, {"match": "(?i)tell me a long story", "reply": story, "pace_seconds": 0.1}
    )
    deadline_seconds = 2.0
    for tool in data["tools"]:
        if tool["name"] == "read_board_tasks":
            tool["deadline_seconds"] = deadline_seconds
    (agents / "planner.json").write_text(json.dumps(data))
    frozen = cluster.start()  # first: it takes the cluster's sweeper turn
    survivor = cluster.start()

    def conversation() -> tuple[str, dict[str, str]]:
        created = httpx.post(
            f"{frozen.url}/api/agents/planner/conversations",
            headers={"Origin": "http://localhost:8001"},
        ).json()
        return created["conversationId"], {"Authorization": f"Bearer {created['sessionToken']}"}

    def send(cid: str, auth: dict[str, str], text: str) -> None:
        sent = httpx.post(
            f"{frozen.url}/api/conversations/{cid}/messages", json={"text": text}, headers=auth
        )
        assert sent.status_code == 202, sent.text

    def events(cid: str) -> list[Any]:
        return _read(cluster.database_url, lambda store: store.events_after(cid, 0))

    def calls(cid: str) -> list[Any]:
        return _read(cluster.database_url, lambda store: store.list_calls(cid))

    told, told_auth = conversation()
    asked, asked_auth = conversation()
    send(told, told_auth, "Tell me a long story")
    deadline = time.monotonic() + 20
    while sum(e.name == "TEXT_MESSAGE_CONTENT" for e in events(told)) < 3:
        assert time.monotonic() < deadline, "the answer never started"
        time.sleep(0.05)
    send(asked, asked_auth, "What should I work on next?")  # nobody answers its call
    while not calls(asked):
        assert time.monotonic() < deadline, "the call was never made"
        time.sleep(0.05)
    os.kill(frozen.popen.pid, signal.SIGSTOP)
    paused = time.monotonic()
    try:
        (call,) = calls(asked)
        assert call.state.open and call.deadline > time.time(), call  # it passes while paused
        # Another process takes the turn once the paused one's lease lapses, and on its
        # next sweep expires the call and adopts the step (the discard is the adoption's).
        while not (
            calls(asked)[0].state is CallState.EXPIRED
            and any(e.name == "hostcall.text_message_discarded" for e in events(told))
        ):
            assert time.monotonic() - paused < 30, "nobody took the paused process's turn"
            time.sleep(0.1)
        took = time.monotonic() - paused
        # The bound (docs/deploy.md): the lease, plus a sweep, plus a loaded machine's lag.
        assert took < LEASE_SECONDS + 5, took
        for cid, auth in ((told, told_auth), (asked, asked_auth)):
            deadline = time.monotonic() + 40
            while (httpx.get(f"{survivor.url}/api/conversations/{cid}", headers=auth).json()
                   ["run"]["status"] != "finished"):  # fmt: skip
                assert time.monotonic() < deadline, f"the survivor never finished {cid}"
                time.sleep(0.2)
    finally:
        os.kill(frozen.popen.pid, signal.SIGCONT)
    time.sleep(3.0)  # the paused process wakes: its sweeps, its model and its renewals go on
    assert frozen.alive and survivor.alive

    # The story: streamed anew once, the cut copy discarded once, stored once.
    log = events(told)
    summary = [(e.seq, e.name) for e in log]
    assert [e.seq for e in log] == list(range(1, len(log) + 1)), summary
    started = [e for e in log if e.name == "TEXT_MESSAGE_START" and e.data["role"] == "assistant"]
    assert len(started) == 2, summary
    discarded = [e for e in log if e.name == "hostcall.text_message_discarded"]
    assert len(discarded) == 1, summary
    assert [n for n in ("RUN_STARTED", "RUN_FINISHED") if [e.name for e in log].count(n) != 1] == []
    messages = _read(cluster.database_url, lambda store: store.list_messages(told))
    assert [(m.role, m.text) for m in messages] == [
        ("user", "Tell me a long story"), ("assistant", story),
    ]  # fmt: skip
    # The call: expired once, and the step after it ran once.
    (call,) = calls(asked)
    assert call.state is CallState.EXPIRED, call
    log = events(asked)
    names = [e.name for e in log]
    assert [e.seq for e in log] == list(range(1, len(log) + 1)), names
    for once in ("RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_RESULT", "RUN_FINISHED"):
        assert names.count(once) == 1, (once, names)
    messages = _read(cluster.database_url, lambda store: store.list_messages(asked))
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"], messages
    run = _read(cluster.database_url, lambda store: store.latest_run(asked))
    assert run is not None and run.status is RunStatus.FINISHED, run


def test_a_rate_limit_of_n_is_n_across_two_processes(cluster: Cluster, tmp_path: Path) -> None:
    """Limits are counted in the database, not per process. Five conversations a
    minute with this agent, asked for alternately on two processes, eight at a time: five
    are made, the rest refused with 429, and the refused ones leave nothing behind."""
    agents = unlimited_agents(tmp_path)
    data = json.loads((agents / "planner.json").read_text())
    data["limits"]["conversations_per_minute"] = 5
    (agents / "planner.json").write_text(json.dumps(data))
    # A twin, counted apart: for a second try if the first one's requests fell in two of the
    # limit's one-minute windows (rather than sleeping up to 16 s for a fresh minute first).
    twin = {**data, "id": "planner-twin"}
    (agents / "planner-twin.json").write_text(json.dumps(twin))
    a, b = cluster.start(), cluster.start()

    async def create(client: httpx.AsyncClient, url: str, agent: str) -> httpx.Response:
        return await client.post(
            f"{url}/api/agents/{agent}/conversations", headers={"Origin": "http://localhost:8001"}
        )

    async def main(agent: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            return await asyncio.gather(*(create(client, p.url, agent) for p in [a, b] * 4))

    for agent in ("planner", "planner-twin"):
        began = time.time()
        responses = asyncio.run(main(agent))
        if began // 60 == time.time() // 60:  # all of it inside one minute's window
            break
    else:
        raise AssertionError("the second try crossed a minute too: a try took most of a minute")
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 5 + [429] * 3, [r.text for r in responses]
    refused = [r.json()["error"] for r in responses if r.status_code == 429]
    assert all("conversations with this agent" in e["message"] for e in refused), refused
    made = {r.json()["conversationId"] for r in responses if r.status_code == 201}

    async def stored(store: Store) -> set[str]:
        found = await store.list_conversations(ConversationQuery(agent_id=agent, limit=100))
        return {s.conversation.id for s in found}

    assert _read(cluster.database_url, stored) == made
    later = httpx.post(
        f"{b.url}/api/agents/{agent}/conversations", headers={"Origin": "http://localhost:8001"}
    )
    assert later.status_code == 429 and int(later.headers["retry-after"]) <= 60


def test_a_second_process_on_one_sqlite_file_is_refused(tmp_path: Any) -> None:
    import subprocess
    import sys

    from hostcall.settings import ROOT
    from tests.support.processes import free_port

    cluster = Cluster(str(tmp_path / "one.db"), tmp_path)
    try:
        cluster.start()
        out = subprocess.run(
            [sys.executable, "-m", "hostcall", "serve", "--db", str(tmp_path / "one.db"),
             "--port", str(free_port())],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert out.returncode == 1
        assert "another Hostcall process (pid" in out.stderr
        assert "PostgreSQL" in out.stderr
        json.dumps(out.stderr)
    finally:
        cluster.close()


@pytest.mark.parametrize("link", ["symlink", "hard link"])
def test_a_second_process_through_a_link_to_the_sqlite_file_is_refused(
    tmp_path: Path, link: str
) -> None:
    """The guard goes by the file, not its name: a second ``hostcall serve`` through a
    symlink or a hard link to a served database (here in another directory, by another
    name) is refused at start, and the first serves on with nothing lost. Once, the guard
    was a lock file named after the path, and the second process got in and took over the
    first's live runs. Once the first is killed (SIGKILL), its lock is gone with it: the
    link serves, and the first's conversation is there."""
    import subprocess
    import sys

    from hostcall.settings import ROOT
    from tests.support.processes import free_port

    db = tmp_path / "one.db"
    other = tmp_path / "elsewhere" / "two.db"
    other.parent.mkdir()
    first_cluster, later_cluster = Cluster(str(db), tmp_path), Cluster(str(other), tmp_path)
    try:
        first = first_cluster.start()
        created = httpx.post(
            f"{first.url}/api/agents/planner/conversations",
            headers={"Origin": "http://localhost:8001"},
        ).json()
        cid = created["conversationId"]
        auth = {"Authorization": f"Bearer {created['sessionToken']}"}
        if link == "symlink":
            other.symlink_to(db)
        else:
            os.link(db, other)
        out = subprocess.run(
            [sys.executable, "-m", "hostcall", "serve", "--db", str(other),
             "--port", str(free_port())],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert out.returncode == 1, out.stderr
        refusal = f"another Hostcall process (pid {first.popen.pid}) is serving the SQLite"
        assert refusal in out.stderr and str(other) in out.stderr, out.stderr
        assert "PostgreSQL" in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert first.alive
        r = httpx.get(f"{first.url}/api/conversations/{cid}", headers=auth)
        assert r.status_code == 200, r.text
        # A process opening the file by another name reads the file, not the WAL beside the
        # first's name (docs/deploy.md): let the checkpointer (every second) copy it over.
        time.sleep(2.0)
        first_cluster.kill(first)
        second = later_cluster.start()  # through the link: the dead process's lock is gone
        r = httpx.get(f"{second.url}/api/conversations/{cid}", headers=auth)
        assert r.status_code == 200, r.text
        if link == "hard link":  # the danger of a second name is said at start
            assert "has 2 hard links" in second.log.read_text()
    finally:
        first_cluster.close()
        later_cluster.close()


# ---- surfaces across processes -----------------------------------------------------


def test_a_dead_process_s_surfaces_go_away_reads_move_and_writes_go_to_the_form(
    cluster: Cluster,
) -> None:
    """Two pages of each conversation, one streaming from each process. A is SIGKILLed
    holding the stream of the page every call went to: once A's lease lapses and the grace
    period passes, a read runs again on the page served by B, and a write goes to the form
    (it may have run on the dead page: never twice). Once, A's
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
    # The dead process's lease was taken over and let go: nothing of A is left.
    leases = _read(cluster.database_url, lambda store: store.expired_leases(now=float("inf")))
    assert not [k for k in leases if "process:" in k
                and k.split(":", 1)[1].split(":")[1] == str(a.popen.pid)]  # fmt: skip
