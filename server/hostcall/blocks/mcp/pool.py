"""One MCP session per declared server, held by the process and shared by its runs.

A session is opened on first use by a task of its own (the SDK's transports are anyio task
groups, which must be left by the task that entered them) and kept until the process stops.
A call that finds the session broken — the HTTP server went away, the stdio command died —
drops it; the next use opens a new one, which for a stdio server starts the command again.
``close`` stops every session, and so every command the pool started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hostcall.blocks.mcp.binding import ListedTool
from hostcall.blocks.mcp.servers import McpServer

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

log = logging.getLogger("hostcall.mcp")
CONNECT_SECONDS = 10.0
MAX_LISTED_PAGES = 20


class McpUnavailable(Exception):
    """The server could not be reached or dropped the session; ``reason`` names no secret."""

    def __init__(self, server: McpServer, reason: str) -> None:
        super().__init__(f"{server.where} is unavailable: {reason}")
        self.reason = reason


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
        self.client: Client | None = None
        self.error: BaseException | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"mcp:{server.name}")

    async def opened(self) -> Client:
        async with asyncio.timeout(CONNECT_SECONDS):
            await self._ready.wait()
        if self.client is None:
            raise McpUnavailable(self.server, _reason(self.error, self.server))
        return self.client

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(await _transport(self.server, stack), mode="auto")
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


async def _transport(server: McpServer, stack: contextlib.AsyncExitStack) -> Any:
    if server.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        # The command's environment: the SDK's safe minimum (PATH, HOME, ...) and the
        # declared variables; never the server's own settings or secrets.
        params = StdioServerParameters(
            command=server.command[0],
            args=list(server.command[1:]),
            env=dict(server.env),
            cwd=server.cwd,
        )
        return stdio_client(params)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # trust_env=False: no proxy from the environment may sit between us and the server.
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers=dict(server.headers),
            timeout=httpx2.Timeout(30.0, read=300.0),
            trust_env=False,
        )
    )
    assert server.url is not None
    return streamable_http_client(server.url, http_client=http)


def _reason(exc: BaseException | None, server: McpServer) -> str:
    """A short reason with no secret in it: an exception's text may quote a header."""
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
        self._closed = False

    async def _client(self, server: McpServer) -> tuple[_Session, Client]:
        if self._closed:
            raise McpUnavailable(server, "the server is shutting down")
        key = server.identity()
        session = self._sessions.get(key)
        if session is not None and session.client is not None and _ended(session.client):
            # The server went away between calls (a stdio command died): nothing was sent
            # on this session since, so a new one (the command started again) is safe.
            log.warning("%s: the session ended; opening a new one", server.where)
            await self._drop(key, session)
            session = None
        if session is None or (session._ready.is_set() and session.client is None):
            session = self._sessions[key] = _Session(server)
        try:
            return session, await session.opened()
        except (McpUnavailable, TimeoutError) as exc:
            await self._drop(key, session)
            if isinstance(exc, TimeoutError):
                raise McpUnavailable(server, f"no session within {CONNECT_SECONDS:g} s") from None
            raise

    async def _drop(self, key: str, session: _Session) -> None:
        if self._sessions.get(key) is session:
            del self._sessions[key]
        await session.stop()

    async def list_tools(self, server: McpServer) -> list[ListedTool]:
        from mcp_types import Tool as McpTool

        session, client = await self._client(server)
        listed: list[McpTool] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_LISTED_PAGES):
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                listed += page.tools
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as exc:
            raise await self._failed(server, session, exc) from None
        return [_listed(t) for t in listed]

    async def call_tool(
        self, server: McpServer, name: str, arguments: Mapping[str, Any]
    ) -> CallToolResult:
        """The tool's result; ``McpUnavailable`` or ``McpRefused`` when there is none.
        The caller bounds the time (a cancelled call leaves the session usable)."""
        session, client = await self._client(server)
        try:
            return await client.call_tool(name, dict(arguments))
        except Exception as exc:
            raise await self._failed(server, session, exc) from None

    async def _failed(self, server: McpServer, session: _Session, exc: Exception) -> Exception:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        if isinstance(exc, MCPError) and exc.error.code != CONNECTION_CLOSED:
            return McpRefused(_reason(exc, server).split(": ", 1)[-1])
        if isinstance(exc, RuntimeError) and "structured content" in str(exc):
            # The SDK's check of the result against the schema the session listed.
            return McpBadResult(_reason(exc, server).split(": ", 1)[-1])
        # Anything else broke the session: the next use opens a new one.
        log.warning("%s: session dropped: %s", server.where, _reason(exc, server))
        await self._drop(server.identity(), session)
        return McpUnavailable(server, _reason(exc, server))

    async def retain(self, servers: Iterable[McpServer]) -> None:
        """Stop the sessions of servers no longer declared as they were (a reloaded platform
        file): a stdio command started with the old settings does not outlive them."""
        keep = {server.identity() for server in servers}
        gone = [(key, s) for key, s in self._sessions.items() if key not in keep]
        await asyncio.gather(*(self._drop(key, s) for key, s in gone), return_exceptions=True)

    async def close(self) -> None:
        """Stop every session (a stdio server's command with it)."""
        self._closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.stop() for s in sessions), return_exceptions=True)


def _ended(client: Client) -> bool:
    """Whether the session's connection has ended (the server closed it, or died).

    The SDK has no public flag for it; its dispatcher's is read, and if it is not there the
    answer is no: the next call then fails, drops the session, and the one after reopens it.
    """
    dispatcher = getattr(client.session, "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


def _listed(tool: Any) -> ListedTool:
    annotations = tool.annotations
    return ListedTool(
        name=tool.name,
        description=tool.description or "",
        title=tool.title or (annotations.title if annotations and annotations.title else ""),
        input_schema=tool.input_schema or {"type": "object"},
        output_schema=tool.output_schema,
        read_only=bool(annotations and annotations.read_only_hint),
        destructive=bool(annotations and annotations.destructive_hint),
    )
