"""Runtime settings, read once at start from the command line and the environment."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hostcall.assets import DEMO_AGENTS, SOURCE_ROOT, in_checkout
from hostcall.errors import StoreError
from hostcall.protocol.limits import MAX_BODY_BYTES

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

# Kept for the tests and scripts that run from a checkout.
ROOT = SOURCE_ROOT
#: Where databases go by default: the checkout's var/, or ./var when installed from a wheel
#: (never inside site-packages).
DATA_DIR = ROOT / "var" if in_checkout() else Path("var")


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """When a process cannot take more (hostcall/door.py; docs/deploy.md, "Back-pressure"):
    new conversations, messages, retries and AG-UI runs are then refused with ``503
    overloaded`` and ``Retry-After``, before anything is stored. Read from the environment:

    - ``HOSTCALL_MAX_STEPS_IN_FLIGHT``: run steps (and the resumes and server-side calls
      that are steps' work) this process has started and not finished, running or queued
      for its event loop. Past it, a new run would only wait behind them;
    - ``HOSTCALL_MAX_DB_WAITERS``: this process's statements waiting for a pooled
      PostgreSQL connection (SQLite has no pool: never counted). Past it, the database is
      the bottleneck, and new work would lengthen every wait;
    - ``HOSTCALL_MAX_STREAM_WAITERS``: event streams waiting for their turn to connect
      (hostcall/stream_gate.py); past it, another is refused the same way, and the widget
      reconnects;
    - ``HOSTCALL_BUSY_RETRY_AFTER_SECONDS``: the shortest ``Retry-After`` of a refusal.

    0 for a bound refuses everything it guards: all new work for the first two, every new
    stream for the third (a test's overload, or a process drained by hand)."""

    max_steps_in_flight: int = 500
    max_db_waiters: int = 64
    max_stream_waiters: int = 1000
    retry_after: int = 2

    @classmethod
    def from_environ(cls, environ: dict[str, str]) -> Capacity:
        values: dict[str, int] = {}
        for name, key, least in (
            ("HOSTCALL_MAX_STEPS_IN_FLIGHT", "max_steps_in_flight", 0),
            ("HOSTCALL_MAX_DB_WAITERS", "max_db_waiters", 0),
            ("HOSTCALL_MAX_STREAM_WAITERS", "max_stream_waiters", 0),
            ("HOSTCALL_BUSY_RETRY_AFTER_SECONDS", "retry_after", 1),
        ):
            raw = environ.get(name, "").strip()
            if not raw:
                continue
            try:
                value = int(raw)
            except ValueError:
                value = -1
            if value < least:
                raise StoreError(f"{name}={raw!r}: give a whole number, at least {least}",
                                 target=name)  # fmt: skip
            values[key] = value
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class Settings:
    agents_dir: Path = DEMO_AGENTS
    db_path: Path = Path("hostcall.db")
    # postgresql://… selects the PostgreSQL store (several processes); else SQLite at db_path.
    database_url: str | None = None
    # Newest key last: itsdangerous signs with the last and accepts all (key rotation).
    secret_keys: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    session_max_age: int = 30 * 24 * 3600
    # A stream ticket is single use and only needs to live from issue to EventSource open.
    stream_max_age: int = 60
    call_token_max_age: int = 24 * 3600
    ping_seconds: float = 15.0
    # A request body that stops arriving for this long is answered 408.
    body_timeout_seconds: float = 15.0
    # Where rate and cost limits are counted (a `limits` storage URI; hostcall/quotas.py).
    limits_storage: str = "memory://"
    sweep_seconds: float = 0.5
    # How long a run step or server-side call stays owned by a process that stopped renewing
    # (it died): another process resumes the work after this (docs/deploy.md).
    lease_seconds: float = 10.0
    # How long a surface whose event streams all closed keeps its calls: enough for an
    # EventSource to reconnect; a page that says it is leaving (reload, navigation,
    # closed tab) gives its calls up at once (docs/protocol.md "Surfaces").
    surface_grace_seconds: float = 5.0
    # Added to every agent's allowed origins (the demo adds its host page this way).
    extra_origins: tuple[str, ...] = ()
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    # When the process refuses new work (``Capacity``); None: as ``environ`` says.
    capacity: Capacity | None = None
    # The origin MCP Apps' views run on (hostcall/apps/origin.py), never the widget's; None:
    # as ``HOSTCALL_APPS_ORIGIN`` in ``environ`` says, and views are not shown without it.
    apps_origin: str | None = None
    # How long a view's URL opens it (a snapshot mints a new one each time it is read).
    app_view_max_age: int = 600
    # Where spans go instead of OTLP (a test's in-memory exporter); None: as the OTEL_*
    # variables in ``environ`` say (hostcall/tracing.py).
    span_exporter: SpanExporter | None = None


def load_secret_keys(
    db_path: Path, environ: dict[str, str], *, shared: bool = False
) -> tuple[str, ...]:
    """Secrets from ``HOSTCALL_SECRET_KEYS`` (comma-separated, newest last), else a dev key.

    The dev key is generated on first run and kept beside the database, so tokens survive
    a restart; it is never a constant in the code. A ``shared`` (PostgreSQL) database has
    no file beside it, and every process must verify the others' tokens: keys are required.
    """
    configured = [k.strip() for k in environ.get("HOSTCALL_SECRET_KEYS", "").split(",")]
    keys = tuple(k for k in configured if k)
    if keys:
        return keys
    if shared:
        raise StoreError(
            "HOSTCALL_SECRET_KEYS is not set: processes sharing a PostgreSQL database must "
            "sign and verify tokens with the same keys; set it (comma-separated, newest "
            "last) to the same value in every process",
            target="HOSTCALL_SECRET_KEYS",
        )
    key_file = db_path.with_name(db_path.name + ".secret")
    if not key_file.exists():
        key_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48))
    return (key_file.read_text().strip(),)
