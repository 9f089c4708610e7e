"""What the widget weighs, as the browser loaded it: each of Hostcall's responses gzipped
(``gzip -9``), the loader (``/embed.js``) apart from what the widget's frame loads, and the
API's JSON apart from both (data, not code).

One measure for the browser bench, which prints it (bench/browser_bench.py, "1. Weight"), and
for the e2e test that fails when the open widget is over its budget (tests/e2e/test_weight.py).
The budgets are PRODUCT.md's: the loader "a few KB", the whole widget far below the big
vendors' 130-600 KB.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from playwright.sync_api import Request

LOADER = "/embed.js"
#: Gzipped bytes: the loader alone, and the loader with everything the open widget's frame
#: loads (1 KB = 1,024 B).
LOADER_BUDGET = 3 * 1024
WIDGET_BUDGET = 30 * 1024
#: Responses that are data, not code: the API's JSON, and the loader's check that the page
#: may show the agent.
DATA_PATHS = ("/api/", "/embed/check")


@dataclass(frozen=True, slots=True)
class Weighed:
    """One response: its path, its body's bytes raw and ``gzip -9``, what was sent for it
    (Content-Length) and how it was encoded."""

    path: str
    raw: int
    gzipped: int
    sent: int
    encoding: str


def weigh(requests: Iterable[Request], server: str) -> list[Weighed]:
    """The finished ``requests`` made to ``server`` (its origin, ``scheme://host:port``),
    weighed, in order."""
    out = []
    for r in requests:
        scheme, netloc, path, _, _ = urlsplit(r.url)
        if f"{scheme}://{netloc}" != server:
            continue
        response = r.response()
        assert response is not None, f"{r.url} finished with no response"
        body, headers = response.body(), response.all_headers()
        sent = int(headers.get("content-length", r.sizes()["responseBodySize"]))
        encoding = headers.get("content-encoding", "identity")
        out.append(Weighed(path, len(body), len(gzip.compress(body, 9)), sent, encoding))
    return out


def gzipped(files: Iterable[Weighed]) -> int:
    return sum(f.gzipped for f in files)


@dataclass(frozen=True, slots=True)
class OpenWidget:
    """What the widget loaded on open, split: the loader, the frame's files (heaviest
    first), and the API's data."""

    loader: tuple[Weighed, ...]
    frame: tuple[Weighed, ...]
    data: tuple[Weighed, ...]

    @classmethod
    def of(cls, files: Iterable[Weighed]) -> OpenWidget:
        files = list(files)
        data = tuple(f for f in files if f.path.startswith(DATA_PATHS))
        loader = tuple(f for f in files if f.path == LOADER)
        frame = tuple(
            sorted((f for f in files if f not in data + loader), key=lambda f: -f.gzipped)
        )
        if len(loader) != 1 or not any(f.path.startswith("/widget/") for f in frame):
            raise ValueError(f"expected {LOADER} once and the widget's page, got {files}")
        return cls(loader, frame, data)

    @property
    def whole(self) -> tuple[Weighed, ...]:
        """The loader and the frame: what the budget counts."""
        return self.loader + self.frame

    def over_budget(self) -> list[str]:
        """What is over its budget, with the figures; empty when all are within."""
        over = []
        loader, whole = gzipped(self.loader), gzipped(self.whole)
        if loader > LOADER_BUDGET:
            over.append(f"the loader is {loader:,} B gzipped, over {LOADER_BUDGET:,} B")
        if whole > WIDGET_BUDGET:
            each = ", ".join(f"{f.path} {f.gzipped:,}" for f in self.whole)
            over.append(f"the open widget is {whole:,} B, over {WIDGET_BUDGET:,} B: {each}")
        return over
