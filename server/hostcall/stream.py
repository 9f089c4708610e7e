"""The conversation event stream (SSE), with exact replay after ``Last-Event-ID``.

A stream must not cost other users anything while its reader is slow, nor while a crowd
connects: its set-up and each page of its replay take a turn on the event loop
(hostcall/stream_gate.py). The backlog is replayed in small pages with the event loop
released between them, each full page read and framed once for every stream that replays
it (hostcall/backlog.py); each stream holds at most one page plus the broker's bounded
queue; a client that does not take a frame within ``SEND_TIMEOUT`` seconds is dropped (it
reconnects with ``Last-Event-ID`` and misses nothing). On shutdown every stream ends its
response cleanly, so a SIGTERM does not log an error per open stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall import metrics
from hostcall.protocol.events import CustomName
from hostcall.protocol.frames import Event, parse_event_id, sse_frame
from hostcall.protocol.requests import surface_id
from hostcall.runtime import Runtime, runtime_of
from hostcall.sse_response import EventStreamResponse

SEND_TIMEOUT = 10.0
DISPATCH = CustomName.TOOL_CALL_DISPATCH.value
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
PING = b": ping\r\n\r\n"  # an SSE comment: keeps proxies from closing an idle stream


def farewell(queue: asyncio.Queue[Event | None]) -> Callable[[], None]:
    """Wakes a stream's generator (a ``None`` in its queue), which then returns: on the
    client's disconnect and the server's shutdown, the response ends properly instead of
    being cancelled mid-body."""

    def wake() -> None:
        while True:
            try:
                queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                queue.get_nowait()

    return wake


async def events(request: Request) -> EventStreamResponse | Response:
    if request.method == "HEAD":
        # Headers only, and no set-up: the end of a stream's body gives back what its set-up
        # took (its subscription, its surface), and a HEAD's body never runs.
        return Response(headers=HEADERS, media_type="text/event-stream")
    runtime = runtime_of(request)
    # Everything a connect does waits for its turn (hostcall/stream_gate.py): a crowd of
    # streams connecting at once must not fill the loop ahead of other users' requests.
    async with runtime.stream_gate.connect():
        return await _connected(request, runtime)


async def _connected(request: Request, runtime: Runtime) -> EventStreamResponse:
    conversation_id = request.path_params["conversation_id"]
    ticket = runtime.check_stream_ticket(request.query_params.get("token"), conversation_id)
    logs = runtime.services.logs
    surface = surface_id(request.query_params.get("surface"), field="surface")
    # The header wins: EventSource sets it on its own reconnects, after the page's `after`.
    header = request.headers.get("last-event-id")
    raw, source = (
        (header, "Last-Event-ID") if header else (request.query_params.get("after"), "after")
    )
    seen = 0
    assert ticket.nonce is not None
    last = 0  # the seq of the last event written, or passed over
    waiting = False  # the body waits for its next event: no replay, its last write finished

    def direct(published: Sequence[Event]) -> bool:
        """Write ``published`` (a unit of work's events) from the publisher's task if the
        stream waits for them (they follow its last seq, nothing queued before them) and
        none needs an await to pass: a pass of the event loop and the body's wake-up less
        on the round trip. Anything else is queued, as is everything published after it
        until the body has caught up."""
        nonlocal last, waiting
        if (
            waiting
            and published[0].seq == last + 1
            and published[-1].seq == last + len(published)
            and (surface is None or not any(live.name == DISPATCH for live in published))
            and response.write_now(b"".join([sse_frame(live) for live in published]))
        ):
            last = published[-1].seq
            return True
        waiting = False
        return False

    # Subscribe before reading the conversation's last seq, so nothing committed after
    # that read is missed: it is published after its commit, to this queue. What the read
    # saw committed is the backlog, read only if there is one (a new conversation's first
    # stream has none: no read); the seq check below drops what it already sent.
    queue = runtime.broker.subscribe(conversation_id, direct)
    try:
        if raw:
            conversation = await runtime.services.conversations.get(conversation_id)
            runtime.sessions.check_generation(conversation, ticket)
            last_seq = await logs.end(conversation_id)
            seen = parse_event_id(raw, conversation_id, last_seq, source=source)
            # Last: a refused request leaves the ticket usable.
            await runtime.redeem_stream_ticket(ticket.nonce)
        else:
            # A first connection has no seq to check: the conversation's read and the
            # ticket's redemption are one statement on PostgreSQL, the ticket
            # used only if the conversation is there at its session generation.
            last_seq = await runtime.open_stream(conversation_id, ticket)
    except BaseException:
        runtime.broker.unsubscribe(conversation_id, queue)
        raise
    backlog = last_seq > seen
    surfaces = runtime.services.surfaces
    pages = runtime.backlog
    gate = runtime.stream_gate
    owner = runtime.leases.owner  # the stream counts for its surface while this process lives
    if surface is not None:
        await surfaces.attach(conversation_id, surface, owner)

    async def passes(event: Event) -> bool:
        """Record the claim of a dispatch addressed to this surface before writing it; a
        stale one (the call was settled or assigned elsewhere since) is not passed on, so
        a replay can never make a page run a call that is no longer its own."""
        if surface is None or event.name != DISPATCH:
            return True
        data = event.data["value"]
        if data.get("surfaceId") != surface:
            return True
        call_id, assignment = str(data["toolCallId"]), int(data.get("assignment", 0))
        return await surfaces.claim(call_id, surface, assignment)

    async def replay(after: int) -> AsyncIterator[tuple[bytes, int]]:
        """Everything after ``after``: (SSE bytes of a page, its last seq), one page at a
        time. Taking a page takes a turn at the stream gate, so a crowd of replaying
        streams gets a bounded share of the loop and every other request gets the rest; a
        full page is read and framed once for every stream (hostcall/backlog.py), and goes
        out as one write, not one per event.

        One write per page also keeps a guarantee: a client that
        disconnects mid-replay costs one failed write (one asyncio warning) per page, not one
        per frame, and the response stops at the next.
        """
        while True:
            async with gate.page():
                page = await pages.after(logs.after, conversation_id, after)
                if surface is not None and page.dispatches:
                    kept = [
                        f for e, f in zip(page.events, page.frames, strict=True) if await passes(e)
                    ]
                    chunk = b"".join(kept)
                else:
                    chunk = b"".join(page.frames)
            if page.events:
                after = page.events[-1].seq
                yield chunk, after
            if page.ends_log:
                return

    ping = runtime.settings.ping_seconds or None

    async def frames() -> AsyncGenerator[bytes, None]:
        nonlocal last, waiting
        last = seen
        metrics.OPEN_STREAMS.inc()
        try:
            if backlog:
                async for chunk, seq in replay(last):
                    yield chunk
                    last = seq
            while True:
                # Everything already queued goes out in one write: a unit of work publishes
                # several events at once (a call's start, arguments, end and dispatch), and
                # a write per event cost a send() each on the round trip's path. While
                # the body waits with nothing queued, ``direct`` writes what comes; once it
                # queues one event, it queues every one after it until the body takes them.
                waiting = queue.empty()
                try:
                    async with asyncio.timeout(ping):
                        batch = [await queue.get()]
                except TimeoutError:
                    waiting = False
                    yield PING
                    continue
                waiting = False
                while not queue.empty():
                    batch.append(queue.get_nowait())
                chunk = b""
                for live in batch:
                    if live is None:  # dropped for falling behind, or shutting down
                        break
                    if live.seq <= last:
                        continue
                    if live.seq > last + 1:
                        if chunk:
                            yield chunk
                            chunk = b""
                        async for page, seq in replay(last):
                            yield page
                            last = seq
                        continue
                    if await passes(live):
                        chunk += sse_frame(live)
                    last = live.seq
                if chunk:
                    yield chunk
                if any(live is None for live in batch):
                    return
        finally:
            waiting = False
            metrics.OPEN_STREAMS.dec()
            runtime.broker.unsubscribe(conversation_id, queue)
            if surface is not None:
                await surfaces.detach(conversation_id, surface, owner)

    response = EventStreamResponse(
        frames(),
        wake=farewell(queue),
        headers=HEADERS,
        send_timeout=SEND_TIMEOUT,
    )
    return response


def stream_routes() -> list[BaseRoute]:
    return [Route("/api/conversations/{conversation_id}/events", events, methods=["GET"])]
