"""A stdio MCP server's stderr in the log (hostcall/blocks/mcp/stdio.py): a line at a time,
under the server's name, its secrets redacted even where a long line is cut."""

from __future__ import annotations

import logging

import anyio
import pytest
from anyio.abc import ByteReceiveStream

from hostcall.blocks.mcp.servers import McpServer
from hostcall.blocks.mcp.stdio import STDERR_LINE_BYTES, _log_stderr

SECRET = "stdio-sekrit-token-0815"


class Chunks(ByteReceiveStream):
    """What the command wrote, in the pieces a pipe hands over."""

    def __init__(self, data: bytes, size: int) -> None:
        self._pieces = [data[i : i + size] for i in range(0, len(data), size)]

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._pieces:
            raise anyio.EndOfStream
        return self._pieces.pop(0)

    async def aclose(self) -> None:
        self._pieces = []


def logged(data: bytes, size: int, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level(logging.INFO, logger="hostcall.mcp")
    server = McpServer("files", command=("x",), env={"TOKEN": SECRET})
    done = anyio.Event()

    async def read() -> None:
        await _log_stderr(Chunks(data, size), server, done)

    anyio.run(read)
    assert done.is_set()
    return [r.getMessage() for r in caplog.records if r.name == "hostcall.mcp"]


def test_each_line_is_logged_under_the_servers_name_with_its_secret_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = f"Traceback (most recent call last):\nKeyError: {SECRET}\n\nno newline".encode()
    assert logged(data, 7, caplog) == [
        "MCP server 'files': Traceback (most recent call last):",
        "MCP server 'files': KeyError: [redacted]",
        "MCP server 'files': no newline",
    ]


def test_a_long_line_is_cut_and_a_secret_across_the_cut_is_still_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    head = "x" * (STDERR_LINE_BYTES - 5)
    data = f"{head}{SECRET}{'y' * 100_000}\nafter\n".encode()
    for size in (1000, 4096, 4100, 65536):  # however the pipe splits it
        caplog.clear()
        lines = logged(data, size, caplog)
        assert lines == [f"MCP server 'files': {head}[reda [cut]", "MCP server 'files': after"]
