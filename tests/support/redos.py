"""A designer's catastrophic pattern and a visitor's text for it; whether the server keeps
answering while it matches them.

With Python's backtracking ``re``, ``HOSTILE_PATTERN`` against ``HOSTILE_TEXT`` takes
seconds (about 3 s here, doubling with each extra ``a``), with the event loop frozen all
along; with RE2 it takes microseconds. The text is short enough that the old code fails
these tests in seconds instead of hanging the suite.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

HOSTILE_PATTERN = r"^(a+)+$"
HOSTILE_TEXT = "a" * 26 + "!"
# What one match may cost through the real code path, and what /healthz may take.
FAST_SECONDS = 0.05
RESPONSIVE_SECONDS = 0.5


def timed(action: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def while_answering_healthz(client: Any, action: Callable[[], T]) -> tuple[T, float]:
    """Run ``action`` in a thread while /healthz is asked again and again; return its result
    and the longest wait for an answer, from one to the next (a frozen event loop, or a
    thread holding the GIL, stretches one of those gaps over the whole freeze)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = action()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    last = time.perf_counter()
    worker.start()
    longest = 0.0
    while worker.is_alive():
        response = client.get("/healthz")
        assert response.status_code == 200, response.text
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
        time.sleep(0.005)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], longest
