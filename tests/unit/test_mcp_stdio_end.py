"""The end of a stdio MCP session (hostcall/blocks/mcp/stdio.py): the command's pipes are
closed at our end even when a process it started still holds them open."""

from __future__ import annotations

import logging
import os
import signal
import sys
from contextlib import suppress
from typing import Any

import anyio
import pytest

from hostcall.blocks.mcp import stdio
from hostcall.blocks.mcp.servers import McpServer

# Starts a worker in a session of its own (out of reach of the stop of the command's group)
# that inherits the command's stdout and stderr, says its pid on stderr, then exits.
COMMAND = (
    "import subprocess, sys\n"
    "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
    " start_new_session=True)\n"
    "print(worker.pid, file=sys.stderr, flush=True)\n"
    "sys.exit(3)\n"
)


def test_pipes_a_worker_still_holds_are_closed_when_the_session_ends(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hostcall.mcp")
    started: list[Any] = []
    open_process = anyio.open_process

    async def spy(*args: Any, **kwargs: Any) -> Any:
        started.append(process := await open_process(*args, **kwargs))
        return process

    monkeypatch.setattr(stdio.anyio, "open_process", spy)
    server = McpServer("files", command=(sys.executable, "-c", COMMAND))
    link = stdio.Link()

    async def session() -> None:
        async with stdio.stdio_transport(server, link) as (read, _):
            async for _ in read:  # ends as the command exits
                pass

    anyio.run(session)
    worker = int(next(r.getMessage().rsplit(" ", 1)[1] for r in caplog.records
                      if r.name == "hostcall.mcp"))  # fmt: skip
    try:
        assert link.ended == "the command exited (status 3)"
        # Left open, the transport fails as it is collected after its event loop closed.
        transport = started[0]._transport
        assert transport.is_closing()
        assert all(transport.get_pipe_transport(fd).is_closing() for fd in (0, 1, 2))
    finally:
        with suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
