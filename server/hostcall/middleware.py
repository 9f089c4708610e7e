"""The one ASGI layer every HTTP request passes before the app's routes (``Edge``): what
it does, in order, outermost first.

``Stopping``: a request the server cancelled as it stopped (its graceful shutdown ran out:
the request was still waiting, for a database connection say) is answered ``503
store_unavailable`` with ``Retry-After``, in the JSON error shape, rather than leaving
uvicorn to answer a plain-text 500.

``RequestMetrics``: each request's duration in ``hostcall_http_request_seconds``, by its
route's template (``/api/conversations/{conversation_id}``, never the id itself). Event
streams are counted as open streams instead.

``ApiHeaders``: token-bearing responses (conversation creation, snapshots, stream tickets)
must never be cached by a browser or a proxy, nor sniffed into another type, so every
response under ``/api/``, ``/agui/``, ``/console/api/`` and ``/healthz`` gets
``Cache-Control: no-store`` and ``nosniff``; and their request bodies have a deadline
(``408``).

``TextGuard``: the one door for the text of a request's line and headers: a path (whose
parts become ids), a query string (the console's filters, the widget page's options) or a
header holding a NUL, or percent-encoded bytes that are not UTF-8 (a lone surrogate among
them), gets ``400 invalid_text`` (docs/protocol.md). JSON bodies are checked where they
are read (hostcall/protocol/reading.py), forms likewise (hostcall/console/session.py).

They were four layers; as one, a request pays one frame and one wrapper of ``send``
instead of four of each, on its way in and on every step of its handler.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Awaitable
from itertools import chain
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hostcall import metrics, strictjson
from hostcall.errors import BadRequest, RequestTimeout, Unavailable
from hostcall.protocol.reading import NOT_UTF8, unstorable_text
from hostcall.responses import error_response
from hostcall.stepped import resumed

API_HEADERS = ((b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"))
API_PREFIXES = ("/api/", "/agui/", "/console/api/")
# What a request cancelled at shutdown is told: send it again, to a process still serving.
STOPPING_RETRY_AFTER = 1


class Edge:
    """Every HTTP request's way in, as one layer: ``Stopping``'s 503 for a request cancelled
    before its response began, ``RequestMetrics``' duration, ``ApiHeaders``' headers and body
    deadline, ``TextGuard``'s refusal, in that order (outermost first), each as its own
    layer did it. One frame and one wrapper of ``send`` a request instead of four of each:
    the answer's POST passes them all on its way to the round trip's result. Outermost of
    the app's middleware, so that nothing between it and uvicorn sees a cancellation."""

    def __init__(self, app: ASGIApp, *, body_timeout: float) -> None:
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        api = path.startswith(API_PREFIXES) or path == "/healthz"
        # Event streams are counted as open streams instead: their length is the visitor's stay.
        timed = not path.endswith("/events")
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if api:
                    message = _with_api_headers(message)
            await send(message)

        try:
            refused = _refused(scope)
            if refused is not None:
                await error_response(refused)(scope, receive, sending)
            elif api:
                await self.app(scope, self._in_time(receive), sending)
            else:
                await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            if status:
                raise
            if timed:
                # Counted as the request's own layer counted it, before the refusal below:
                # its response had not begun.
                _observe(scope, 500, started)
                timed = False
            # Do not "fix" this into re-raising: the only one to cancel a request is the
            # server, stopping, and the task ends here either way; re-raised, uvicorn
            # would answer the client a plain-text 500 instead of this.
            refused_late = Unavailable(
                "the server is stopping; send the request again",
                retry_after=STOPPING_RETRY_AFTER,
                reason="stopping",
            )
            await error_response(refused_late)(scope, receive, send)
        finally:
            if timed:
                _observe(scope, status or 500, started)

    def _in_time(self, receive: Receive) -> Receive:
        """``receive`` with the body's deadline: a client that stops sending mid-body would
        otherwise hold its request (and a handler) open forever; uvicorn's own timeouts
        cover only idle connections. Once the body is complete, receive() is a stream's
        wait for disconnect: no limit."""
        body_done = False
        limit = self.body_timeout

        async def receive_in_time() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            message = await _within(receive(), limit)
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        return receive_in_time


def _with_api_headers(message: Message) -> Message:
    headers = message.get("headers", [])
    names = {name.lower() for name, _ in headers}
    extra = [(k, v) for k, v in API_HEADERS if k not in names]
    return {**message, "headers": [*headers, *extra]}


def _observe(scope: Scope, status: int, started: float) -> None:
    # Each label from a closed set: the method and the path are the client's to make up,
    # and each new value would be a series kept until restart.
    metrics.child(
        metrics.HTTP_SECONDS,
        metrics.method_label(scope.get("method", "")),
        metrics.route_label(scope.get("route")),
        metrics.status_label(status),
    ).observe(time.perf_counter() - started)


async def _within(waiting: Awaitable[Message], seconds: float) -> Message:
    """``await waiting``, refused with ``RequestTimeout`` past ``seconds``; the timer is
    armed only if it has to wait. A body that came with its request (most do: uvicorn has
    read it before the app runs) is there at the first step, and a timer set and cancelled
    for it was ~11 us of every POST's way to its handler."""
    if type(waiting) is types.CoroutineType:
        try:
            pending = waiting.send(None)
        except StopIteration as done:
            message: Message = done.value
            return message
        waiting = resumed(waiting, pending)
    try:
        async with asyncio.timeout(seconds):
            return await waiting
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive within {seconds:g} s") from None


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
