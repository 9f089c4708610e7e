"""A TCP proxy on 127.0.0.1 in front of PostgreSQL, that a test can cut and restore: the
database going away (every connection dropped, new ones refused) and coming back, without
stopping the cluster other tests share."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg


class CuttableProxy:
    """Forwards 127.0.0.1:``port`` to PostgreSQL (its unix socket, or its TCP address)."""

    def __init__(self, target: tuple[str, int] | str) -> None:
        self.target = target
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._call(self._listen())

    def _call(self, coroutine: object) -> object:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._pipe, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if isinstance(self.target, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self.target)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._pipes |= {writer, up_writer}

        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        self._pipes -= {writer, up_writer}

    async def _cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._pipes):
            transport = writer.transport
            transport.abort()  # as a database that died: no goodbye
        self._pipes.clear()
        await self._server.wait_closed()
        self._server = None

    def cut(self) -> None:
        """Drop every connection and refuse new ones (the port stops listening)."""
        self._call(self._cut())

    def restore(self) -> None:
        """Listen again, on the same port."""
        self._call(self._listen())

    def close(self) -> None:
        if self._server is not None:
            self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@contextmanager
def proxied(url: str) -> Iterator[tuple[CuttableProxy, str]]:
    """A proxy in front of the database of ``url`` (a test URL: tests/support/databases.py),
    and the same URL through it."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    host = str(info.get("host") or "/var/run/postgresql")
    port = int(info.get("port") or 5432)
    target: tuple[str, int] | str = (
        f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)
    )
    proxy = CuttableProxy(target)
    query = {k: v for k, v in info.items() if k not in ("host", "port", "user", "dbname")}
    through = (
        f"postgresql://{quote(str(info.get('user') or ''))}@127.0.0.1:{proxy.port}/"
        f"{quote(str(info.get('dbname') or ''))}"
    )
    if query:
        through += "?" + "&".join(f"{k}={quote(str(v))}" for k, v in query.items())
    try:
        yield proxy, through
    finally:
        proxy.close()
