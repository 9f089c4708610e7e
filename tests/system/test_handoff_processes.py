"""Human handoff across two Hostcall processes on one PostgreSQL database: a takeover made
on one process holds on the other (a visitor's message there starts no run), two operators
taking over at once on two processes leave one holder, and the visitor's stream on one
process gets every person's event the other commits, in order."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import EventSource

from hostcall.console.accounts import add_user
from hostcall.store import Store
from tests.support.databases import fresh_schema
from tests.support.processes import Cluster
from tests.system.test_processes import _read, _send

PASSWORD = "correct horse battery"
ORIGIN = {"Origin": "http://localhost:8001"}  # an origin the demo's agent allows


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with fresh_schema() as url:
        group = Cluster(url, tmp_path)
        try:
            yield group
        finally:
            group.close()
            print(group.output())  # shown by pytest when the test failed


async def _sign_in(client: httpx.AsyncClient, base: str, name: str) -> str:
    """Sign ``client`` in to the console at ``base``; the session's CSRF token."""
    form = await client.get(f"{base}/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token, form.text[:300]
    signing_in = {"csrf": token.group(1), "name": name, "password": PASSWORD}
    r = await client.post(f"{base}/console/login", data=signing_in)
    assert r.status_code == 303, r.text[:300]
    page = await client.get(f"{base}/console/conversations")
    csrf = re.search(r'name="hc-csrf" content="([^"]+)"', page.text)
    assert csrf, page.text[:300]
    return csrf.group(1)


async def _stream_until(client: httpx.AsyncClient, url: str, last: str) -> list[tuple[int, str]]:
    seen: list[tuple[int, str]] = []
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        async for event in EventSource(response).aiter_sse():
            seen.append((int(event.id.rpartition(":")[2]), event.event))
            if event.event == last:
                return seen
    raise AssertionError(f"stream ended before {last}: {seen}")


def test_a_takeover_on_one_process_holds_on_the_other_and_its_events_reach_both(
    cluster: Cluster,
) -> None:
    async def users(store: Store) -> None:
        for name in ("olga", "piet"):
            await add_user(store, name, "operator", PASSWORD)

    a, b = cluster.start(), cluster.start()
    _read(cluster.database_url, users)

    async def main() -> tuple[str, list[tuple[int, str]]]:
        fresh = httpx.Limits(max_keepalive_connections=0)
        async with (
            httpx.AsyncClient(timeout=30) as visitor,
            httpx.AsyncClient(timeout=60, limits=fresh) as streams,
            httpx.AsyncClient(timeout=30) as olga,
            httpx.AsyncClient(timeout=30) as piet,
        ):
            created = (await _send(visitor, "POST", f"{a.url}/api/agents/planner/conversations",
                                   headers=ORIGIN)).json()  # fmt: skip
            cid = created["conversationId"]
            auth = {"Authorization": f"Bearer {created['sessionToken']}"}
            events = f"{a.url}/api/conversations/{cid}/events?token={created['streamToken']}"
            stream = asyncio.create_task(_stream_until(streams, events, "RUN_FINISHED"))
            await asyncio.sleep(0.3)  # the stream is open on A before anything happens
            olga_csrf = await _sign_in(olga, b.url, "olga")
            piet_csrf = await _sign_in(piet, a.url, "piet")

            def act(client: httpx.AsyncClient, csrf: str, base: str, what: str,
                    body: dict[str, Any] | None = None) -> Any:  # fmt: skip
                return client.post(f"{base}/console/api/conversations/{cid}/{what}",
                                   json=body or {}, headers={"X-CSRF-Token": csrf})  # fmt: skip

            # Two operators take over at once, on two processes: one holds it.
            first, second = await asyncio.gather(
                act(olga, olga_csrf, b.url, "take-over"), act(piet, piet_csrf, a.url, "take-over")
            )
            statuses = sorted([first.status_code, second.status_code])
            assert statuses == [200, 409], (first.text, second.text)
            loser = first if first.status_code == 409 else second
            assert loser.json()["error"]["code"] == "conversation_taken"
            holder, holder_csrf, other, other_csrf = (
                (olga, olga_csrf, piet, piet_csrf)
                if first.status_code == 200
                else (piet, piet_csrf, olga, olga_csrf)
            )
            name = "olga" if holder is olga else "piet"

            # The visitor writes on A: no run, on any process.
            r = await _send(visitor, "POST", f"{a.url}/api/conversations/{cid}/messages",
                            json={"text": "is anyone there?"}, headers=auth)  # fmt: skip
            assert r.status_code == 202 and r.json()["person"] == name, r.text
            # The holder writes through A, the other cannot write or hand back through B.
            r = await act(holder, holder_csrf, a.url, "messages", {"text": "Yes, I am here."})
            assert r.status_code == 201, r.text
            r = await act(other, other_csrf, b.url, "messages", {"text": "me too"})
            assert r.status_code == 409 and r.json()["error"]["code"] == "not_taken_over"
            r = await act(other, other_csrf, b.url, "hand-back")
            assert r.status_code == 409 and r.json()["error"]["code"] == "not_taken_over"
            r = await act(holder, holder_csrf, b.url, "hand-back")
            assert r.status_code == 200, r.text
            # Handed back: the agent answers again, through B.
            r = await _send(visitor, "POST", f"{b.url}/api/conversations/{cid}/messages",
                            json={"text": "hello"}, headers=auth)  # fmt: skip
            assert r.status_code == 202 and "runId" in r.json(), r.text
            return cid, await asyncio.wait_for(stream, 60)

    cid, seen = asyncio.run(main())

    async def check(store: Store) -> None:
        stored = [(e.seq, e.name) for e in await store.events_after(cid, 0)]
        assert seen == stored  # every event, in order, no gap
        names = [n for _, n in stored]
        assert names[:7] == [
            "hostcall.person_joined",
            "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
            "hostcall.person_message",
            "hostcall.person_left",
            "RUN_STARTED",
        ]  # fmt: skip
        assert names.count("RUN_STARTED") == 1 and names[-1] == "RUN_FINISHED"
        assert len(await store.list_runs(cid)) == 1
        roles = [(m.role, m.author) for m in await store.list_messages(cid)]
        assert roles[:2] == [("user", None), ("operator", roles[1][1])]
        assert roles[1][1] in ("olga", "piet")
        assert await store.get_handoff(cid) is None
        audit = [e.action for e in reversed(await store.list_audit(conversation_id=cid))]
        assert audit == ["conversation.take_over", "conversation.message",
                         "conversation.hand_back"]  # fmt: skip

    _read(cluster.database_url, check)
