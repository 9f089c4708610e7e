"""ASGI middleware for every API response: headers, and a deadline on slow request bodies.

Token-bearing responses (conversation creation, snapshots, stream tickets) must never be
cached by a browser or a proxy, nor sniffed into another type, so every response
under ``/api/``, ``/agui/``, ``/console/api/`` and ``/healthz`` gets ``Cache-Control:
no-store`` and ``nosniff``.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hostcall.errors import RequestTimeout

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
