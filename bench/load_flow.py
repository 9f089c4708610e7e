"""One visitor of the load bench: a conversation with the full tool round trip, as a client
that names no surface does it, on raw HTTP/1.1 (bench/clients.py, bench/streams.py).

create -> capabilities -> stream -> message -> (approval -> decision) -> dispatch ->
delivered -> result -> RUN_FINISHED. Kinds of visitor, dealt in a fixed pattern:

- ``plain``: "What should I work on next?" (read_board_tasks, no approval);
- ``approval``: "add a task to ..." (create_task: a person approves it first);
- ``slow``: first a greeting the model streams slowly (``SLOW_SECONDS`` for the step,
  in paced chunks), then the plain round trip.

Each POST goes on a connection of its own (``keep_alive``: one per visitor, as a browser
would): with several processes on one port, each request goes to whichever process accepts
its connection, independently of the visitor's other requests and its stream.

A ``503`` is what a busy server says at its door: the visitor waits its ``Retry-After`` (at
most ``RETRY_CAP``) and asks again, and the tally counts it. Refused as ``overloaded`` (the
door's own refusal, before any work was taken), it asks again for as long as it is refused,
as the widget does while it shows "Busy, retrying…" (widget/app.js, ``patient``): only the
visitor's ``--timeout`` ends its wait. Another ``503`` is tried ``RETRIES`` times. A stream
the server cuts is opened again after the last event seen. Anything else is an error of the
visitor's, with its reason; a ``RUN_ERROR`` is a failed run, with its code.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import servers
from clients import RawHttp
from streams import RawStream, Refused

AGENT = "load"
ASK = "What should I work on next?"
ADD = "Add a task to check the load bench"
SLOW = "Take your time and say hello"
SLOW_WORDS = 24  # six chunks of four words
SLOW_PACE = 0.2  # seconds between chunks: a model step of about a second
SLOW_SECONDS = SLOW_PACE * (SLOW_WORDS // 4 - 1)
BOARD = {"tasks": [{"id": "t1", "title": "Fix login bug", "status": "todo", "assignee": "Ana"}]}
CREATED = {"id": "t2", "title": "Check the load bench", "status": "todo"}
TOOLS = ["read_board_tasks", "create_task"]
DISPATCH = "hostcall.tool_call_dispatch"
APPROVAL = "hostcall.tool_call_approval_requested"
RETRIES = 30  # 503s but the door's a visitor takes for one request before it gives up
RETRY_CAP = 5.0
RECONNECTS = 5
OVERLOADED = "overloaded"  # the door's refusal (hostcall/door.py)
_RETRY_AFTER = re.compile(rb"(?i)\r\nretry-after:[ \t]*(\d+)")


def kind_of(n: int, approvals: float, slow: float) -> str:
    """The ``n``-th visitor's kind: shares dealt evenly, the same for every backend."""
    pattern_step = n % 20
    if pattern_step < round(20 * approvals):
        return "approval"
    if pattern_step >= 20 - round(20 * slow):
        return "slow"
    return "plain"


def agent_file(planner: dict[str, Any], limits: dict[str, int]) -> dict[str, Any]:
    """The load agent: the demo planner with ``limits``, and a slow greeting first in its
    rules."""
    rule = {
        "match": f"(?i)^{SLOW}$",
        "reply": " ".join(["word"] * SLOW_WORDS),
        "pace_seconds": SLOW_PACE,
    }
    model = {**planner["model"], "rules": [rule, *planner["model"]["rules"]]}
    return {**planner, "id": AGENT, "model": model, "limits": limits}


@dataclass
class Tally:
    """What every visitor of one backend met."""

    finished: int = 0
    failed_runs: Counter[str] = field(default_factory=Counter)  # RUN_ERROR code -> count
    errors: Counter[str] = field(default_factory=Counter)  # the visitor's own, by reason
    busy: Counter[str] = field(default_factory=Counter)  # 503 -> the request that met it
    longest_503_wait: float = 0.0  # the longest a request waited out 503s before it was taken
    cuts: int = 0  # streams the server ended before RUN_FINISHED
    round_trips: list[float] = field(default_factory=list)  # dispatch -> TOOL_CALL_RESULT
    turns: list[float] = field(default_factory=list)  # message POST -> RUN_FINISHED


