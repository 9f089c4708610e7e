"""One MCP session per declared server, held by the process and shared by its runs.

A session is opened on first use by a task of its own (the SDK's transports are anyio task
groups, which must be left by the task that entered them) and kept until the process stops.
A call that finds the session broken — the HTTP server went away, the stdio command died or
sent a message past its bound — drops it; the next use opens a new one, which for a stdio
server starts the command again. A call that times out or is cancelled replaces its session
too: its answer may still be on its way (over stdio, down the one pipe every call shares),
so new calls go to a new session at once, and the old one stops when its last call ends.
``close`` stops every session, and so every command the pool started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from hostcall.blocks.mcp.binding import ListedTool
from hostcall.blocks.mcp.http import TOO_LARGE, http_client, message_bytes
from hostcall.blocks.mcp.servers import McpServer
from hostcall.blocks.mcp.stdio import Link, stdio_transport

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import BlobResourceContents, CallToolResult, TextResourceContents

T = TypeVar("T")
log = logging.getLogger("hostcall.mcp")
CONNECT_SECONDS = 10.0
MAX_LISTED_PAGES = 20


class McpUnavailable(Exception):
    """The server could not be reached or dropped the session; ``reason`` names no secret."""

    def __init__(self, server: McpServer, reason: str, *, broken: bool = False) -> None:
        super().__init__(f"{server.where} is unavailable: {reason}")
        self.reason = reason
        self.broken = broken  # an open session broke (not: none could be opened)


class McpTooLarge(McpUnavailable):
    """The server sent a message past its ``max_message_mb``: it was not read on, and a
    stdio session (the command with it) was dropped."""

    def __init__(self, server: McpServer) -> None:
        super().__init__(
            server, f"it sent a message over {server.max_message_mb:g} MB", broken=True
        )
        self.limit_mb = server.max_message_mb
        # A stdio command is started again; over HTTP only that answer was left unread.
        self.restarted = server.transport == "stdio"


class McpRefused(Exception):
    """The server answered the request with a protocol error (an unknown tool, bad input)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class McpBadResult(McpRefused):
    """The structured content does not match the tool's ``outputSchema``."""


