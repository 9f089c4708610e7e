"""A stdio MCP server's command, and the session's streams over its pipes.

The exchange is the SDK's (newline-delimited JSON-RPC on the command's stdin and stdout),
but the SDK's ``stdio_client`` trusts the command more than a server we do not write may be
trusted: it reads a line of any length into memory, copies the command's stderr into ours
unlabelled, and notices the command's death only when its stdout closes, which a helper it
started (holding the inherited pipe) may never do. Here:

- a message longer than the server's ``max_message_mb`` is not read on: the command is
  stopped and the session ends (``Link.too_large`` says so to the pool);
- the command's stderr is read line by line into the log, each line prefixed with the
  server's name and with the server's secrets redacted;
- the command exiting ends the session at once (the calls in flight on it fail then, not at
  their deadline), and whatever it started in its process group is stopped with it.

POSIX only: the command gets a session (and so a process group) of its own.
"""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hostcall.blocks.mcp.servers import McpServer

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

Streams = tuple[
    "MemoryObjectReceiveStream[SessionMessage | Exception]",
    "MemoryObjectSendStream[SessionMessage]",
]

log = logging.getLogger("hostcall.mcp")
# The command's grace to exit once its stdin closes, and after SIGTERM before SIGKILL.
GRACE_SECONDS = 2.0
# How often the command's exit is looked for: asyncio sets the return code when the child is
# reaped, but offers no wait for it that does not also wait for every pipe to close.
EXIT_POLL_SECONDS = 0.05
EXIT_REASON_SECONDS = 0.5
# A line of stderr past this is cut in the log (the rest of it left out): the log is no
# place for a megabyte line.
STDERR_LINE_BYTES = 4096


@dataclass
class Link:
    """What the pool reads of a stdio session: the command's pid, and why the session ended."""

    pid: int | None = None
    ended: str | None = None
    too_large: bool = False

    def end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason


@asynccontextmanager
async def stdio_transport(server: McpServer, link: Link) -> AsyncIterator[Streams]:
    """The (read, write) streams of a session with the server's command, started here and
    stopped (with its process group) when the context is left."""
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    # The command's environment: the SDK's safe minimum (PATH, HOME, ...) and the declared
    # variables; never the server's own settings or secrets.
    process = await anyio.open_process(
        list(server.command),
        env=get_default_environment() | dict(server.env),
        cwd=server.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    link.pid = process.pid
    limit = int(server.max_message_mb * 1024 * 1024)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    def end(reason: str) -> None:
        link.end(reason)
        # The session reads the end of its stream: every request waiting on it fails now.
        to_session.close()

    async def end_at_exit(otherwise: str) -> None:
        # A pipe closes as the command exits: a moment for its status, the better reason.
        with anyio.move_on_after(EXIT_REASON_SECONDS):
            while process.returncode is None:
                await anyio.sleep(EXIT_POLL_SECONDS)
        code = process.returncode
        end(otherwise if code is None else f"the command exited ({_status(code)})")

    async def read_stdout() -> None:
        assert process.stdout is not None
        line = bytearray()
        try:
            async for chunk in process.stdout:
                *complete, rest = chunk.split(b"\n")
                for part in complete:
                    line += part
                    if len(line) > limit:
                        break
                    await to_session.send(_parsed(bytes(line)))
                    line.clear()
                else:
                    line += rest
                if len(line) > limit:
                    # Not read on: the rest of the message may be any size, and the next
                    # message starts only after it. The command is stopped with the session.
                    link.too_large = True
                    end(f"it sent a message over {server.max_message_mb:g} MB")
                    await _stop_group(process)
                    return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The session is gone: what the command still writes is read and dropped, so
            # that one blocked on a full pipe can exit within its grace.
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for _ in process.stdout:
                    pass
            return
        await end_at_exit("the command closed its output")

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(text.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await end_at_exit("the command closed its input")

    async def watch_exit() -> None:
        while process.returncode is None:
            await anyio.sleep(EXIT_POLL_SECONDS)
        end(f"the command exited ({_status(process.returncode)})")
        # What it started may hold its pipes open (and go on running): stopped with it.
        await _stop_group(process)

    stderr_read = anyio.Event()
    async with anyio.create_task_group() as tasks:
        assert process.stderr is not None
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        tasks.start_soon(watch_exit)
        tasks.start_soon(_log_stderr, process.stderr, server, stderr_read)
        try:
            yield from_server, to_server
        finally:
            # Finished even when the caller is cancelled: the command must not outlive us.
            with anyio.CancelScope(shield=True):
                to_server.close()
                to_session.close()
                await _stop(process, link)
                # Its last words (a traceback, as it died) are logged before the pipe closes.
                with anyio.move_on_after(GRACE_SECONDS):
                    await stderr_read.wait()
                await _close(process)
                await from_server.aclose()
            tasks.cancel_scope.cancel()


def _parsed(line: bytes) -> SessionMessage | Exception:
    """The message on a line, or the error the session is given instead (as the SDK does)."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _log_stderr(stream: ByteReceiveStream, server: McpServer, done: anyio.Event) -> None:
    """Each line the command writes to stderr, into the log under the server's name."""
    secrets = server.secrets()
    # A line is cut for the log only once this much of it is held: a secret that starts
    # before the cut then ends within what is held, and is redacted whole.
    keep = STDERR_LINE_BYTES + max((len(s.encode()) for s in secrets), default=0)
    pending = bytearray()
    skipping = False  # the rest of a line already logged cut

    def emit(raw: bytes) -> None:
        text = raw.decode(errors="replace").rstrip()
        for secret in secrets:
            text = text.replace(secret, "[redacted]")
        if len(text) > STDERR_LINE_BYTES:
            text = text[:STDERR_LINE_BYTES] + " [cut]"
        if text:
            log.info("MCP server %r: %s", server.name, text)

    try:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in stream:
                pending += chunk
                while (newline := pending.find(b"\n")) >= 0:
                    if not skipping:
                        emit(bytes(pending[:newline]))
                    skipping = False
                    del pending[: newline + 1]
                if len(pending) >= keep or skipping:
                    if not skipping:
                        emit(bytes(pending))
                    skipping = True
                    pending.clear()
        if not skipping:
            emit(bytes(pending))
    finally:
        done.set()


async def _stop(process: Process, link: Link) -> None:
    """Close the command's stdin, give it its grace to exit, then stop its process group."""
    assert process.stdin is not None
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await process.stdin.aclose()
    if not link.too_large:
        with anyio.move_on_after(GRACE_SECONDS):
            while process.returncode is None:
                await anyio.sleep(EXIT_POLL_SECONDS)
    await _stop_group(process)


async def _close(process: Process) -> None:
    """Close the command's pipes, each at our end: one that a process it started still holds
    open never reads its end, and a transport left open fails as it is collected once the
    event loop is gone."""
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await process.aclose()
    # The pipes report closed on the loop's next turn; the transport closes as they do.
    await anyio.lowlevel.checkpoint()


async def _stop_group(process: Process) -> None:
    """SIGTERM to the command's process group, SIGKILL to what is left after the grace."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    await terminate_posix_process_tree(process, GRACE_SECONDS)


def _status(code: int) -> str:
    if code < 0:
        with suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"status {code}"
