"""Hostcall under uvicorn: the server's settings (request deadlines, keep-alive, graceful
shutdown, which proxies' ``X-Forwarded-*`` to believe), and ``kill -HUP`` to re-read the
agent files."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
from typing import Any

from starlette.applications import Starlette

from hostcall.errors import AgentConfigError

log = logging.getLogger("hostcall")

# asyncio accepts, each time a listening socket is ready, as many waiting connections as its
# ``backlog`` (uvicorn's 2,048), and puts every one's set-up in the loop's queue at once: a
# crowd connecting together (200 streams after a restart) came in bursts of 20-65, each
# ~0.2 ms of accept, parse and middleware ahead of another user's next step (its p99 22 ms
# against 5.6 ms alone in the slow-readers bench; 11 ms taking 4 a pass, 5.6 ms taking one).
# One a pass, as nginx by default (``multi_accept off``): a new connection waits its turn
# behind work already under way, not the other way round, while the kernel queues up to
# LISTEN_BACKLOG of them.
ACCEPT_BATCH = 1
LISTEN_BACKLOG = 2048


def reload_on_sighup(app: Starlette) -> None:
    """``kill -HUP`` re-reads the agent files; runs already started keep their definition."""
    runtime = app.state.hostcall

    def reload() -> None:
        try:
            runtime.reload_agents()
        except AgentConfigError as exc:
            log.error("agent files not reloaded:\n  - %s", "\n  - ".join(exc.problems))
        else:
            log.info("agent files reloaded: %s", ", ".join(sorted(runtime.agents)))

    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)


def server_config(
    app: Starlette, *, host: str, port: int, log_level: str, forwarded_allow_ips: str = ""
) -> Any:
    """uvicorn's settings for Hostcall itself: a deadline on request
    headers (``GuardedH11Protocol``; bodies have theirs in ``hostcall.middleware``), idle
    keep-alive connections closed after 5 s, and a bounded graceful shutdown so open
    streams end without an error each. ``X-Forwarded-*`` is read only from the proxies in
    ``forwarded_allow_ips`` (none by default: uvicorn's own default trusts loopback, so a
    process on the same host could claim to be any client)."""
    import uvicorn

    from hostcall import accesslog
    from hostcall.connections import GuardedH11Protocol

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        http=GuardedH11Protocol,
        ws="none",
        timeout_keep_alive=5,
        timeout_graceful_shutdown=3,
        proxy_headers=bool(forwarded_allow_ips),
        forwarded_allow_ips=forwarded_allow_ips,
    )
    # After Config(): it (re)configures uvicorn's loggers, keeping filters already there.
    accesslog.install()
    return config


async def serve(
    app: Starlette,
    host: str,
    port: int,
    log_level: str,
    forwarded: str,
    *,
    apps_port: int | None = None,
) -> None:
    """Serve ``app``; with ``apps_port``, on a second port too: the apps origin
    (hostcall/apps/origin.py), where the same process serves MCP Apps' views. One server,
    two sockets: one lifespan, one shutdown."""
    import uvicorn

    reload_on_sighup(app)
    config = server_config(
        app, host=host, port=port, log_level=log_level, forwarded_allow_ips=forwarded
    )
    sockets = listening(config, apps_port)
    # What the process holds once built (modules, agents, the app) lives as long as it:
    # out of the collector's sight, a full collection walks only what requests made, not
    # ~70,000 objects (20-100 ms, a pause every request waits behind when a crowd of
    # streams connects and its allocations set one off).
    gc.freeze()
    await _said_running(uvicorn.Server)(config).serve(sockets=sockets)


def _said_running(server_class: type) -> type:
    """uvicorn's server, saying "running on" once its application has started: uvicorn says
    it where the socket is bound (``Config.bind_socket``), before the start-up, and a Ctrl-C
    taken at that word came before uvicorn's own signal handlers, as a traceback."""

    class Server(server_class):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if sockets and self.started:
                self._log_started_message(sockets[:1])

    return Server


class _Listener(socket.socket):
    """A listening socket whose kernel queue stays ``LISTEN_BACKLOG`` whatever ``listen()``
    asks: asyncio passes one number as both the queue and the connections it accepts in a
    pass, and here the second is ``ACCEPT_BATCH``."""

    @classmethod
    def taking(cls, sock: socket.socket) -> _Listener:
        listener = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        listener.listen(LISTEN_BACKLOG)
        return listener

    def listen(self, backlog: int = LISTEN_BACKLOG, /) -> None:
        super().listen(max(backlog, LISTEN_BACKLOG))


def listening(config: Any, apps_port: int | None = None) -> list[socket.socket]:
    """``config``'s socket (and the apps origin's), bound and listening, to pass to
    ``uvicorn.Server.serve``: from then on ``config.backlog`` is how many connections a pass
    of the loop accepts (``ACCEPT_BATCH``), and the kernel's queue stays ``LISTEN_BACKLOG``."""
    bound = [bind(config, config.port)]  # quietly: "running on" is said once started
    if apps_port is not None:
        bound.append(bind(config, apps_port))
    config.backlog = ACCEPT_BATCH
    return [_Listener.taking(sock) for sock in bound]


def bind(config: Any, port: int) -> socket.socket:
    """A listening socket on ``config``'s host and ``port``, as uvicorn binds its own. Made
    with ``IPPROTO_TCP`` as uvicorn's is: a socket accepted from it takes its protocol, and
    asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only on one that says TCP; left
    on, a small write waits for the client's delayed ACK (+0.5 ms on a round trip)."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, port))
    sock.listen(config.backlog)
    sock.set_inheritable(True)
    return sock
