"""The floor: a bare Starlette + sse-starlette app doing the least the same wire needs.

``GET /events?ch=NAME`` is an SSE stream subscribed to a channel (one asyncio.Queue per
stream, as any endpoint that can be woken up needs); it only pings while idle.
``POST /kick/{ch}`` and ``POST /echo/{ch}`` send one event (``kick`` / ``echo``) to the
channel's streams, ``echo`` carrying the request body back (``/kick/{ch}?after=MS``: MS
milliseconds after answering); ``POST /burst/{ch}?count=N``
sends N events, the last named ``END`` (fan-out). Run as
``python bench/floor_app.py --port N [--ping 15]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import resource
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence

import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def create_floor_app(ping: int) -> Starlette:
    channels: defaultdict[str, set[asyncio.Queue[ServerSentEvent]]] = defaultdict(set)
    seq = itertools.count(1)

    def publish(channel: str, event: str, data: str) -> None:
        for queue in tuple(channels.get(channel, ())):
            queue.put_nowait(ServerSentEvent(data=data, event=event, id=f"{channel}:{next(seq)}"))

    async def events(request: Request) -> EventSourceResponse:
        channel = request.query_params.get("ch", "")
        queue: asyncio.Queue[ServerSentEvent] = asyncio.Queue()
        channels[channel].add(queue)

        async def frames() -> AsyncIterator[ServerSentEvent]:
            try:
                while True:
                    yield await queue.get()
            finally:
                channels[channel].discard(queue)
                if not channels[channel]:
                    del channels[channel]

        # Same response options as hostcall/stream.py, so the two differ only by Hostcall.
        return EventSourceResponse(
            frames(), ping=ping, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    async def kick(request: Request) -> JSONResponse:
        # ?after=MS: publish that much later, once the kicking client has read this response.
        after = float(request.query_params.get("after", "0")) / 1000
        channel = request.path_params["ch"]
        if after > 0:
            asyncio.get_running_loop().call_later(after, publish, channel, "kick", "{}")
        else:
            publish(channel, "kick", "{}")
        return JSONResponse({"ok": True})

    async def echo(request: Request) -> JSONResponse:
        body = await request.json()
        publish(request.path_params["ch"], "echo", json.dumps(body, separators=(",", ":")))
        return JSONResponse({"state": "answered"})

    async def burst(request: Request) -> JSONResponse:
        channel = request.path_params["ch"]
        count = int(request.query_params.get("count", "1"))
        for i in range(count - 1):
            publish(channel, "TICK", f'{{"i":{i}}}')
        publish(channel, "END", "{}")
        return JSONResponse({"sent": count})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/healthz", health),
            Route("/events", events),
            Route("/kick/{ch}", kick, methods=["POST"]),
            Route("/echo/{ch}", echo, methods=["POST"]),
            Route("/burst/{ch}", burst, methods=["POST"]),
        ]
    )


def main(extra_routes: Sequence[Route] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ping", type=int, default=15)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Same uvicorn settings as `python -m hostcall serve` (hostcall/cli.py), loopback only.
    app = create_floor_app(args.ping)
    app.router.routes.extend(extra_routes)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level, lifespan="off")


if __name__ == "__main__":
    main()
