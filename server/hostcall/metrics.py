"""Prometheus metrics: every metric the server keeps is defined here, and nowhere else.

To count something new, add its metric below (a name ending in ``_total`` for a counter is
the client's, do not repeat it) and call it where the thing happens: ``FEEDBACK.labels(
agent="demo", rating="up").inc()``. Labels take a small, closed set of values (an outcome,
a route, an agent's id, a model's name), never a conversation's or a visitor's id: each
value is a time series of its own, kept until the process stops. So every label value that a
request, an agent file or a driver could choose goes through one of the functions under
"Closed label sets" below, which answer ``other`` for anything outside the set: a client
that sends a thousand made-up methods adds one series, not a thousand.

With ``hostcall serve --workers N`` every worker counts in files under
``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode, set up by
hostcall/workers.py before the workers start) and ``/metrics`` adds up all workers', so
whichever worker answers the scrape reports the whole server (``collect`` below).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Model steps last from well under a second (a local model's first words) to minutes.
_MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160)
# A tool call waits on a page's handler, a person's form or a block: milliseconds to hours.
_CALL_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800, 3600, 86400)
_HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)

RUNS = Counter(
    "hostcall_runs", "Runs started and ended, by agent and outcome.", ["agent", "outcome"]
)
TOOL_CALLS = Counter(
    "hostcall_tool_calls",
    "Tool calls settled, by final state and by who answered "
    "(page, form, operator, block, simulation, none).",
    ["outcome", "route"],
)
TOOL_CALL_SECONDS = Histogram(
    "hostcall_tool_call_seconds",
    "From a tool call's proposal to its settling, by who answered.",
    ["route"],
    buckets=_CALL_BUCKETS,
)
MODEL_SECONDS = Histogram(
    "hostcall_model_step_seconds",
    "One model step, from the request to its last chunk, by model and outcome.",
    ["model", "outcome"],
    buckets=_MODEL_BUCKETS,
)
MODEL_TOKENS = Counter(
    "hostcall_model_tokens",
    "Model tokens, by model, direction (input, output) and source (provider, estimate).",
    ["model", "direction", "source"],
)
OPEN_STREAMS = Gauge(
    "hostcall_open_streams",
    "Event streams open now.",
    # Summed over the live workers; a stopped worker's streams leave the sum.
    multiprocess_mode="livesum",
)
RATE_LIMITED = Counter(
    "hostcall_rate_limit_refusals", "Requests refused by a rate or cost limit, by code.", ["code"]
)
DOOR_REFUSALS = Counter(
    "hostcall_overloaded_refusals",
    "New work and streams refused (503 overloaded), by the bound met (door.py, stream_gate.py).",
    ["reason"],
)
STORE_ERRORS = Counter(
    "hostcall_store_errors",
    "Requests the store failed (down, full, out of connections), by driver error type.",
    ["error"],
)
# PostgreSQL's connection pool, per process (hostcall/store/postgres/connections.py).
DB_CONNECTIONS_IN_USE = Gauge(
    "hostcall_db_connections_in_use",
    "PostgreSQL connections borrowed from the pool now.",
    multiprocess_mode="livesum",
)
DB_POOL_SIZE = Gauge(
    "hostcall_db_pool_size",
    "PostgreSQL connections the pools may hold (each process's pool size, summed).",
    multiprocess_mode="livesum",
)
DB_CONNECTION_WAITERS = Gauge(
    "hostcall_db_connection_waiters",
    "Statements and transactions waiting for a PostgreSQL connection now.",
    multiprocess_mode="livesum",
)


class LiveCount:
    """A gauge of a value that changes on every statement, counted here as a plain int and
    written to the gauge when it is read: by ``collect`` in the process that answers the
    scrape, and every ``LIVE_SECONDS`` in every worker of ``--workers`` (``write_live_forever``).
    A gauge's own ``inc`` and ``dec`` are a lock each, and in multiprocess mode a write to
    its file: four a statement were most of the metrics' CPU in a PostgreSQL worker. Another
    worker's figure is at most ``LIVE_SECONDS`` old in a scrape."""

    __slots__ = ("gauge", "value")

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self.value = 0

    def write(self) -> None:
        self.gauge.set(self.value)


LIVE_SECONDS = 1.0
DB_IN_USE_NOW = LiveCount(DB_CONNECTIONS_IN_USE)
DB_WAITERS_NOW = LiveCount(DB_CONNECTION_WAITERS)
_LIVE = (DB_IN_USE_NOW, DB_WAITERS_NOW)


def write_live() -> None:
    for count in _LIVE:
        count.write()


async def write_live_forever() -> None:
    """Each worker's live counts into its files, for whichever worker answers a scrape."""
    while True:
        write_live()
        await asyncio.sleep(LIVE_SECONDS)


