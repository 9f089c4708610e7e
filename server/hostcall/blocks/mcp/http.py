"""The HTTP client a streamable HTTP MCP session is given: what it reads of one answer is
bounded by the server's ``max_message_mb``, as over stdio (blocks/mcp/stdio.py).

The SDK bounds one event of an SSE stream (``max_sse_event_size``, given the same bound) but
reads a JSON answer whole, whatever its size. Here a body that is not an event stream stops
being read past the bound: the SDK turns the error into the failure of that one request (a
``PARSE_ERROR`` quoting ``TOO_LARGE``), and the session, whose other requests have streams
of their own, goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

from hostcall.blocks.mcp.servers import McpServer

# What the failure's message holds, for the pool to know it from a body that was not JSON.
TOO_LARGE = "a message over the bound of"


class MessageTooLarge(httpx2.StreamError):
    """A body past the bound; a ``StreamError``, which the SDK reports as the request's."""


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, body: httpx2.AsyncByteStream, server: McpServer) -> None:
        self._body = body
        self._server = server

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = message_bytes(self._server)
        read = 0
        async for chunk in self._body:
            read += len(chunk)
            if read > limit:
                raise MessageTooLarge(f"{TOO_LARGE} {self._server.max_message_mb:g} MB")
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()


class _BoundedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, server: McpServer) -> None:
        self._server = server
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            # An event stream may be long-lived: the SDK bounds each of its events instead.
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Bounded(response.stream, self._server)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def message_bytes(server: McpServer) -> int:
    return int(server.max_message_mb * 1024 * 1024)


def http_client(server: McpServer) -> httpx2.AsyncClient:
    """The session's client: the server's headers, no proxy from the environment (none may
    sit between us and the server), and its answers bounded."""
    return httpx2.AsyncClient(
        headers=dict(server.headers),
        timeout=httpx2.Timeout(30.0, read=300.0),
        trust_env=False,
        transport=_BoundedTransport(server),
    )
