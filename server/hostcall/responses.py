"""The one place a body becomes a response: a typed body (``protocol.responses``) written by
``to_wire``, and every exception as ``{"error": {code, message, details}}`` (``ErrorBody``).

An unexpected exception is logged with its traceback for the operator and answered with a
fixed message: no 500 carries a traceback's words to a visitor. A client that went away
before its body ended is neither: one line at info.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from typing import Any

import psycopg
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from hostcall import metrics, strictjson
from hostcall.errors import (
    HostcallError,
    InternalError,
    TooManyRequests,
    Unavailable,
)
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.console import ConsoleBody
from hostcall.protocol.responses import ErrorBody, ErrorDetail, ResponseBody
from hostcall.protocol.wire import to_wire

log = logging.getLogger("hostcall.errors")

#: Codes for the HTTP errors Starlette raises itself (routing, methods).
_HTTP_CODES = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}


class WireResponse(JSONResponse):
    """A typed body as JSON: the same bytes ``JSONResponse`` writes for its ``to_wire``."""

    def __init__(
        self,
        body: ResponseBody | ConsoleBody,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(body, status_code=status_code, headers=headers)

    def render(self, content: Any) -> bytes:
        return strictjson.dumps(to_wire(content)).encode("utf-8")


class StoredWireResponse(WireResponse):
    """A body of data read from the store: rendered even if an older writer stored ``NaN``
    or absurd nesting (as ``null``), so a snapshot never fails on stored data."""

    def render(self, content: Any) -> bytes:
        return strictjson.dumps_displayable(to_wire(content)).encode("utf-8")


def error_body(exc: HostcallError) -> ErrorBody:
    return ErrorBody(ErrorDetail(exc.code, exc.message, exc.details))


def error_response(exc: HostcallError, headers: dict[str, str] | None = None) -> Response:
    headers = dict(headers or {})
    if isinstance(exc, TooManyRequests) or exc.code is ErrorCode.CONVERSATION_LIMIT_REACHED:
        metrics.RATE_LIMITED.labels(exc.code.value).inc()
    if isinstance(exc, TooManyRequests | Unavailable):
        headers["Retry-After"] = str(exc.retry_after)
    return WireResponse(error_body(exc), status_code=exc.status, headers=headers)


async def _hostcall_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HostcallError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, ErrorCode.HTTP_ERROR)
    body = ErrorBody(ErrorDetail(code, str(exc.detail), {}))
    return WireResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _client_gone(request: Request, exc: Exception) -> Response:
    # The connection closed while its body was read (a tab closed, a network dropped): no
    # fault of the server's, and nobody is left to answer. Its own handler, not
    # _unexpected's: that one is a 500 and a traceback in the log, for every such client.
    log.info("%s %s: the client went away before its request body ended",
             request.method, request.url.path)  # fmt: skip
    # nginx's "client closed request": never sent (uvicorn drops what is written to a
    # closed connection), but it is what the request metrics count.
    return Response(status_code=499)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette logs the traceback after this handler answers; the visitor gets none of it.
    return error_response(InternalError("the server failed to handle this request"))


async def _store_failure(request: Request, exc: Exception) -> Response:
    # The database is down, full or out of connections: not this request's fault, and worth
    # sending again in a moment. One line for the operator (an outage fails every request:
    # a traceback each would bury the log); the driver's words stay out of the answer.
    log.warning("%s %s: the store failed: %s: %s", request.method, request.url.path,
                type(exc).__name__, str(exc).strip())  # fmt: skip
    metrics.STORE_ERRORS.labels(metrics.store_error_label(exc)).inc()
    return error_response(Unavailable("the database cannot be used right now; try again soon"))


def exception_handlers() -> dict[Any, Any]:
    return {
        HostcallError: _hostcall_error,
        HTTPException: _http_error,
        ClientDisconnect: _client_gone,
        # Every driver error of either store (the pool's PoolTimeout is a psycopg one).
        sqlite3.Error: _store_failure,
        psycopg.Error: _store_failure,
        Exception: _unexpected,
    }
