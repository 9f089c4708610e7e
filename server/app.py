"""The application factory: wiring only."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server.api import api_routes
from server.console import console_routes
from server.errors import HostcallError
from server.pages import page_routes
from server.runtime import Runtime
from server.settings import Settings
from server.stream import stream_routes


async def _hostcall_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HostcallError)
    return JSONResponse(exc.to_json(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    body = {"error": {"code": code, "message": str(exc.detail), "details": {}}}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _health(request: Request) -> Response:
    runtime: Runtime = request.app.state.hostcall
    return JSONResponse({"ok": True, "agents": sorted(runtime.agents)})


def create_app(settings: Settings, *, clock: Callable[[], float] = time.time) -> Starlette:
    runtime = Runtime.build(settings, clock=clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with runtime.running():
            yield

    app = Starlette(
        routes=[
            Route("/healthz", _health),
            *api_routes(),
            *stream_routes(),
            *page_routes(),
            *console_routes(),
        ],
        exception_handlers={HostcallError: _hostcall_error, HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.hostcall = runtime
    return app