DB_POOL_WAITS = Counter(
    "hostcall_db_pool_waits",
    "Waits for a pooled connection that ran past the pool's wait, by what followed: "
    "busy (the database answers: waited on), outage (it does not: the statement failed).",
    ["outcome"],
)
POOL_BUSY = "busy"
POOL_OUTAGE = "outage"
HTTP_SECONDS = Histogram(
    "hostcall_http_request_seconds",
    "HTTP requests (event streams excepted), by method, route template and status class.",
    ["method", "route", "status"],
    buckets=_HTTP_BUCKETS,
)
# Visitors' thumbs on replies; counted where feedback is stored.
FEEDBACK = Counter("hostcall_feedback", "Visitors' feedback on replies.", ["agent", "rating"])
# Visitors' ratings of whole conversations, 1 to 5 (the score's five values: a closed set);
# counted once per conversation, when the first is stored.
RATINGS = Counter(
    "hostcall_conversation_ratings", "Visitors' ratings of conversations.", ["agent", "score"]
)


# ---- labelled children -------------------------------------------------------------------

M = TypeVar("M", Counter, Gauge, Histogram)
# Every label set is from a closed set (below), so this holds a few dozen children at most.
_children: dict[tuple[int, tuple[str, ...]], Counter | Gauge | Histogram] = {}


def child(metric: M, *values: str) -> M:
    """``metric.labels(*values)``, looked up in a dict after the first time: ``labels``
    checks and joins its values and takes a lock on every call, several microseconds
    each on the answer's and the step's paths. The child is the same object either way
    (prometheus-client keeps one per label set, and in multiprocess mode a child notices
    a fork itself), so counting through it counts in the metric."""
    key = (id(metric), values)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*values)
    return found  # type: ignore[return-value]


# ---- closed label sets ----------------------------------------------------------------------

OTHER = "other"
# RFC 9110's methods that a browser or an HTTP client sends; a made-up one is ``other``.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # a request no route took: never its raw path
ANSWERED_BY = frozenset({"page", "form", "operator", "block", "simulation", "none"})
# A run counted as it starts, and as it ends: a visitor's Stop is ``stopped``, not ``failed``.
RUN_OUTCOMES = frozenset({"started", "finished", "failed", "stopped"})
# The drivers whose exception types name a store error (each a fixed set of classes).
_DRIVER_MODULES = ("sqlite3", "psycopg", "psycopg_pool")


@dataclass(frozen=True, slots=True)
class Loaded:
    """The agents loaded now and their models' names: the only agent and model labels.
    A run of an agent since removed, or of a model since replaced, counts as ``other``."""

    agents: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()


# Replaced whole at each load (one assignment: a reader sees the old set or the new one).
_loaded = Loaded()


def agents_loaded(models_by_agent: Mapping[str, Iterable[str]]) -> None:
    """The agent ids now loaded, each with the model names it runs (called at every load)."""
    global _loaded
    _loaded = Loaded(
        frozenset(models_by_agent),
        frozenset(m for names in models_by_agent.values() for m in names),
    )


def agent_label(agent_id: str) -> str:
    return agent_id if agent_id in _loaded.agents else OTHER


def model_label(name: str) -> str:
    return name if name in _loaded.models else OTHER


def method_label(method: str) -> str:
    return method if method in HTTP_METHODS else OTHER


def status_label(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 599 else OTHER


def route_label(route: object) -> str:
    """The template of the route that took the request (``/api/conversations/{conversation_id}``),
    from the app's own table; ``unmatched`` when none did."""
    template = getattr(route, "path", None)
    return template if isinstance(template, str) and template else UNMATCHED


def run_outcome_label(outcome: str) -> str:
    return outcome if outcome in RUN_OUTCOMES else OTHER


def answered_by_label(route: str) -> str:
    return route if route in ANSWERED_BY else OTHER


def store_error_label(exc: BaseException) -> str:
    """The driver's exception type (``OperationalError``, ``PoolTimeout``...), or the nearest
    of its bases that the driver defines; ``other`` for anything else."""
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] in _DRIVER_MODULES:
            return cls.__name__
    return OTHER


# ---- the exposition ---------------------------------------------------------------------------


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_DIR))


def collect() -> bytes:
    """The exposition text: this process's metrics, or every worker's in multiprocess mode."""
    write_live()
    if not multiprocess():
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    _multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


def forget_dead_workers() -> None:
    """Drop the live gauges of workers that are gone (killed, so nobody called
    ``mark_process_dead`` for them): their open streams are closed. Each worker calls this
    as it starts, which is when a supervisor replaces a dead one."""
    directory = os.environ.get(MULTIPROC_DIR)
    if not directory:
        return
    for path in Path(directory).glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            _multiprocess.mark_process_dead(int(pid), directory)


def worker_stopped() -> None:
    if multiprocess():
        _multiprocess.mark_process_dead(os.getpid())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
