"""WAL checkpoints for the SQLite store, off the request path.

SQLite's automatic checkpoint runs inside the COMMIT that pushes the WAL past 1,000 pages:
that request copies the WAL into the database and waits for two fsyncs (COMMIT p99 9.7 ms
with it, 1.3 ms without, on the bench's VM). The serving connection turns it off
(``wal_autocheckpoint=0``) and this thread checkpoints instead, on a connection of its own,
every ``interval`` seconds.

A PASSIVE checkpoint never blocks the writer: it copies what is committed and leaves. Under
a write load that never pauses, the WAL could then only grow (SQLite rewinds it only when a
checkpoint caught up with every frame), so past ``max_wal_bytes`` the thread runs a
TRUNCATE checkpoint, which waits for the writer between two transactions and empties the
file: a bound on the WAL's size, paid only by a server that writes without a pause.

Durability is unchanged by whom does it: with ``synchronous=NORMAL`` in WAL mode a commit
is in the operating system's hands at once (a killed process loses nothing) and is fsynced
by the next checkpoint. Checkpointing every ``interval`` seconds bounds what a power cut can
take to about that long; the automatic checkpoint bounded it by 1,000 pages of writes,
which on a quiet server could be hours. The database file itself is never left torn.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger("hostcall.store")

CHECKPOINT_SECONDS = 1.0
MAX_WAL_BYTES = 64 * 1024 * 1024


class Checkpointer:
    """A daemon thread that checkpoints the WAL of ``path``; ``stop`` ends it."""

    def __init__(
        self,
        path: Path,
        *,
        interval: float = CHECKPOINT_SECONDS,
        max_wal_bytes: int = MAX_WAL_BYTES,
    ) -> None:
        self.path = path
        # Beside the file itself: SQLite resolves a symlink to the database, and so its WAL.
        real = path.resolve()
        self.wal = real.with_name(real.name + "-wal")
        self.interval = interval
        self.max_wal_bytes = max_wal_bytes
        self.truncations = 0  # how often the size bound had to wait for the writer
        self._stop = threading.Event()
        # Used from the thread only (and from ``checkpoint`` in tests, with the thread idle).
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def checkpoint(self) -> tuple[int, int]:
        """One pass: (frames in the WAL, frames copied into the database)."""
        _, frames, copied = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if self._wal_size() > self.max_wal_bytes:
            self.truncations += 1
            log.info("the WAL of %s passed %d bytes: truncating it", self.path, self.max_wal_bytes)
            _, frames, copied = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return int(frames), int(copied)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._db.close()

    def _wal_size(self) -> int:
        try:
            return self.wal.stat().st_size
        except FileNotFoundError:
            return 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.checkpoint()
            except sqlite3.Error as exc:  # busy past the timeout, disk trouble: next turn
                log.warning("WAL checkpoint of %s failed: %s", self.path, exc)
