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
    sockets = None
    if apps_port is not None:
        sockets = [config.bind_socket(), bind(config, apps_port)]
    # What the process holds once built (modules, agents, the app) lives as long as it:
    # out of the collector's sight, a full collection walks only what requests made, not
    # ~70,000 objects (20-100 ms, a pause every request waits behind when a crowd of
    # streams connects and its allocations set one off).
    gc.freeze()
    await uvicorn.Server(config).serve(sockets=sockets)


def bind(config: Any, port: int) -> socket.socket:
    """A listening socket on ``config``'s host and another port, as uvicorn binds its own."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, port))
    sock.listen(config.backlog)
    sock.set_inheritable(True)
    return sock
