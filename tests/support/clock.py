"""A clock for the app's ``clock`` seam (``create_app(settings, clock=...)``): wall time plus
an offset a test moves forward, so a deadline passes without the test sleeping for it."""

from __future__ import annotations

import time


class Clock:
    """Reads as ``time.time()`` until ``advance`` moves it ahead; it never goes back."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a clock that goes back is not one a server meets"
        self.offset += seconds