class VisitorError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Visitor:
    def __init__(self, port: int, tally: Tally, keep_alive: bool) -> None:
        self.port, self.tally, self.keep_alive = port, tally, keep_alive
        self.origin = f"http://{servers.HOST}:{port}"
        self.http: RawHttp | None = None

    async def post(
        self,
        what: str,
        path: str,
        body: dict[str, Any],
        want: int,
        auth: dict[str, str],
        also: int = 0,
    ) -> Any:
        """POST until it is not a 503 (the door's: for as long as it takes); ``want`` (its
        JSON) or ``also`` (None), else an error."""
        met = refused = 0  # 503s met; those not the door's
        first = time.perf_counter()
        while refused < RETRIES:
            if self.http is None:
                self.http = await RawHttp.open(self.port)
            try:
                status, head, answer = await self.http.request(path, body, auth)
            finally:
                if not self.keep_alive:  # the next request goes to whichever process accepts
                    self.http.close()
                    self.http = None
            if status in (want, also):
                if met:
                    waited = time.perf_counter() - first
                    self.tally.longest_503_wait = max(self.tally.longest_503_wait, waited)
                return json.loads(answer) if answer and status == want else None
            if status != 503:
                raise VisitorError(f"{what} {status} {_code(answer)}")
            self.tally.busy[what] += 1
            met += 1
            refused += _code(answer) != OVERLOADED
            await asyncio.sleep(_retry_after(head))
        raise VisitorError(f"{what} 503 x{RETRIES}")

    async def open_stream(
        self, cid: str, auth: dict[str, str], after: str = "", ticket: str = ""
    ) -> RawStream:
        """The conversation's stream (``after``: resumed past that event id), on ``ticket``
        or, after a 503, a fresh ticket: a ticket opens one stream, once."""
        for _ in range(RETRIES):
            if not ticket:
                fresh = await self.post(
                    "stream ticket", f"/api/conversations/{cid}/stream-token", {}, 200, auth
                )
                ticket = fresh["streamToken"]
            path = f"/api/conversations/{cid}/events?token={ticket}"
            try:
                return await RawStream.open(servers.HOST, self.port, path + after)
            except Refused as refused:
                if refused.status != 503:
                    raise VisitorError(f"stream {refused.status}") from None
                self.tally.busy["stream"] += 1
                ticket = ""
                await asyncio.sleep(_retry_after(refused.head))
        raise VisitorError(f"stream 503 x{RETRIES}")

    async def converse(self, kind: str) -> None:
        created = await self.post(
            "create", f"/api/agents/{AGENT}/conversations", {}, 201, {"Origin": self.origin}
        )
        cid = created["conversationId"]
        auth = {"Authorization": f"Bearer {created['sessionToken']}"}
        await self.post(
            "capabilities", f"/api/conversations/{cid}/capabilities", {"tools": TOOLS}, 200, auth
        )
        stream = await self.open_stream(cid, auth, ticket=created["streamToken"])
        try:
            texts = [SLOW, ASK] if kind == "slow" else [ADD if kind == "approval" else ASK]
            for text in texts:
                stream = await self.turn(cid, auth, stream, text)
        finally:
            stream.close()
        self.tally.finished += 1

    async def turn(self, cid: str, auth: dict[str, str], stream: RawStream, text: str) -> RawStream:
        """One message to its run's end; the stream it ends on (a cut one is replaced)."""
        sent = time.perf_counter()
        run = await self.post(
            "message", f"/api/conversations/{cid}/messages", {"text": text}, 202, auth
        )
        dispatched = 0.0
        for _ in range(RECONNECTS):
            async for event, data in stream.events():
                if event == APPROVAL:
                    call = json.loads(data)["value"]
                    await self.post(
                        "decision",
                        f"/api/calls/{call['toolCallId']}/decision",
                        {"token": call["decisionToken"], "decision": "approve"},
                        200,
                        auth,
                        also=409,  # a replayed request: decided already
                    )
                elif event == DISPATCH:
                    dispatched = time.perf_counter()
                    await self.answer(json.loads(data)["value"], auth)
                elif event == "TOOL_CALL_RESULT" and dispatched:
                    self.tally.round_trips.append(time.perf_counter() - dispatched)
                    dispatched = 0.0
                elif event == "RUN_ERROR" and json.loads(data).get("runId") == run["runId"]:
                    self.tally.failed_runs[json.loads(data).get("code", "?")] += 1
                    raise VisitorError("run failed")
                elif event == "RUN_FINISHED" and json.loads(data).get("runId") == run["runId"]:
                    self.tally.turns.append(time.perf_counter() - sent)
                    return stream
            self.tally.cuts += 1
            stream.close()
            # Past the last event seen; none seen: all of it again (a replayed decision is a
            # 409, a replayed dispatch's claim is not ``first``).
            after = f"&after={stream.last_id}" if stream.last_id else ""
            stream = await self.open_stream(cid, auth, after)
        raise VisitorError("stream cut too often")

    async def answer(self, call: dict[str, Any], auth: dict[str, str]) -> None:
        call_id, token = call["toolCallId"], call["resultToken"]
        claim = await self.post(
            "delivered", f"/api/calls/{call_id}/delivered", {"token": token}, 200, auth
        )
        if not claim["first"]:  # a replayed dispatch: the handler ran already
            return
        output = CREATED if call["toolCallName"] == "create_task" else BOARD
        await self.post(
            "result", f"/api/calls/{call_id}/result", {"token": token, "output": output}, 200, auth
        )

    def close(self) -> None:
        if self.http is not None:
            self.http.close()


async def visit(port: int, kind: str, tally: Tally, timeout: float, keep_alive: bool) -> None:
    """One visitor, start to end; whatever stops it is tallied, never raised. Without
    ``keep_alive``, each POST goes on a new connection."""
    visitor = Visitor(port, tally, keep_alive)
    try:
        async with asyncio.timeout(timeout):
            await visitor.converse(kind)
    except VisitorError as exc:
        if exc.reason != "run failed":
            tally.errors[exc.reason] += 1
    except TimeoutError:
        tally.errors[f"not finished in {timeout:g} s"] += 1
    except (OSError, asyncio.IncompleteReadError, ValueError, KeyError, RuntimeError) as exc:
        tally.errors[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
    finally:
        visitor.close()


def _retry_after(head: bytes) -> float:
    found = _RETRY_AFTER.search(head)
    return min(RETRY_CAP, float(found.group(1))) if found else 1.0


def _code(answer: bytes) -> str:
    try:
        return str(json.loads(answer).get("code", ""))
    except ValueError:
        return "(not JSON)"