class _Session:
    """A task that opens one server's session and holds it until told to stop."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.link = Link()  # a stdio session's command, and why it ended
        self.calls = 0  # requests in flight
        self.retired = False  # replaced: stops when its last request ends
        self.stopping = False
        self.client: Client | None = None
        self.error: BaseException | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"mcp:{server.name}")

    async def opened(self) -> Client:
        async with asyncio.timeout(CONNECT_SECONDS):
            await self._ready.wait()
        if self.client is None:
            raise McpUnavailable(self.server, _reason(self.error, self.server, self.link))
        return self.client

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(await _transport(self.server, stack, self.link), mode="auto")
                self.client = await stack.enter_async_context(client)
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # kept for the callers; the session is gone
            self.error = exc
        finally:
            self.client = None
            self._ready.set()

    async def stop(self) -> None:
        self._stop.set()
        try:
            async with asyncio.timeout(5):
                await asyncio.shield(self._task)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


async def _transport(server: McpServer, stack: contextlib.AsyncExitStack, link: Link) -> Any:
    if server.transport == "stdio":
        return stdio_transport(server, link)
    from mcp.client.streamable_http import streamable_http_client

    http = await stack.enter_async_context(http_client(server))
    assert server.url is not None
    return streamable_http_client(
        server.url, http_client=http, max_sse_event_size=message_bytes(server)
    )


def _reason(exc: BaseException | None, server: McpServer, link: Link | None = None) -> str:
    """A short reason with no secret in it: an exception's text may quote a header."""
    if link is not None and link.ended is not None:
        return link.ended  # what the transport saw: the command exited, or sent too much
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "the session closed"
    text = " ".join(str(exc).split())[:200]
    for secret in server.secrets():
        text = text.replace(secret, "[redacted]")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpPool:
    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._stopping: set[asyncio.Task[None]] = set()  # held: a task is weakly kept
        self._closed = False

    async def _client(self, server: McpServer) -> tuple[_Session, Client]:
        if self._closed:
            raise McpUnavailable(server, "the server is shutting down")
        key = server.identity()
        session = self._sessions.get(key)
        if session is not None and session.client is not None and _ended(session):
            # The server went away between calls (a stdio command died): nothing was sent
            # on this session since, so a new one (the command started again) is safe.
            log.warning("%s: the session ended (%s); opening a new one",
                        server.where, _reason(None, server, session.link))  # fmt: skip
            self._retire(session)
            session = None
        if session is None or (session._ready.is_set() and session.client is None):
            session = self._sessions[key] = _Session(server)
        try:
            return session, await session.opened()
        except (McpUnavailable, TimeoutError) as exc:
            self._retire(session)
            if isinstance(exc, TimeoutError):
                raise McpUnavailable(server, f"no session within {CONNECT_SECONDS:g} s") from None
            raise

    def _retire(self, session: _Session, *, restart: bool = False) -> None:
        """Take the session out of use; it stops once no request is in flight on it.
        ``restart`` opens its successor now, so that the next run does not wait for it."""
        key = session.server.identity()
        if self._sessions.get(key) is session:
            del self._sessions[key]
            if restart and not self._closed:
                self._sessions[key] = _Session(session.server)
        session.retired = True
        if session.calls == 0 and not session.stopping:
            session.stopping = True
            task = asyncio.get_running_loop().create_task(session.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def _request(self, server: McpServer, send: Callable[[Client], Awaitable[T]]) -> T:
        """What ``send`` got from the server's session, or the reason it got nothing."""
        session, client = await self._client(server)
        session.calls += 1
        try:
            return await send(client)
        except asyncio.CancelledError:
            # Given up on (a deadline, a cancelled run): its answer may still be coming, and
            # over stdio it holds the one pipe every later answer waits behind.
            log.warning("%s: a request was abandoned; its session is replaced", server.where)
            self._retire(session, restart=True)
            raise
        except Exception as exc:
            raise self._failed(server, session, exc) from None
        finally:
            session.calls -= 1
            if session.retired and session.calls == 0:
                self._retire(session)

    async def list_tools(self, server: McpServer) -> list[ListedTool]:
        try:
            return await self._request(server, _list_all)
        except McpUnavailable as exc:
            if isinstance(exc, McpTooLarge) or not exc.broken:
                raise
            # The session broke under the listing (a command killed a moment before, not yet
            # seen to be): a listing is safe to ask again, of a session opened for it.
            return await self._request(server, _list_all)

    async def call_tool(
        self, server: McpServer, name: str, arguments: Mapping[str, Any]
    ) -> CallToolResult:
        """The tool's result; ``McpUnavailable`` or ``McpRefused`` when there is none.
        The caller bounds the time; a call given up on replaces the session. A call is
        never sent again: a write must not run twice."""

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, dict(arguments))

        return await self._request(server, call)

    async def read_resource(
        self, server: McpServer, uri: str
    ) -> list[TextResourceContents | BlobResourceContents]:
        """A resource's contents (a view's HTML: hostcall/apps/resources.py), from the same
        session the server's calls use; the caller bounds the time."""

        async def read(client: Client) -> list[TextResourceContents | BlobResourceContents]:
            return list((await client.read_resource(uri, cache_mode="refresh")).contents)

        return await self._request(server, read)

    def _failed(self, server: McpServer, session: _Session, exc: Exception) -> Exception:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        if session.link.too_large:
            log.warning("%s: session dropped: %s", server.where, session.link.ended)
            self._retire(session, restart=True)
            return McpTooLarge(server)
        if isinstance(exc, MCPError) and TOO_LARGE in exc.error.message:
            return McpTooLarge(server)  # an HTTP answer: its own stream, the session goes on
        if isinstance(exc, MCPError) and exc.error.code != CONNECTION_CLOSED:
            return McpRefused(_reason(exc, server).split(": ", 1)[-1])
        if isinstance(exc, RuntimeError) and "structured content" in str(exc):
            # The SDK's check of the result against the schema the session listed.
            return McpBadResult(_reason(exc, server).split(": ", 1)[-1])
        # Anything else broke the session: the next use opens a new one.
        reason = _reason(exc, server, session.link)
        log.warning("%s: session dropped: %s", server.where, reason)
        self._retire(session)
        return McpUnavailable(server, reason, broken=True)

    async def retain(self, servers: Iterable[McpServer]) -> None:
        """Stop the sessions of servers no longer declared as they were (a reloaded platform
        file): a stdio command started with the old settings does not outlive them."""
        keep = {server.identity() for server in servers}
        gone = [s for key, s in self._sessions.items() if key not in keep]
        for session in gone:
            del self._sessions[session.server.identity()]
        await asyncio.gather(*(s.stop() for s in gone), return_exceptions=True)

    async def close(self) -> None:
        """Stop every session (a stdio server's command with it)."""
        self._closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.stop() for s in sessions), *self._stopping, return_exceptions=True)


async def _list_all(client: Client) -> list[ListedTool]:
    from mcp_types import Tool as McpTool

    listed: list[McpTool] = []
    cursor: str | None = None
    for _ in range(MAX_LISTED_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        listed += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return [_listed(t) for t in listed]


def _ended(session: _Session) -> bool:
    """Whether the session's connection has ended (the server closed it, or died).

    A stdio session knows (its transport watches the command); for an HTTP one the SDK has
    no public flag, so its dispatcher's is read, and if it is not there the answer is no:
    the next call then fails, drops the session, and the one after reopens it.
    """
    if session.link.ended is not None:
        return True
    dispatcher = getattr(getattr(session.client, "session", None), "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


def _listed(tool: Any) -> ListedTool:
    from hostcall.apps.resources import declared_ui

    annotations = tool.annotations
    ui = declared_ui(tool.meta)
    return ListedTool(
        name=tool.name,
        description=tool.description or "",
        title=tool.title or (annotations.title if annotations and annotations.title else ""),
        input_schema=tool.input_schema or {"type": "object"},
        output_schema=tool.output_schema,
        read_only=bool(annotations and annotations.read_only_hint),
        destructive=bool(annotations and annotations.destructive_hint),
        app_resource=ui.resource_uri,
        app_only=ui.app_only,
    )
