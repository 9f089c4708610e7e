"""The one place an exception becomes a response: always ``{"error": {code, message, details}}``.

An unexpected exception is logged with its traceback for the operator and answered with a
fixed message: no 500 carries a traceback's words to a visitor (issue 7).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hostcall import strictjson
from hostcall.errors import HostcallError, InternalError, TooManyRequests
from hostcall.protocol.codes import ErrorCode

log = logging.getLogger("hostcall.errors")

#: Codes for the HTTP errors Starlette raises itself (routing, methods).
_HTTP_CODES = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}


class StoredJSONResponse(JSONResponse):
    """JSON of data read from the store: rendered even if an older writer stored ``NaN``
    or absurd nesting (as ``null``), so a snapshot never fails on stored data (issue 7)."""

    def render(self, content: Any) -> bytes:
        return strictjson.dumps_displayable(content).encode("utf-8")


def error_response(exc: HostcallError, headers: dict[str, str] | None = None) -> Response:
    headers = dict(headers or {})
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    return JSONResponse(exc.to_json(), status_code=exc.status, headers=headers)


async def _hostcall_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HostcallError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, ErrorCode.HTTP_ERROR)
    body = {"error": {"code": code, "message": str(exc.detail), "details": {}}}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette logs the traceback after this handler answers; the visitor gets none of it.
    return error_response(InternalError("the server failed to handle this request"))


def exception_handlers() -> dict[Any, Any]:
    return {HostcallError: _hostcall_error, HTTPException: _http_error, Exception: _unexpected}
