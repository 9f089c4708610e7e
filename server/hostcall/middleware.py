"""ASGI middleware for every API response: headers, and a deadline on slow request bodies;
and for every request, text no store can hold refused before any route reads it.

Token-bearing responses (conversation creation, snapshots, stream tickets) must never be
cached by a browser or a proxy, nor sniffed into another type, so every response
under ``/api/``, ``/agui/``, ``/console/api/`` and ``/healthz`` gets ``Cache-Control:
no-store`` and ``nosniff``.

``TextGuard`` is the one door for the text of a request's line and headers: a path
(whose parts become ids), a query string (the console's filters, the widget page's
options) or a header holding a NUL, or percent-encoded bytes that are not UTF-8 (a lone
surrogate among them), gets ``400 invalid_text`` (docs/protocol.md). JSON bodies are
checked where they are read (hostcall/protocol/reading.py), forms likewise
(hostcall/console/session.py).

``Stopping`` answers a request the server cancelled as it stopped (its graceful shutdown
ran out: the request was still waiting, for a database connection say) with ``503
store_unavailable`` and ``Retry-After``, in the JSON error shape, rather than leaving
uvicorn to answer a plain-text 500.
"""

from __future__ import annotations

import asyncio
import time
from itertools import chain
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hostcall import metrics, strictjson
from hostcall.errors import BadRequest, RequestTimeout, Unavailable
from hostcall.protocol.reading import NOT_UTF8, unstorable_text
from hostcall.responses import error_response

API_HEADERS = ((b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"))


class ApiHeaders:
    def __init__(self, app: ASGIApp, *, body_timeout: float) -> None:
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path.startswith(("/api/", "/agui/", "/console/api/")) or path == "/healthz"):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in API_HEADERS if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        body_done = False

        async def receive_in_time() -> Message:
            # A client that stops sending mid-body would otherwise hold its request (and a
            # handler) open forever; uvicorn's own timeouts cover only idle connections.
            # Once the body is complete, receive() is a stream's wait for disconnect: no limit.
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                async with asyncio.timeout(self.body_timeout):
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(
                    f"the request body did not arrive within {self.body_timeout:g} s"
                ) from None
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        await self.app(scope, receive_in_time, send_with_headers)


class TextGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = _refused(scope) if scope["type"] == "http" else None
        if refused is None:
            await self.app(scope, receive, send)
            return
        await error_response(refused)(scope, receive, send)


def _refused(scope: Scope) -> BadRequest | None:
    raw_path = scope.get("raw_path")
    path = _decoded(raw_path) if raw_path is not None else scope.get("path", "")
    if path is None:
        return unstorable_text("the path", NOT_UTF8)
    reason = strictjson.unstorable_text(path)
    if reason is not None:
        return unstorable_text("the path", reason)
    query = scope.get("query_string", b"")
    if query:
        text = _decoded(query.replace(b"+", b" "))
        if text is None:
            return unstorable_text("the query string", NOT_UTF8)
        reason = strictjson.unstorable_text(text)
        if reason is not None:
            return unstorable_text("the query string", reason)
    headers = scope.get("headers", ())
    # One search of them all first: a NUL is rare, and a search per header cost more than
    # the rest of this check.
    if not headers or b"\0" not in b"".join(chain.from_iterable(headers)):
        return None
    for name, value in headers:
        # Headers are bytes read as Latin-1: only a NUL can be wrong (HTTP servers refuse
        # most, a proxy or a test client may not).
        if b"\0" in value or b"\0" in name:
            field = name.decode("latin-1") if b"\0" not in name else ""
            return unstorable_text("a header", strictjson.NUL, field)
    return None


def _decoded(raw: bytes) -> str | None:
    """Percent-decoded strict UTF-8 (a lone surrogate is not UTF-8), or None."""
    if raw.isascii() and b"%" not in raw:
        # Nothing to decode (the common path and query): ``unquote_to_bytes`` is pure
        # Python, ~10 us a request on the answer's path and on every stream's connect.
        return raw.decode("ascii")
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return None


class RequestMetrics:
    """Each HTTP request's duration in ``hostcall_http_request_seconds``, by its route's
    template (``/api/conversations/{conversation_id}``, never the id itself). Event streams
    are counted as open streams instead: their length is the visitor's stay."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "").endswith("/events"):
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # Each label from a closed set: the method and the path are the client's to
            # make up, and each new value would be a series kept until restart.
            metrics.child(
                metrics.HTTP_SECONDS,
                metrics.method_label(scope.get("method", "")),
                metrics.route_label(scope.get("route")),
                metrics.status_label(status),
            ).observe(time.perf_counter() - started)


# What a request cancelled at shutdown is told: send it again, to a process still serving.
STOPPING_RETRY_AFTER = 1


class Stopping:
    """A request cancelled before its response began is answered 503 (see the module's
    docstring). Outermost, so that nothing between it and uvicorn sees the cancellation."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            if started:
                raise
            # Do not "fix" this into re-raising: the only one to cancel a request is the
            # server, stopping, and the task ends here either way; re-raised, uvicorn
            # would answer the client a plain-text 500 instead of this.
            refused = Unavailable(
                "the server is stopping; send the request again",
                retry_after=STOPPING_RETRY_AFTER,
                reason="stopping",
            )
            await error_response(refused)(scope, receive, send)
