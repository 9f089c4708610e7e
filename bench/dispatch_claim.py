"""What a surface's claim adds to a call's dispatch: the same dispatch read on two streams.

A surface stream (the widget's: ``surface=``, with a handler for the tool) records its
claim of the call in the store before it writes the dispatch; an observer's stream on the
same conversation (no surface) is written the dispatch as it is published. Per conversation,
both streams are open before the message is sent, one raw client reads both, and the gap is
the surface copy's arrival minus the observer's, on one clock. The observer is the same-run
baseline: both copies leave one process for one client, so the machine's load moves both.

Usage: .venv/bin/python bench/dispatch_claim.py [-n 100] [CHECKOUT]
A measurement: prints a table and exits 0; 1 when the server could not be driven.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import servers
from clients import client_for, create_conversations, expect, stream_paths
from report import print_table
from round_trip import ASK, DISPATCH, ITERATION_TIMEOUT
from streams import RawStream

WARMUP = 5


async def arrival(stream: RawStream) -> float:
    async for kind, _ in stream.events():
        if kind == DISPATCH:
            return time.perf_counter()
    raise RuntimeError("the stream ended before the dispatch")


async def gaps(root: Path, n: int, workdir: Path) -> list[float]:
    found: list[float] = []
    with servers.hostcall(workdir, workdir / "claim.db", secrets.token_urlsafe(32), root) as hc:
        async with client_for(hc) as http:
            for i in range(WARMUP + n):
                conv = (await create_conversations(http, 1))[0]
                surface = f"bench-{conv.id}"
                expect(
                    await http.post(
                        f"/api/conversations/{conv.id}/capabilities",
                        json={"surfaceId": surface, "tools": ["read_board_tasks"]},
                        headers=conv.auth,
                    ),
                    200,
                )
                (observer_path,) = await stream_paths(http, [conv])
                widget = await RawStream.open(
                    servers.HOST, hc.port, f"{conv.events_path}&surface={surface}"
                )
                observer = await RawStream.open(servers.HOST, hc.port, observer_path)
                try:
                    both = asyncio.gather(arrival(widget), arrival(observer))
                    expect(
                        await http.post(
                            f"/api/conversations/{conv.id}/messages",
                            json={"text": ASK},
                            headers=conv.auth,
                        ),
                        202,
                    )
                    claimed, seen = await asyncio.wait_for(both, ITERATION_TIMEOUT)
                finally:
                    widget.close()
                    observer.close()
                if i >= WARMUP:
                    found.append(claimed - seen)
        hc.check_alive()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100, help="conversations measured")
    parser.add_argument("checkout", nargs="?", type=Path, default=servers.ROOT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostcall-claim-") as tmp:
        try:
            found = asyncio.run(gaps(args.checkout.resolve(), args.n, Path(tmp)))
        except (RuntimeError, TimeoutError) as exc:
            print(f"dispatch_claim: {exc}", file=sys.stderr)
            return 1
    deciles = statistics.quantiles(found, n=10, method="inclusive")
    us = [f"{v * 1e6:,.0f} us" for v in (deciles[0], statistics.median(found), deciles[8])]
    print_table(
        f"A dispatch on the surface's stream after the observer's, n={len(found)}",
        [("the surface's copy minus the observer's", *us)],
        notes=["the surface stream claims the call in the store before it writes the dispatch"],
        header=("measure", "p10", "p50", "p90"),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
