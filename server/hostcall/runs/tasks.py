"""The tasks a run engine starts (steps, resumes, server-side calls), kept until they end so
that shutdown and tests can wait for them."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Tasks:
    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def __len__(self) -> int:
        """Tasks started and not ended: running, or queued for the event loop."""
        return len(self._running)

    async def drain(self) -> None:
        """Wait for the tasks in flight, and the ones they start."""
        while self._running:
            await asyncio.gather(*tuple(self._running), return_exceptions=True)
