"""The WAL frames of the raw round trip's settling commit, replayed alone.

The unit that settles a call (section 1b's result POST) writes the call, the tool message, the
audit entry, the conversation's ``last_seq`` and the ``TOOL_CALL_RESULT`` event in one commit;
each page it dirties is one WAL frame (two ``pwrite`` calls). This replays that unit's
statements, with the sizes of the bench's board result, on a fresh file made by today's
``SQLiteStore`` (``N`` conversations, each with a call waiting), and counts the frames from the
WAL's growth. Frames do not move with the machine's load; the microseconds beside them do.

Variants that need a migration, to say what one would buy: ``--no-autoincrement`` (``messages``
and ``audit`` rebuilt without ``AUTOINCREMENT``: no ``sqlite_sequence`` write), ``--event-bytes``
(the event's size; today's is ~1.3 KB with its view).

Usage: .venv/bin/python bench/round_trip_pages.py [-n 400] [--no-autoincrement] [--event-bytes N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from hostcall.store.sqlite.database import SQLiteStore

FRAME = 4096 + 24  # a page and its frame header
BOARD = {"tasks": [{"id": f"t{i}", "title": "Write release notes", "status": "todo",
                    "dueDate": "2026-01-01", "assignee": "Ann"} for i in range(3)]}  # fmt: skip


def _without_autoincrement(db: sqlite3.Connection) -> None:
    for table in ("audit", "messages"):
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        indexes = [r[0] for r in db.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type = 'index'"
            " AND sql IS NOT NULL", (table,))]  # fmt: skip
        db.execute(f"DROP TABLE {table}")
        db.execute(sql.replace("AUTOINCREMENT", ""))
        for index in indexes:
            db.execute(index)


def _seed(db: sqlite3.Connection, n: int) -> None:
    """A conversation as the result finds it: a dozen events, a message, a call delivered."""
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO conversations (id, agent_id, created_at, last_seq)"
               " VALUES (?, 'bench', ?, 12)", (f"c{n}", time.time()))  # fmt: skip
    db.executemany("INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, 'X', ?)",
                   [(f"c{n}", seq, "x" * 200) for seq in range(1, 13)])  # fmt: skip
    db.execute("INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls)"
               " VALUES (?, ?, 'r', 'user', 'hi', '[]')", (f"mu{n}", f"c{n}"))  # fmt: skip
    db.execute("INSERT INTO calls (id, conversation_id, run_id, step, tool_name, state, input,"
               " arguments, deadline, route, delivered, extra) VALUES (?, ?, 'r', 1, 't',"
               " 'delivered', '{}', '{}', ?, 'handler', 1, '{}')",
               (f"k{n}", f"c{n}", time.time() + 60))  # fmt: skip
    db.execute("COMMIT")


def _settle(db: sqlite3.Connection, n: int, event: str) -> None:
    """The settling unit's statements (``round_trip_profile.py --mode sql``)."""
    c, k = f"c{n}", f"k{n}"
    db.execute("BEGIN IMMEDIATE")
    outcome = json.dumps({"output": BOARD})
    db.execute("UPDATE calls SET state = 'answered', outcome = ? WHERE id = ?"
               " AND state IN ('dispatched', 'delivered')", (outcome, k))  # fmt: skip
    db.execute("SELECT * FROM calls WHERE id = ?", (k,)).fetchone()
    db.execute("INSERT INTO audit (at, actor, action, conversation_id, call_id, agent_id,"
               " details) VALUES (?, 'visitor', 'call.result', ?, ?, 'bench', '{}')",
               (time.time(), c, k))  # fmt: skip
    db.execute("INSERT INTO messages (id, conversation_id, run_id, role, text, tool_calls,"
               " tool_call_id, tool_name) VALUES (?, ?, 'r', 'tool', ?, '[]', ?, 't')",
               (f"mt{n}", c, json.dumps(BOARD), k))  # fmt: skip
    db.execute("UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ?", (c,))
    db.execute("SELECT last_seq FROM conversations WHERE id = ?", (c,)).fetchone()
    db.execute("INSERT INTO events (conversation_id, seq, type, data)"
               " VALUES (?, 13, 'TOOL_CALL_RESULT', ?)", (c, event))  # fmt: skip
    db.execute("COMMIT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=400, help="conversations, one settle each")
    parser.add_argument("--no-autoincrement", action="store_true")
    parser.add_argument("--event-bytes", type=int, default=1300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostcall-pages-") as workdir:
        path = Path(workdir) / "hostcall.db"
        asyncio.run(SQLiteStore(path, serving=False).close())  # today's schema, every migration
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # as the server (store/sqlite/database.py)
        db.execute("PRAGMA wal_autocheckpoint=0")  # the server checkpoints in a thread
        if args.no_autoincrement:
            _without_autoincrement(db)
        for n in range(args.n):
            _seed(db, n)
        wal = Path(f"{path}-wal")
        frames, took = [], []
        for n in range(args.n):
            before, began = wal.stat().st_size, time.perf_counter()
            _settle(db, n, "y" * args.event_bytes)
            took.append(time.perf_counter() - began)
            frames.append((wal.stat().st_size - before) / FRAME)
        db.close()
    autoincrement = "off" if args.no_autoincrement else "on"
    print(f"n={args.n}, event {args.event_bytes} B, autoincrement {autoincrement}: WAL frames"
          f" a settling commit, median {statistics.median(frames):g}; the unit's us, median"
          f" {statistics.median(took) * 1e6:,.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
