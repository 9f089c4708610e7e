"""WAL checkpoints of the SQLite store run in a thread, not inside request commits."""

from __future__ import annotations

import time
from pathlib import Path

from hostcall.protocol.events import RunStarted
from hostcall.store.checkpoints import Checkpointer
from hostcall.store.records import Conversation
from hostcall.store.sqlite import SQLiteStore


async def _fill(store: SQLiteStore, cid: str, events: int) -> None:
    await store.create_conversation(Conversation(cid, "agent", time.time()))
    for n in range(events):
        await store.append_event(cid, RunStarted(cid, f"r{n}" + "x" * 500))


async def test_a_serving_store_commits_without_checkpointing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    try:
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert store._checkpointer is not None
        store._checkpointer.stop()  # nobody checkpoints now: commits must not either
        await _fill(store, "c1", 3000)  # about 2,000 pages: past the automatic threshold twice
        wal = (tmp_path / "a.db-wal").stat().st_size
        assert wal > 3 * 1000 * 4096, f"a request commit checkpointed the WAL ({wal} B)"
        assert [e.seq for e in await store.events_after("c1", 2998)] == [2999, 3000]
    finally:
        store._checkpointer = None
        await store.close()


async def test_the_thread_copies_the_wal_into_the_database(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "b.db")
    try:
        assert store._checkpointer is not None
        store._checkpointer.stop()
        await _fill(store, "c1", 200)
        before = (tmp_path / "b.db").stat().st_size
        checkpointer = Checkpointer(tmp_path / "b.db", interval=0.05)
        try:  # the thread's own passes copy the events' pages into the database file
            deadline = time.monotonic() + 10
            while (tmp_path / "b.db").stat().st_size < before + 200 * 500:
                assert time.monotonic() < deadline, "no checkpoint copied the WAL"
                time.sleep(0.05)
        finally:
            checkpointer.stop()
        assert await store.last_seq("c1") == 200
    finally:
        store._checkpointer = None
        await store.close()
    reopened = SQLiteStore(tmp_path / "b.db")
    try:
        assert [e.seq for e in await reopened.events_after("c1", 198)] == [199, 200]
    finally:
        await reopened.close()


async def test_the_wal_is_bounded_while_writes_never_pause(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    try:
        assert store._checkpointer is not None
        store._checkpointer.stop()
        checkpointer = Checkpointer(tmp_path / "c.db", interval=3600, max_wal_bytes=256 * 1024)
        try:
            await _fill(store, "c1", 1000)  # about 1 MB of WAL
            checkpointer.checkpoint()
            assert checkpointer.truncations == 1
            assert (tmp_path / "c.db-wal").stat().st_size == 0
            await _fill(store, "c2", 10)  # the writer goes on, on an emptied WAL
            checkpointer.checkpoint()
            assert checkpointer.truncations == 1  # small again: PASSIVE only
        finally:
            checkpointer.stop()
        assert await store.last_seq("c1") == 1000 and await store.last_seq("c2") == 10
    finally:
        store._checkpointer = None
        await store.close()


async def test_the_wal_is_bounded_for_a_database_served_through_a_symlink(
    tmp_path: Path,
) -> None:
    """SQLite keeps the WAL beside the file a symlink points to; the bound measures that
    WAL, not a file beside the link's name (once it did, saw none, and never truncated)."""
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "real" / "data.db")
    store = SQLiteStore(link)
    try:
        assert store._checkpointer is not None
        store._checkpointer.stop()
        checkpointer = Checkpointer(link, interval=3600, max_wal_bytes=256 * 1024)
        try:
            await _fill(store, "c1", 1000)  # about 1 MB of WAL
            checkpointer.checkpoint()
            assert checkpointer.truncations == 1
            assert (tmp_path / "real" / "data.db-wal").stat().st_size == 0
        finally:
            checkpointer.stop()
        assert await store.last_seq("c1") == 1000
    finally:
        store._checkpointer = None
        await store.close()


async def test_close_stops_the_thread_and_leaves_the_data(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "d.db")
    checkpointer = store._checkpointer
    assert checkpointer is not None and checkpointer._thread.is_alive()
    await _fill(store, "c1", 50)
    await store.close()
    assert not checkpointer._thread.is_alive()
    assert not (tmp_path / "d.db-wal").exists() or (tmp_path / "d.db-wal").stat().st_size == 0
    reopened = SQLiteStore(tmp_path / "d.db")
    try:
        assert await reopened.last_seq("c1") == 50
    finally:
        await reopened.close()


async def test_a_command_beside_the_server_starts_no_thread(tmp_path: Path) -> None:
    server = SQLiteStore(tmp_path / "e.db")
    try:
        command = SQLiteStore(tmp_path / "e.db", serving=False)
        try:
            assert command._checkpointer is None
        finally:
            await command.close()
    finally:
        await server.close()
