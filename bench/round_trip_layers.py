"""What each middleware layer costs the answer's POST, in-process, beside the floor's stack.

The real app's stack (``create_app``'s middleware, Starlette's two around it, the real
router) is driven straight through ASGI with the result POST of section 1b: its headers, a
body of the same size, the answer's route. Its endpoint is swapped for the floor's echo
(``await request.json()``, a small ``JSONResponse``), so what is timed is what the request
pays around the handler. Then each layer is taken out in turn (the one below it called
directly), and the floor's bare Starlette with its one route is timed alike. The figure is
the process's CPU per request (``time.process_time``), the best of ``--repeats`` rounds of
``-n`` requests: no sockets, no other task, so it moves far less with the machine's load
than a round trip; the layers' ``await`` chain resumed on every suspension of a real
handler is not in it.

Usage: .venv/bin/python bench/round_trip_layers.py [-n 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route, Router  # noqa: E402
from starlette.types import ASGIApp, Message, Receive, Scope, Send  # noqa: E402

from hostcall.app import create_app  # noqa: E402
from hostcall.settings import Settings  # noqa: E402

RESULT = "/api/calls/{call_id}/result"
BODY = json.dumps(
    {
        "token": "x" * 180,
        "output": {
            "tasks": [
                {"id": "t1", "title": "Write release notes", "status": "todo", "assignee": "Ana"},
                {"id": "t2", "title": "Fix login bug", "status": "in-progress", "assignee": "K"},
            ]
        },
    },
    separators=(",", ":"),
).encode()


async def echo(request: Request) -> JSONResponse:
    """The floor's ``/echo/{ch}``, less its publish."""
    await request.json()
    return JSONResponse({"state": "answered"})


def scope_for(path: str, app: Any) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(BODY)).encode()),
        ],
        "state": {},
        "app": app,
    }


async def timed(app: ASGIApp, path: str, owner: Any, n: int, repeats: int) -> float:
    """Best CPU seconds per request of ``app`` over ``repeats`` rounds of ``n``."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    template = scope_for(path, owner)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(n):
            given = False

            async def receive() -> Message:
                nonlocal given
                if given:
                    return {"type": "http.disconnect"}
                given = True
                return {"type": "http.request", "body": BODY, "more_body": False}

            sent.clear()
            scope = dict(template)
            scope["headers"] = list(template["headers"])
            await app(scope, receive, send)
        best = min(best, (time.process_time() - start) / n)
        assert sent and sent[0]["status"] == 200, sent[:1]
    return best


def layers_of(stack: ASGIApp) -> list[ASGIApp]:
    """The stack's layers, outermost first, down to the router."""
    found = [stack]
    while not isinstance(found[-1], Router):
        found.append(found[-1].app)  # type: ignore[attr-defined]
    return found


def without(layers: list[ASGIApp], index: int) -> ASGIApp:
    """The stack with ``layers[index]`` left out (its outer neighbour calls its inner one)."""
    if index == 0:
        return layers[1]
    outer = layers[index - 1]
    keep = outer.app  # type: ignore[attr-defined]
    outer.app = layers[index + 1]  # type: ignore[attr-defined]

    async def restored(scope: Scope, receive: Receive, send: Send) -> None:
        await layers[0](scope, receive, send)

    restored.undo = (outer, keep)  # type: ignore[attr-defined]
    return restored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20000, help="requests a round")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the best is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostcall-layers-") as tmp:
        settings = Settings(
            db_path=Path(tmp) / "layers.db", secret_keys=("layers-" + "k" * 32,), environ={}
        )
        app = create_app(settings)
        routes = app.router.routes
        at = next(i for i, r in enumerate(routes) if getattr(r, "path", "") == RESULT)
        routes[at] = Route(RESULT, echo, methods=["POST"])
        stack = app.build_middleware_stack()
        layers = layers_of(stack)
        floor = Starlette(routes=[Route("/echo/{ch}", echo, methods=["POST"])])
        path = "/api/calls/call_0123456789abcdef/result"

        async def run() -> None:
            async def measure(label: str, make: Callable[[], Awaitable[float]]) -> float:
                value = await make()
                print(f"  {value * 1e6:7.2f} us  {label}")
                return value

            print(f"CPU per request, best of {args.repeats} rounds of {args.n}:")
            whole = await measure(
                "Hostcall's stack, the answer's route",
                lambda: timed(stack, path, app, args.n, args.repeats),
            )
            bare = await measure(
                "the floor's Starlette, /echo/{ch}",
                lambda: timed(
                    floor.build_middleware_stack(), "/echo/rt1", floor, args.n, args.repeats
                ),
            )
            print(f"  {(whole - bare) * 1e6:7.2f} us  Hostcall's more")
            print("each layer, as the stack without it costs less:")
            for index, layer in enumerate(layers[:-1]):
                reduced = without(layers, index)
                try:
                    value = await timed(reduced, path, app, args.n, args.repeats)
                finally:
                    undo = getattr(reduced, "undo", None)
                    if undo is not None:
                        undo[0].app = undo[1]
                print(f"  {(whole - value) * 1e6:7.2f} us  {type(layer).__name__}")

        asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
