"""Section 1: tool round trip over loopback, Hostcall next to a bare SSE + POST echo floor.

Per iteration and per side, a fresh stream is open before anything is sent; the clock starts
when the client has parsed the call event (Hostcall ``hostcall.tool_call_dispatch``, floor
``kick``), the answer POST starts at once, and each later event is timed from there.
Two clients: httpx (what a Python integrator would use), and raw asyncio connections, so
the client's own cost (about 2 ms per httpx request on a small VM) does not hide the server's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import servers
from clients import RawHttp, client_for, create_conversations, expect
from report import Row, compare, ms, print_table, summary
from streams import RawStream, sse_events

ASK = "What should I work on next?"  # the planner's read_board_tasks rule: no approval
BOARD = {
    "tasks": [
        {"id": "t1", "title": "Write release notes", "status": "todo", "assignee": "Ana"},
        {"id": "t2", "title": "Fix login bug", "status": "in-progress", "assignee": "Kenji"},
    ]
}
FLOOR_TOKEN = "x" * 180  # the floor's echo body is as big as Hostcall's result body
ITERATION_TIMEOUT = 10.0
HOSTCALL_MARKS = ("TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "RUN_FINISHED")

Events = AsyncIterator[tuple[str, str]]
Post = Callable[[str, dict[str, Any]], Awaitable[None]]
Answer = Callable[[dict[str, Any]], Awaitable[None]]


async def exchange(
    events: Events, trigger: str, answer: Answer, marks: tuple[str, ...]
) -> dict[str, float]:
    """Seconds from receiving ``trigger`` to each mark (after it) and to the POST's response."""
    t0, posting, out = 0.0, None, {}

    async def timed(call: dict[str, Any]) -> float:
        await answer(call)
        return time.perf_counter()

    async for kind, data in events:
        now = time.perf_counter()
        if kind == "RUN_ERROR":
            raise RuntimeError(f"the run failed: {data}")
        if posting is None:
            if kind == trigger:
                event = json.loads(data)  # Hostcall's is AG-UI CUSTOM: the call is its value
                call = event.get("value", event) if event.get("type") == "CUSTOM" else event
                t0, posting = now, asyncio.create_task(timed(call))
        elif kind in marks and kind not in out:
            out[kind] = now - t0
            if len(out) == len(marks):
                break
    if posting is None or len(out) < len(marks):
        raise RuntimeError(f"the stream ended before {trigger} and {marks}: got {sorted(out)}")
    out["POST"] = await posting - t0
    return out


@dataclass
class Side:
    """One server driven by one kind of client."""

    http: httpx.AsyncClient  # set-up requests (not timed)
    port: int
    raw: RawHttp | None  # None: stream and answer with httpx too

    async def run(
        self,
        path: str,
        start: Callable[[], Awaitable[None]],
        trigger: str,
        answer: Callable[[Post, dict[str, Any]], Awaitable[None]],
        marks: tuple[str, ...],
    ) -> dict[str, float]:
        if self.raw is not None:
            raw = self.raw

            async def post_raw(p: str, body: dict[str, Any]) -> None:
                await raw.post(p, body)

            stream = await RawStream.open(servers.HOST, self.port, path)
            try:
                await start()
                return await exchange(
                    stream.events(), trigger, lambda call: answer(post_raw, call), marks
                )
            finally:
                stream.close()

        async def post_httpx(p: str, body: dict[str, Any]) -> None:
            expect(await self.http.post(p, json=body), 200)

        async with self.http.stream("GET", path) as response:
            expect(response, 200)
            await start()
            return await exchange(
                sse_events(response), trigger, lambda call: answer(post_httpx, call), marks
            )


DISPATCH = "hostcall.tool_call_dispatch"


