"""Prometheus metrics: every metric the server keeps is defined here, and nowhere else.

To count something new, add its metric below (a name ending in ``_total`` for a counter is
the client's, do not repeat it) and call it where the thing happens: ``FEEDBACK.labels(
agent="demo", rating="up").inc()``. Labels take a small, closed set of values (an outcome,
a route, an agent's id, a model's name), never a conversation's or a visitor's id: each
value is a time series of its own.

With ``hostcall serve --workers N`` every worker counts in files under
``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode, set up by
hostcall/workers.py before the workers start) and ``/metrics`` adds up all workers', so
whichever worker answers the scrape reports the whole server (``collect`` below).
"""

from __future__ import annotations

import os
from pathlib import Path

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
STORE_ERRORS = Counter(
    "hostcall_store_errors",
    "Requests the store failed (down, full, out of connections), by driver error type.",
    ["error"],
)
HTTP_SECONDS = Histogram(
    "hostcall_http_request_seconds",
    "HTTP requests (event streams excepted), by method, route template and status class.",
    ["method", "route", "status"],
    buckets=_HTTP_BUCKETS,
)
# Visitors' thumbs on replies; counted where feedback is stored.
FEEDBACK = Counter("hostcall_feedback", "Visitors' feedback on replies.", ["agent", "rating"])


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_DIR))


def collect() -> bytes:
    """The exposition text: this process's metrics, or every worker's in multiprocess mode."""
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
