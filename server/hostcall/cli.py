"""``hostcall`` / ``python -m hostcall``: serve agents, run the demo, check agent files, list
the installed blocks."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from hostcall import demo_command, serving
from hostcall.agents import load_agents
from hostcall.errors import AgentConfigError, StoreError
from hostcall.origins import BadOrigin, normalize_origin
from hostcall.settings import DATA_DIR, DEMO_AGENTS, Settings
from hostcall.store import is_database_url
from hostcall.workers import HANG_SECONDS

DEFAULT_DB = DATA_DIR / "hostcall.db"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hostcall",
        description="Hostcall: an embeddable chat agent whose tools run in the host page.",
        epilog="Secrets: set HOSTCALL_SECRET_KEYS (comma-separated, newest last) in production; "
        "otherwise a development key is generated and kept beside the SQLite database. "
        "Several processes: --db postgresql://... (or HOSTCALL_DATABASE_URL); docs/deploy.md.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="serve the agents in a directory")
    _common(serve)
    serve.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default: %(default)s)"
    )
    serve.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    serve.add_argument(
        "--forwarded-allow-ips",
        type=trusted_proxies,
        default="",
        metavar="IPS",
        help="comma-separated addresses or networks of the reverse proxies whose "
        "X-Forwarded-For and X-Forwarded-Proto are believed, or '*' for any "
        "(default: none: every client is the address it connects from)",
    )
    serve.add_argument(
        "--apps-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also listen on PORT, where MCP Apps' views run: on loopback "
        "http://{server}.localhost:PORT (an origin per MCP server), else http://HOST:PORT, "
        "unless HOSTCALL_APPS_ORIGIN names the origin(s) a proxy serves it at "
        "(docs/deploy.md, 'The apps origin'; default: none, views are not shown)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="run N processes on the port; needs a PostgreSQL --db (default: %(default)s)",
    )
    serve.add_argument(
        "--worker-timeout",
        type=float,
        default=HANG_SECONDS,
        metavar="SECONDS",
        help="with --workers: replace a worker that has not answered its health check for "
        "this long (a slower one is starved, not dead: left running), or 0 for never "
        "(default: %(default)g; docs/deploy.md, 'Workers')",
    )

    demo = sub.add_parser(
        "demo",
        help="serve the project-planner demo: Hostcall, and a task-board page on another origin",
    )
    _common(demo, agents=DEMO_AGENTS, db=DATA_DIR / "demo.db")
    demo.add_argument(
        "--port", type=int, default=8000, help="Hostcall's port on 127.0.0.1 (default: %(default)s)"
    )
    demo.add_argument(
        "--apps-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also serve MCP Apps' views on http://{server}.localhost:PORT, an origin per "
        "MCP server (default: none, views not shown)",
    )
    demo.add_argument(
        "--host-port",
        type=int,
        default=8001,
        help="the demo host page's port on localhost (default: %(default)s)",
    )
    demo.add_argument(
        "--services-port",
        type=int,
        default=None,
        metavar="PORT",
        help="the demo's public-holidays service's port on 127.0.0.1; 0: a free one "
        "(default: 8002, or a free one if 8002 is busy). The demo's agent files are pointed "
        "at it; agent files of your own (--agents) must name it themselves",
    )

    check = sub.add_parser("check", help="load and check agent files, then exit")
    check.add_argument(
        "--agents",
        type=Path,
        default=DEMO_AGENTS,
        metavar="DIR",
        help="directory of agent files, *.json (default: the demo agents)",
    )
    sub.add_parser("blocks", help="list the installed blocks (nodes) agent files may name")
    users = sub.add_parser("users", help="console accounts (the operator console at /console)")
    users_sub = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    add = users_sub.add_parser(
        "add", help="create an account; the password is prompted for, or read from stdin"
    )
    listing = users_sub.add_parser("list", help="list the accounts and their roles")
    remove = users_sub.add_parser("remove", help="remove an account and end its sessions")
    passwd = users_sub.add_parser(
        "passwd", help="set an account's password (prompted for, or stdin); ends its sessions"
    )
    role = users_sub.add_parser("role", help="change an account's role; ends its sessions")
    for action in (add, remove, passwd, role):
        action.add_argument("name", help="the account's name")
    for action in (add, role):
        action.add_argument("--role", required=True, choices=["operator", "designer", "admin"])
    add.add_argument(
        "--url", default="http://127.0.0.1:8000", type=_http_url,
        help="the server's address, for the sign-in link it prints (default: %(default)s, "
        "where `hostcall serve` and the demo listen)",
    )  # fmt: skip
    for action in (add, listing, remove, passwd, role):
        action.add_argument(
            "--db", default=str(DEFAULT_DB), metavar="FILE|URL",
            help="the server's SQLite database or postgresql:// URL (default: %(default)s)",
        )  # fmt: skip
    from hostcall.visitors.person_command import add_parser

    add_parser(sub, DEFAULT_DB)
    from hostcall.conformance.runner import add_parser as add_conformance

    add_conformance(sub)
    return parser


def _http_url(value: str) -> str:
    """An http(s) URL with a host, without its trailing slash (argparse's ``type``)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"must be an http(s) URL, not {value!r}")
    return value.rstrip("/")


def _common(
    parser: argparse.ArgumentParser, *, agents: Path = DEMO_AGENTS, db: Path = DEFAULT_DB
) -> None:
    parser.add_argument(
        "--agents",
        type=Path,
        default=agents,
        metavar="DIR",
        help="directory of agent files, *.json (default: %(default)s)",
    )
    parser.add_argument(
        "--db",
        default=None,
        metavar="FILE|URL",
        help="SQLite database file, created if missing, or a postgresql:// URL to share "
        f"conversations between processes (default: $HOSTCALL_DATABASE_URL, else {db})",
    )
    parser.set_defaults(default_db=db)
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="how long a dead process keeps its run steps before another process resumes "
        "them (default: %(default)s)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also allow embedding from ORIGIN (exact, e.g. https://shop.example); repeatable",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(
        "--otlp-endpoint",
        default=None,
        metavar="URL",
        help="send traces over OTLP/HTTP to URL (its /v1/traces), as "
        "OTEL_EXPORTER_OTLP_ENDPOINT does (default: that variable, else no traces)",
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        return _check(args.agents)
    if args.command == "blocks":
        return _blocks()
    if args.command == "users":
        from hostcall.console.users_command import users_command

        return users_command(args)
    if args.command == "conformance":
        from hostcall.conformance.runner import conformance_command

        return conformance_command(args, sys.stdout)
    if args.command == "person":
        from hostcall.visitors.person_command import person_command

        return person_command(args)
    extra = []
    for origin in args.allow_origin:
        try:
            extra.append(normalize_origin(origin))
        except BadOrigin as exc:
            print(f"hostcall: --allow-origin {exc}", file=sys.stderr)
            return 2
    if args.command == "demo":
        extra.append(f"http://localhost:{args.host_port}")
        if (failed := demo_command.prepare_services(args)) is not None:
            return failed
    if args.otlp_endpoint:
        parts = urlsplit(args.otlp_endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            print(f"hostcall: --otlp-endpoint must be an http(s) URL, not {args.otlp_endpoint!r}",
                  file=sys.stderr)  # fmt: skip
            return 2
        # The standard variable, so --workers' processes inherit it too.
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.otlp_endpoint
    target = args.db or os.environ.get("HOSTCALL_DATABASE_URL") or str(args.default_db)
    url = target if is_database_url(target) else None
    workers = getattr(args, "workers", 1)
    if workers < 1:
        print(f"hostcall: --workers must be 1 or more, not {workers}", file=sys.stderr)
        return 2
    if getattr(args, "worker_timeout", 0) < 0:
        print(f"hostcall: --worker-timeout must be 0 (never) or more, not {args.worker_timeout:g}",
              file=sys.stderr)  # fmt: skip
        return 2
    if workers > 1 and url is None:
        print(
            f"hostcall: --workers {workers} needs PostgreSQL: a SQLite file serves one process "
            "(its runs and streams are not shared). Use --db postgresql://... "
            "(see docs/deploy.md), or one worker.",
            file=sys.stderr,
        )
        return 2
    apps_port = getattr(args, "apps_port", None)
    apps_origin = os.environ.get("HOSTCALL_APPS_ORIGIN", "").strip() or None
    if apps_port is not None:
        if workers > 1:
            print("hostcall: --apps-port serves one process; behind a proxy, set "
                  "HOSTCALL_APPS_ORIGIN instead (docs/deploy.md)", file=sys.stderr)  # fmt: skip
            return 2
        host = getattr(args, "host", "127.0.0.1")
        if apps_origin is None and host in ("0.0.0.0", "::", ""):
            print(f"hostcall: --apps-port with --host {host}: set HOSTCALL_APPS_ORIGIN "
                  "to the origin browsers reach that port at", file=sys.stderr)  # fmt: skip
            return 2
        apps_origin = apps_origin or _local_apps_origin(host, apps_port)
    settings = Settings(
        agents_dir=args.agents,
        db_path=Path(target) if url is None else DEFAULT_DB,
        database_url=url,
        lease_seconds=args.lease_seconds,
        extra_origins=tuple(extra),
        apps_origin=apps_origin,
        # --workers share HOSTCALL_DB_CONNECTIONS (hostcall/store/__init__.py, pool_share).
        environ={**os.environ, **({"HOSTCALL_WORKERS": str(workers)} if workers > 1 else {})},
    )
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        from hostcall.app import create_app

        # With workers, this checks agents and database (and migrates) before forking.
        app = create_app(settings)
    except AgentConfigError as exc:
        print(f"hostcall: the agent files in {args.agents} have problems:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    except StoreError as exc:
        print(f"hostcall: {exc.message}", file=sys.stderr)
        return 1
    if workers > 1:
        from hostcall import workers as pool

        asyncio.run(app.state.hostcall.store.close())
        pool.serve(
            settings,
            host=args.host,
            port=args.port,
            workers=workers,
            log_level=args.log_level,
            forwarded_allow_ips=args.forwarded_allow_ips,
            hang_seconds=args.worker_timeout,
        )
        return 0
    try:
        if args.command == "demo":
            return asyncio.run(demo_command.demo(app, args))
        asyncio.run(
            serving.serve(
                app,
                args.host,
                args.port,
                args.log_level,
                args.forwarded_allow_ips,
                apps_port=apps_port,
            )
        )
    except KeyboardInterrupt:  # Ctrl-C: the servers have shut down; no traceback
        print("hostcall: stopped", file=sys.stderr)
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _local_apps_origin(host: str, apps_port: int) -> str:
    """``--apps-port``'s apps origin: on loopback, one per MCP server (browsers take any
    ``*.localhost`` for loopback, no DNS needed); else that address's, shared by all."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return f"http://{{server}}.localhost:{apps_port}"
    return f"http://{_url_host(host)}:{apps_port}"


def _check(agents: Path) -> int:
    try:
        found = load_agents(agents, os.environ)
    except AgentConfigError as exc:
        for problem in exc.problems:
            print(f"{problem}", file=sys.stderr)
        return 1
    for agent in found.values():
        parts = [
            f"MCP server {b.server}: {', '.join(b.tools) if b.tools else 'all its tools'}"
            for b in agent.mcp
        ]
        if agent.tools or not parts:
            parts.insert(0, f"{len(agent.tools)} tools: {', '.join(t.name for t in agent.tools)}")
        print(f"ok: {agent.id} ({'; '.join(parts)})")
    from hostcall.apps.check import check_views
    from hostcall.apps.origin import apps_origin
    from hostcall.platform import load_platform

    try:
        apps = apps_origin(None, dict(os.environ))
    except StoreError as exc:
        print(exc.message, file=sys.stderr)
        return 1
    views = asyncio.run(check_views(found, load_platform(agents, os.environ), apps))
    for warning in views.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for problem in views.problems:
        print(problem, file=sys.stderr)
    return 1 if views.problems else 0


def _blocks() -> int:
    """One line per installed block: name, package and version, what it does (or why it
    cannot be used: then the exit status is 1)."""
    from hostcall.blocks.installed import GROUP, BrokenBlock, installed_blocks

    found = installed_blocks()
    if not found:
        print(f"no blocks installed (a package declares them in the {GROUP!r} entry points)")
    for name, block in found.items():
        what = f"broken: {block.problem}" if isinstance(block, BrokenBlock) else block.description
        print(f"{name}\t{block.package} {block.version}\t{what}")
    return 1 if any(isinstance(b, BrokenBlock) for b in found.values()) else 0


def trusted_proxies(value: str) -> str:
    """``--forwarded-allow-ips``, checked: uvicorn takes a mistyped address for a name that
    never matches, and would silently believe no proxy."""
    items = [item.strip() for item in value.split(",")] if value.strip() else []
    for item in items:
        if item == "*":
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not an IP address or network (e.g. 10.0.0.2 or 10.0.0.0/24)"
            ) from None
    return ",".join(items)