async def hostcall_iteration(
    side: Side, before_answer: Callable[[], None] | None = None
) -> dict[str, float]:
    """``before_answer``: called once the call is parsed, before its result is POSTed
    (round_trip_profile.py starts recording there)."""
    conv = (await create_conversations(side.http, 1))[0]
    # The client is a surface with a handler, as the widget is: the call is
    # assigned to it, and its stream records the claim as it writes the dispatch.
    surface = f"bench-{conv.id}"
    expect(
        await side.http.post(
            f"/api/conversations/{conv.id}/capabilities",
            json={"surfaceId": surface, "tools": ["read_board_tasks"]},
            headers=conv.auth,
        ),
        200,
    )

    async def start() -> None:
        expect(
            await side.http.post(
                f"/api/conversations/{conv.id}/messages", json={"text": ASK}, headers=conv.auth
            ),
            202,
        )

    async def answer(post: Post, call: dict[str, Any]) -> None:
        if before_answer is not None:
            before_answer()
        await post(
            f"/api/calls/{call['toolCallId']}/result",
            {"token": call["resultToken"], "output": BOARD},
        )

    path = f"{conv.events_path}&surface={surface}"
    return await side.run(path, start, DISPATCH, answer, HOSTCALL_MARKS)


async def floor_iteration(side: Side, channel: str) -> dict[str, float]:
    async def start() -> None:
        expect(await side.http.post(f"/kick/{channel}"), 200)

    async def answer(post: Post, call: dict[str, Any]) -> None:
        await post(f"/echo/{channel}", {"token": FLOOR_TOKEN, "output": BOARD})

    return await side.run(f"/events?ch={channel}", start, "kick", answer, ("echo",))


def rows_for(ours: list[dict[str, float]], floor: list[dict[str, float]]) -> list[Row]:
    echo = summary([f["echo"] for f in floor])
    rows: list[Row] = []
    # Targets per stat: the result p50 and p99; the resumed run's first text p50.
    for key, label, targets in (
        ("TOOL_CALL_RESULT", "TOOL_CALL_RESULT", {"p50": 1.5, "p99": 3.0}),
        ("TEXT_MESSAGE_START", "next TEXT_MESSAGE_START (resumed)", {"p50": 2.0}),
        ("RUN_FINISHED", "RUN_FINISHED (whole reply)", {}),
    ):
        mine = summary([o[key] for o in ours])
        for stat in ("p50", "p99", "mean"):
            rows.append(
                compare(
                    f"call -> result POST -> {label}, {stat}",
                    mine[stat],
                    echo[stat],
                    ms,
                    targets.get(stat),
                )
            )
    post_ours, post_floor = summary([o["POST"] for o in ours]), summary([f["POST"] for f in floor])
    for stat in ("p50", "p99"):
        rows.append(
            compare(
                f"call -> result POST response, {stat}", post_ours[stat], post_floor[stat], ms, None
            )
        )
    return rows


async def round_trip(iterations: int, warmup: int, workdir: Path, secret: str) -> None:
    clients = ("httpx", "raw asyncio")
    ours: dict[str, list[dict[str, float]]] = {c: [] for c in clients}
    floor: dict[str, list[dict[str, float]]] = {c: [] for c in clients}
    with servers.hostcall(workdir, workdir / "rt.db", secret) as hc, servers.floor(workdir) as fl:
        async with client_for(hc) as hc_http, client_for(fl) as fl_http:
            hc_raw, fl_raw = await RawHttp.open(hc.port), await RawHttp.open(fl.port)
            try:
                sides = {
                    "httpx": (Side(hc_http, hc.port, None), Side(fl_http, fl.port, None)),
                    "raw asyncio": (Side(hc_http, hc.port, hc_raw), Side(fl_http, fl.port, fl_raw)),
                }
                # Interleaved, so drift on the machine hits every side alike.
                for i in range(warmup + iterations):
                    for client, (hc_side, fl_side) in sides.items():
                        async with asyncio.timeout(ITERATION_TIMEOUT):
                            h = await hostcall_iteration(hc_side)
                            f = await floor_iteration(fl_side, f"rt{i}")
                        if i >= warmup:
                            ours[client].append(h)
                            floor[client].append(f)
            finally:
                hc_raw.close()
                fl_raw.close()
            hc.check_alive()
    for n, client in enumerate(clients):
        print_table(
            f"1{'ab'[n]}. Tool round trip, loopback, {client} client, n={iterations} after "
            f"{warmup} warm-up, interleaved",
            rows_for(ours[client], floor[client]),
            [
                "every row compares with the floor's echo event (SSE event -> POST echo -> SSE "
                "event), the POST rows with the echo POST's response"
            ],
        )
