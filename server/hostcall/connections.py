"""uvicorn's HTTP/1.1 protocol with a deadline on request headers.

uvicorn times out only idle keep-alive connections: a client that opens a connection and
sends half a request line, or headers without the final blank line, is held open forever
(slowloris). This protocol closes a connection whose request headers are not complete
``HEADER_TIMEOUT`` seconds after it opened or after its first byte of the next request.
Bodies get their own deadline in ``hostcall.middleware``.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0


class GuardedH11Protocol(H11Protocol):
    header_timeout = HEADER_TIMEOUT
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._awaiting_headers():
            if self._header_timer is None:
                self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _awaiting_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        # Only a connection still without a complete request: one whose request is being
        # handled, or idle between requests (uvicorn's keep-alive timer), is left alone.
        if (self.conn.their_state is h11.IDLE and self.cycle is None) or self._awaiting_headers():
            self.transport.close()
