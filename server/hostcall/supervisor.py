"""The supervisor of ``hostcall serve --workers N``: uvicorn's, with a health check that tells a
starved worker from a dead one.

uvicorn's own supervisor pings its workers one after the other (a thread of the worker
answers, off its event loop, once it gets the interpreter) and SIGKILLs a worker that has not
answered within 5 s (``timeout_worker_healthcheck``): every connection the worker holds is cut,
and each request in flight ends with no response at all. A worker can go 5 s without running a
line of Python and still be about to answer everything it holds: the machine is busy with other
work, a collection or a C call holds the interpreter, a debugger (``py-spy dump``) or
``kill -STOP`` has paused it. Killing it turns a slow moment into lost requests. And while
uvicorn waits for one worker's answer it looks at no other: a dead worker waits behind a slow
one for its replacement. uvicorn says all this at INFO, so ``--log-level warning`` hides it.

Here the same workers (uvicorn's ``Process``: its pipe, its answering thread) are watched so:

- a worker that exits (a crash, the OOM killer, ``kill -9``) is replaced at the next look
  (every 0.5 s), said at WARNING;
- pings never block: one ping at a time per worker, its answer read when it has come;
- a worker silent for ``SILENT_WARNING`` seconds is said at WARNING, once, and left running
  with its connections; said again when it answers;
- a worker silent for ``hang_seconds`` (``--worker-timeout``; 0: never) is hung: said at
  ERROR, killed and replaced. What it had accepted is not lost: its runs' leases lapse and
  another worker takes their steps over (hostcall/leases.py); its visitors' streams reconnect.
"""

from __future__ import annotations

import logging
import pickle
import signal
import time
from collections.abc import Callable
from typing import Any

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

log = logging.getLogger("hostcall.supervisor")

SILENT_WARNING = 5.0  # where uvicorn would have killed the worker


class Supervisor(Multiprocess):
    def __init__(
        self,
        config: Any,
        sockets: list[Any],
        *,
        hang_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(config, sockets)
        self.hang_seconds = hang_seconds
        self.clock = clock
        self._pinged: dict[Process, float] = {}  # a worker's unanswered ping: when it went
        self._said_silent: set[Process] = set()

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for gone in [p for p in self._pinged if p not in self.processes]:  # restarted, retired
            self._forget(gone)
        for index, process in enumerate(self.processes):
            if not process.process.is_alive():
                process.kill()  # closes its pipe; the process itself is gone
                process.join()
                if process.exitcode == STARTUP_FAILURE:
                    # Its app, or its socket, is broken: every replacement would fail alike.
                    log.error("worker [%s] failed to start: stopping", process.pid)
                    self.should_exit.set()
                    return
                log.warning("worker [%s] exited (%s): starting another",
                            process.pid, _exit(process.exitcode))  # fmt: skip
                self._replace(index, process)
                continue
            silent = self._silence(process)
            if self.hang_seconds and silent >= self.hang_seconds:
                log.error(
                    "worker [%s] has not answered for %.0f s (--worker-timeout): hung; killing "
                    "and replacing it (its runs move to the other workers as their leases lapse)",
                    process.pid,
                    silent,
                )
                process.kill()
                process.join()
                self._replace(index, process)
            elif silent >= SILENT_WARNING and process not in self._said_silent:
                self._said_silent.add(process)
                log.warning(
                    "worker [%s] has not answered its health check for %.0f s: starved of CPU "
                    "or held by a long call; left running with its connections%s",
                    process.pid,
                    silent,
                    f" (replaced if silent for {self.hang_seconds:g} s, --worker-timeout)"
                    if self.hang_seconds
                    else "",
                )

    def _silence(self, process: Process) -> float:
        """Seconds ``process`` has left a ping unanswered; sends one if none is out. Never
        waits: an answer not yet come is read at a later look."""
        now = self.clock()
        sent = self._pinged.get(process)
        try:
            if sent is None:
                process.parent_conn.send(b"ping")
                self._pinged[process] = now
                return 0.0
            if not process.parent_conn.poll():
                return now - sent
            process.parent_conn.recv()  # whether its server has started: alive either way
        except (OSError, EOFError, pickle.UnpicklingError):
            return 0.0  # its pipe is closing: it is exiting, and is_alive() says so next look
        del self._pinged[process]
        if process in self._said_silent:
            self._said_silent.discard(process)
            log.warning("worker [%s] answered again after %.1f s", process.pid, now - sent)
        return 0.0

    def _replace(self, index: int, process: Process) -> None:
        self._forget(process)
        if self.should_exit.is_set():
            return
        fresh = Process(self.config, self.sockets)
        fresh.start()
        self.processes[index] = fresh

    def _forget(self, process: Process) -> None:
        self._pinged.pop(process, None)
        self._said_silent.discard(process)


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
