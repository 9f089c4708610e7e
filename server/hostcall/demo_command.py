"""``hostcall demo``: Hostcall on 127.0.0.1, the demo's task board on localhost (two origins,
as on a real site), and the demo's public-holidays service for its server-side tool, on
``--services-port`` (8002, else a free port, to which the demo's agent files are pointed)."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from starlette.applications import Starlette

from hostcall.serving import bind, reload_on_sighup, server_config
from hostcall.settings import DEMO_AGENTS
from hostcall.store import is_database_url

Lifespan = Literal["on", "off"]


def prepare_services(args: argparse.Namespace) -> int | None:
    """Bind the demo service's port and, off 8002, point the demo's agent files at it."""
    from hostcall.demo_services import SERVICES_PORT, PortBusy, agents_for_port, services_socket

    try:
        args.services_socket = sock = services_socket(args.services_port)
    except PortBusy as exc:
        print(f"hostcall: --services-port: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    if port != SERVICES_PORT and args.agents.resolve() == DEMO_AGENTS.resolve():
        into = Path(tempfile.mkdtemp(prefix="hostcall-demo-agents-"))
        atexit.register(shutil.rmtree, into, True)
        args.agents = agents_for_port(DEMO_AGENTS, port, into)
    return None


async def demo(app: Starlette, args: argparse.Namespace) -> int:
    import uvicorn

    from hostcall.demo_host import create_demo_host_app
    from hostcall.demo_services import create_services_app

    reload_on_sighup(app)
    hostcall_url = f"http://127.0.0.1:{args.port}"
    host_url = f"http://localhost:{args.host_port}"

    def server(asgi: Starlette, host: str, port: int, level: str, lifespan: Lifespan) -> Any:
        config = uvicorn.Config(asgi, host=host, port=port, log_level=level, lifespan=lifespan)
        return uvicorn.Server(config)

    servers = [
        uvicorn.Server(
            server_config(app, host="127.0.0.1", port=args.port, log_level=args.log_level)
        ),
        server(create_demo_host_app(hostcall_url), "localhost", args.host_port, "warning", "off"),
    ]
    sock = args.services_socket
    services_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    print(
        f"\n  Hostcall demo\n  Open the task board:  {host_url}/\n"
        f"  Hostcall server:      {hostcall_url}  (the widget's origin)\n"
        f"  Operator console:     {hostcall_url}/console\n"
        f"    an account for it:  hostcall users add NAME --role admin{_db_option(args)}\n"
        f"  Demo service:         {services_url}  (public holidays, for the server-side tool)\n",
        flush=True,
    )
    services = server(create_services_app(), "127.0.0.1", 0, "warning", "off")
    # With --apps-port, Hostcall's server listens on the apps origin's port too.
    hostcall_sockets = None
    if args.apps_port is not None:
        config = servers[0].config
        hostcall_sockets = [config.bind_socket(), bind(config, args.apps_port)]
        apps = app.state.hostcall.apps
        where = apps.origin if apps is not None else f"port {args.apps_port}"
        print(f"  MCP Apps' views:      {where}  (the apps origin)\n", flush=True)
    await asyncio.gather(
        servers[0].serve(sockets=hostcall_sockets),
        *(s.serve() for s in servers[1:]),
        services.serve(sockets=[sock]),
    )
    return 0


def _db_option(args: argparse.Namespace) -> str:
    """The demo's database as ``users add`` takes it; a database URL (it may hold a
    password) is not printed, its place is."""
    target = args.db or os.environ.get("HOSTCALL_DATABASE_URL") or str(args.default_db)
    return " --db URL" if is_database_url(target) else f" --db {shlex.quote(target)}"
