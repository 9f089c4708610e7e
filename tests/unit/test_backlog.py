"""The shared pages of replayed logs (hostcall/backlog.py), against a log held in a list."""

from __future__ import annotations

import asyncio

import pytest

from hostcall.backlog import Backlog
from hostcall.protocol.frames import Event, sse_frame, to_sse


class Log:
    """One conversation's log; every read is counted, and may be held until released."""

    def __init__(self, count: int) -> None:
        self.events = [self.event(n) for n in range(1, count + 1)]
        self.reads: list[tuple[int, int]] = []
        self.gate: asyncio.Event | None = None

    @staticmethod
    def event(seq: int) -> Event:
        return Event("c_1", seq, "TEXT_MESSAGE_CONTENT", f'{{"type":"X","delta":"{seq}"}}')

    async def read(self, conversation_id: str, after: int, limit: int) -> list[Event]:
        self.reads.append((after, limit))
        found = [e for e in self.events if e.seq > after][:limit]  # read when called
        if self.gate is not None:
            await self.gate.wait()
        return found


def seqs(page: object) -> list[int]:
    return [e.seq for e in page.events]  # type: ignore[attr-defined]


def test_a_full_page_is_read_once_and_every_stream_resumes_inside_it_exactly() -> None:
    log, backlog = Log(25), Backlog(size=10)

    async def go() -> None:
        assert seqs(await backlog.after(log.read, "c_1", 0)) == list(range(1, 11))
        for seen in range(10):
            page = await backlog.after(log.read, "c_1", seen)
            assert seqs(page) == list(range(seen + 1, 11)) and not page.ends_log
            assert page.frames == tuple(sse_frame(e) for e in page.events)
        assert log.reads == [(0, 10)]
        # The page still filling is read each time, only what the stream lacks, never kept.
        assert seqs(await backlog.after(log.read, "c_1", 20)) == list(range(21, 26))
        assert seqs(await backlog.after(log.read, "c_1", 23)) == [24, 25]
        assert seqs(await backlog.after(log.read, "c_1", 20)) == list(range(21, 26))
        assert log.reads[1:] == [(20, 10), (23, 7), (20, 10)]
        assert (await backlog.after(log.read, "c_1", 20)).ends_log

    asyncio.run(go())


def test_streams_wanting_a_full_page_being_read_wait_for_that_read() -> None:
    log, backlog = Log(30), Backlog(size=10)

    async def go() -> None:
        log.gate = asyncio.Event()
        crowd = [asyncio.create_task(backlog.after(log.read, "c_1", 10)) for _ in range(20)]
        await asyncio.sleep(0.01)
        log.gate.set()
        pages = await asyncio.gather(*crowd)
        assert all(seqs(p) == list(range(11, 21)) for p in pages)
        assert log.reads == [(10, 10)]

    asyncio.run(go())


def test_a_read_that_found_the_page_filling_is_not_handed_to_a_later_stream() -> None:
    # The first read began before events 6-10 were committed; a stream that subscribed
    # after they were must get them, so it reads for itself.
    log, backlog = Log(5), Backlog(size=10)

    async def go() -> None:
        log.gate = asyncio.Event()
        early = asyncio.create_task(backlog.after(log.read, "c_1", 0))
        await asyncio.sleep(0.01)
        log.events += [Log.event(n) for n in range(6, 11)]
        late = asyncio.create_task(backlog.after(log.read, "c_1", 0))
        await asyncio.sleep(0.01)
        log.gate.set()
        assert seqs(await early) == [1, 2, 3, 4, 5]
        assert seqs(await late) == list(range(1, 11))
        assert log.reads == [(0, 10), (0, 10)]

    asyncio.run(go())


def test_what_is_kept_stays_within_its_budget_oldest_out_first() -> None:
    log = Log(100)
    page_bytes = 2 * sum(len(sse_frame(e)) for e in log.events[90:])  # the largest
    backlog = Backlog(size=10, kept_bytes=3 * page_bytes + 10)

    async def go() -> None:
        for start in range(0, 100, 10):
            await backlog.after(log.read, "c_1", start)
        log.reads.clear()
        for start in (70, 80, 90):  # the three newest are kept
            await backlog.after(log.read, "c_1", start)
        assert log.reads == []
        await backlog.after(log.read, "c_1", 0)
        assert log.reads == [(0, 10)]

    asyncio.run(go())


@pytest.mark.parametrize(
    "event",
    [
        Event("c_1", 3, "TEXT_MESSAGE_CONTENT", '{"type":"TEXT_MESSAGE_CONTENT","delta":"a\\nb"}'),
        Event("c_1", 4, "CUSTOM", '{"type":"CUSTOM","name":"é","value":{"x":"日本"}}'),
        Event("c_1", 5, "X", '{"a":"raw\nline","b":"cr\rhere"}'),
        Event("c\r1", 6, "X", "{}"),
    ],
)
def test_an_events_frame_is_the_bytes_sse_starlette_writes(event: Event) -> None:
    assert sse_frame(event) == to_sse(event).encode()
