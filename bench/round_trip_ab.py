"""Section 1's round trip (raw client) on several checkouts of Hostcall at once, interleaved.

Before/after figures from the same minutes on a shared machine: every checkout's server and
the floor run together, and each iteration makes one round trip on each, the order rotating.
A checkout is a directory with Hostcall's ``server/hostcall`` package (``git worktree add /tmp/main
main``); its server runs with this Python environment, this bench's agents and floor.

Usage: .venv/bin/python bench/round_trip_ab.py [-n 200] CHECKOUT [CHECKOUT ...]
A measurement: prints a table and exits 0; 1 when a server could not be driven.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import sys
import tempfile
from pathlib import Path

import servers
from clients import RawHttp, client_for
from report import ms, print_table, summary
from round_trip import ITERATION_TIMEOUT, Side, floor_iteration, hostcall_iteration

WARMUP = 10
MARKS = (
    ("TOOL_CALL_RESULT", "TOOL_CALL_RESULT"),
    ("TEXT_MESSAGE_START", "first text (resumed)"),
    ("RUN_FINISHED", "RUN_FINISHED"),
    ("POST", "the POST's response"),
)


async def measure(checkouts: list[Path], iterations: int, workdir: Path) -> None:
    secret = secrets.token_urlsafe(32)
    names = [f"{n}:{path.name}" for n, path in enumerate(checkouts, 1)]
    with contextlib.ExitStack() as started:
        running: dict[str, servers.Server] = {}
        for n, (name, path) in enumerate(zip(names, checkouts, strict=True), 1):
            own = workdir / str(n)
            own.mkdir()
            running[name] = started.enter_context(
                servers.hostcall(own, own / "rt.db", secret, root=path)
            )
        running["floor"] = started.enter_context(servers.floor(workdir))
        results: dict[str, list[dict[str, float]]] = {name: [] for name in running}
        async with contextlib.AsyncExitStack() as opened:
            sides = {}
            for name, server in running.items():
                http = await opened.enter_async_context(client_for(server))
                raw = await RawHttp.open(server.port)
                opened.callback(raw.close)
                sides[name] = Side(http, server.port, raw)
            for i in range(WARMUP + iterations):
                turn = names[i % len(names) :] + names[: i % len(names)]
                for name in [*turn, "floor"]:
                    async with asyncio.timeout(ITERATION_TIMEOUT):
                        if name == "floor":
                            found = await floor_iteration(sides[name], f"ab{i}")
                        else:
                            found = await hostcall_iteration(sides[name])
                    if i >= WARMUP:
                        results[name].append(found)
    floor = {
        "echo": summary([r["echo"] for r in results["floor"]]),
        "POST": summary([r["POST"] for r in results["floor"]]),
    }
    rows = []
    for name in names:
        for key, label in MARKS:
            mine = summary([r[key] for r in results[name]])
            base = floor["POST" if key == "POST" else "echo"]
            for stat in ("p50", "p99"):
                rows.append(
                    (
                        name,
                        f"{label}, {stat}",
                        ms(mine[stat]),
                        ms(base[stat]),
                        f"{mine[stat] / base[stat]:.2f}x",
                    )
                )
    print_table(
        f"Tool round trip, raw asyncio client, n={iterations} each after {WARMUP} "
        "warm-up, checkouts interleaved",
        rows,
        [
            "every row compares with the floor's echo event, the POST rows with the echo "
            "POST's response (section 1b of server_bench.py)"
        ],
        header=("checkout", "measure", "hostcall", "floor", "ratio"),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="round trips per server")
    parser.add_argument("checkouts", nargs="+", type=Path)
    args = parser.parse_args()
    main_module = Path("server", "hostcall", "__main__.py")
    missing = [str(c) for c in args.checkouts if not (c / main_module).is_file()]
    if missing:
        parser.error(f"not a Hostcall checkout: {', '.join(missing)}")
    print(f"load average at start: {servers_load()}")
    try:
        with tempfile.TemporaryDirectory(prefix="hostcall-ab-") as tmp:
            asyncio.run(measure([c.resolve() for c in args.checkouts], args.n, Path(tmp)))
    except Exception as exc:
        print(f"!! the round trips failed to run: {exc!r}", file=sys.stderr)
        return 1
    print(f"load average at end: {servers_load()}")
    return 0


def servers_load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


if __name__ == "__main__":
    raise SystemExit(main())
