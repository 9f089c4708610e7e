"""The conversation event stream (SSE), with exact replay after ``Last-Event-ID``."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from server.api import surface_id
from server.errors import NotFound
from server.protocol.events import CustomName
from server.protocol.frames import Event, parse_event_id, to_sse
from server.runtime import Runtime
from server.tokens import Purpose

DISPATCH = CustomName.TOOL_CALL_DISPATCH.value


async def events(request: Request) -> EventSourceResponse:
    runtime: Runtime = request.app.state.hostcall
    conversation_id = request.path_params["conversation_id"]
    claims = runtime.tokens.verify(Purpose.STREAM, request.query_params.get("token"))
    if claims.conversation_id != conversation_id:
        from server.errors import Forbidden

        raise Forbidden(f"this stream token is for another conversation than {conversation_id}")
    store = runtime.store
    if store.get_conversation(conversation_id) is None:
        raise NotFound(f"no conversation {conversation_id}", code="unknown_conversation")
    # The header wins: EventSource sets it on its own reconnects, after the page's `after`.
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    seen = parse_event_id(raw, conversation_id, store.last_seq(conversation_id)) if raw else 0
    surface = surface_id(request.query_params.get("surface"), field="surface")
    ledger = runtime.engine.ledger
    # Subscribe before reading the backlog, so nothing committed in between is missed;
    # the seq check below drops what the backlog already sent.
    queue = runtime.broker.subscribe(conversation_id)
    if surface is not None:
        with store.transaction():
            store.attach_surface(conversation_id, surface, ledger.clock())

    def passes(event: Event) -> bool:
        """Record the claim of a dispatch addressed to this surface before writing it; a
        stale one (the call was settled or assigned elsewhere since) is not passed on, so
        a replay can never make a page run a call that is no longer its own."""
        if surface is None or event.name != DISPATCH:
            return True
        data = event.data["value"]
        if data.get("surfaceId") != surface:
            return True
        return ledger.claim(str(data["toolCallId"]), surface, int(data.get("assignment", 0)))

    async def frames() -> AsyncIterator[ServerSentEvent]:
        last = seen
        try:
            while True:
                backlog = store.events_after(conversation_id, last)
                for event in backlog:
                    if passes(event):
                        yield to_sse(event)
                    last = event.seq
                if len(backlog) < 1000:
                    break
            while True:
                live = await queue.get()
                if live is None:  # dropped for falling behind: the client will replay
                    return
                if live.seq <= last:
                    continue
                if live.seq > last + 1:
                    for missed in store.events_after(conversation_id, last):
                        if passes(missed):
                            yield to_sse(missed)
                        last = missed.seq
                    continue
                if passes(live):
                    yield to_sse(live)
                last = live.seq
        finally:
            runtime.broker.unsubscribe(conversation_id, queue)
            if surface is not None:
                with store.transaction():
                    store.detach_surface(conversation_id, surface, ledger.clock())

    return EventSourceResponse(
        frames(),
        ping=int(runtime.settings.ping_seconds),
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def stream_routes() -> list[BaseRoute]:
    return [Route("/api/conversations/{conversation_id}/events", events, methods=["GET"])]
