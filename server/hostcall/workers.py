"""``hostcall serve --workers N``: N processes on one port, sharing a PostgreSQL store.

A supervisor (hostcall/supervisor.py: uvicorn's, with a health check that leaves a starved
worker alone) binds the port once and starts N worker processes that accept on it, and
replaces one that dies or hangs. Each worker builds its own app from the settings the
parent passes in the environment; they share conversations through PostgreSQL: events
reach every worker's streams through LISTEN/NOTIFY, and leases keep a run step in one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from hostcall.settings import Settings

AGENTS = "HOSTCALL_AGENTS_DIR"
ORIGINS = "HOSTCALL_EXTRA_ORIGINS"
DATABASE = "HOSTCALL_DATABASE_URL"
LEASE = "HOSTCALL_LEASE_SECONDS"
# How many workers share the connection budget (hostcall/store/__init__.py, ``pool_share``).
WORKERS = "HOSTCALL_WORKERS"
# --worker-timeout's default: a worker silent this long is hung, not starved (a starved one
# answers within seconds even on a machine loaded 15 times over; docs/deploy.md, "Workers").
HANG_SECONDS = 60.0


def environment_for(settings: Settings, workers: int) -> dict[str, str]:
    """What a worker needs to rebuild ``settings`` (paths and URLs, never secrets)."""
    assert settings.database_url is not None, "workers share a PostgreSQL store"
    return {
        AGENTS: str(settings.agents_dir),
        ORIGINS: ",".join(settings.extra_origins),
        DATABASE: settings.database_url,
        LEASE: str(settings.lease_seconds),
        WORKERS: str(workers),
    }


def app_from_environment() -> Starlette:
    """The app factory each worker process calls (``hostcall.workers:app_from_environment``)."""
    from hostcall import accesslog
    from hostcall.app import create_app

    accesslog.install()  # in each worker: its logging is configured afresh
    environ = dict(os.environ)
    settings = Settings(
        agents_dir=Path(environ[AGENTS]),
        database_url=environ[DATABASE],
        lease_seconds=float(environ.get(LEASE, "10")),
        extra_origins=tuple(o for o in environ.get(ORIGINS, "").split(",") if o),
        environ=environ,
    )
    return create_app(settings)


def _metrics_directory() -> str | None:
    """Where the workers keep their metrics (hostcall/metrics.py): the operator's
    ``PROMETHEUS_MULTIPROC_DIR``, emptied of an earlier run's files, or a new directory
    (returned, to be removed when the server stops)."""
    from hostcall.metrics import MULTIPROC_DIR

    given = os.environ.get(MULTIPROC_DIR)
    if given:
        for stale in Path(given).glob("*.db"):
            stale.unlink()
        return None
    made = tempfile.mkdtemp(prefix="hostcall-metrics-")
    os.environ[MULTIPROC_DIR] = made
    return made


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    workers: int,
    log_level: str,
    forwarded_allow_ips: str = "",
    hang_seconds: float = HANG_SECONDS,
) -> None:
    from hostcall.supervisor import Supervisor

    os.environ.update(environment_for(settings, workers))
    made = _metrics_directory()
    try:
        config = _config(host=host, port=port, workers=workers, log_level=log_level,
                         forwarded_allow_ips=forwarded_allow_ips)  # fmt: skip
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the workers have stopped
            Supervisor(config, [config.bind_socket()], hang_seconds=hang_seconds).run()
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def _config(*, host: str, port: int, workers: int, log_level: str, forwarded_allow_ips: str) -> Any:
    """What ``uvicorn.run`` would build for these options (each worker loads the app)."""
    import uvicorn

    from hostcall.connections import GuardedH11Protocol

    return uvicorn.Config(
        "hostcall.workers:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        lifespan="on",
        http=GuardedH11Protocol,  # a deadline on request headers
        ws="none",
        # SSE streams are long-lived: do not wait on them forever when stopping.
        timeout_graceful_shutdown=5,
        # X-Forwarded-* from these proxies only (serving.server_config says why none by default).
        proxy_headers=bool(forwarded_allow_ips),
        forwarded_allow_ips=forwarded_allow_ips,
    )
