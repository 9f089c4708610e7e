"""The application factory: wiring only."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hostcall import metrics
from hostcall.agui import agui_routes
from hostcall.api import api_routes
from hostcall.apps.bridge import bridge_routes
from hostcall.apps.origin import AppsHost
from hostcall.apps.routes import apps_routes
from hostcall.attachment_api import attachment_routes
from hostcall.call_answers import call_answer_routes
from hostcall.console import console_routes
from hostcall.exposition import metrics_routes
from hostcall.history import history_routes
from hostcall.middleware import Edge
from hostcall.openapi import document as openapi_document
from hostcall.pages import page_routes
from hostcall.protocol.responses import Health
from hostcall.responses import WireResponse, exception_handlers
from hostcall.runtime import Runtime
from hostcall.settings import Settings
from hostcall.stream import stream_routes
from hostcall.visitors.known import known_visitor_routes
from hostcall.visitors.sessions import session_routes


async def _health(request: Request) -> Response:
    """Ready means able to write: a read-only or full database fails every answer."""
    runtime: Runtime = request.app.state.hostcall
    await runtime.check_store()
    return WireResponse(Health(ok=True, agents=tuple(sorted(runtime.agents))))


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


def create_app(settings: Settings, *, clock: Callable[[], float] = time.time) -> Starlette:
    runtime = Runtime.build(settings, clock=clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The first event stream would import anyio's asyncio backend (sse-starlette's
        # locks and task groups), ~40 ms that every request waits behind: import it now.
        anyio.get_cancelled_exc_class()
        metrics.forget_dead_workers()
        try:
            async with runtime.running():
                yield
        finally:
            metrics.worker_stopped()

    app = Starlette(
        # The router tries each route's pattern in turn: the event stream (every connect)
        # and the calls' answers (the round trip) come first, not after twenty others.
        # No two templates here match the same path, so the order decides nothing else.
        routes=[
            *stream_routes(),
            *call_answer_routes(),
            Route("/healthz", _health),
            Route("/openapi.json", _openapi),
            *api_routes(),
            *attachment_routes(),
            *bridge_routes(),
            *apps_routes(),
            *history_routes(),
            *session_routes(),
            *known_visitor_routes(),
            *agui_routes(),
            *page_routes(),
            *console_routes(),
            *metrics_routes(),
        ],
        exception_handlers=exception_handlers(),
        middleware=[
            # The 503 at shutdown, the requests' metrics, the API headers and body deadline,
            # the text guard (hostcall/middleware.py).
            Middleware(Edge, body_timeout=settings.body_timeout_seconds),
            # Innermost: what it refuses has passed the text guard, and gets the API headers.
            Middleware(AppsHost, apps=runtime.apps),
        ],
        lifespan=lifespan,
    )
    app.state.hostcall = runtime
    return app
