"""What the server does for one raw round trip (section 1b), counted rather than timed.

A Hostcall server (this checkout, or CHECKOUT) runs under a wrapper that records only
between two signals the client sends: SIGUSR1 once it has parsed the call, before it
POSTs the result, and SIGUSR2 once it has read ``RUN_FINISHED`` and the POST's response.
The marks are the server's own: the result POST's bytes arriving, and its writes of
``TOOL_CALL_RESULT``, of the resumed ``TEXT_MESSAGE_START``, of the POST's response and of
``RUN_FINISHED``. Counts move far less than milliseconds on a shared machine.

Modes:
- ``calls``: Python function calls per round trip (cProfile) and the functions that make
  most of them (``--top``, ``--sort``, ``--callees``, ``--callers``); with ``--until``
  (and ``--since``) only between two marks;
- ``tree``: between ``--since`` and ``--until``, the calls made inside each function
  (inclusive counts: where a segment's calls go);
- ``marks``: calls and microseconds from the POST's arrival to each mark (counted with
  ``sys.setprofile``, which slows them: compare them with each other, not with the bench);
- ``times``: the marks' microseconds with nothing counted, medians;
- ``steps``, ``step-times``: the event loop's steps between the marks, in order;
- ``sql``: the SQLite statements of a round trip, with when each began;
- ``before-post``: what the loop runs from its write of the call's dispatch to its read of
  the result POST (the client's turn): a POST that lands while a step runs waits for it,
  and the client's clock counts that wait where the other modes do not look.

Usage: .venv/bin/python bench/round_trip_profile.py [-n 50] [--mode MODE] [--since MARK]
[--until MARK] [CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import runpy
import secrets
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MARKS = (
    (b"event: TOOL_CALL_RESULT", "TOOL_CALL_RESULT"),
    (b"event: TEXT_MESSAGE_START", "first text (resumed)"),
    (b"HTTP/1.1 200", "the POST's response"),
    (b"event: RUN_FINISHED", "RUN_FINISHED"),
)
WARMUP = 10
MODES = ("calls", "marks", "times", "sql", "steps", "step-times", "tree", "segments", "before-post")


# ---- inside the server's process ----------------------------------------------------------


def serve(mode: str, out: Path, argv: list[str], until: str, since: str) -> None:
    """Run ``hostcall`` with ``argv``, recording as ``mode`` between SIGUSR1 and SIGUSR2
    (``calls`` with ``until``: from the POST's arrival to that mark only)."""
    import asyncio.selector_events as selector_events

    from uvicorn.protocols.http.h11_impl import H11Protocol

    profile = cProfile.Profile()
    state: dict[str, Any] = {"on": False, "calls": 0, "rounds": []}
    round_marks: list[tuple[str, float, int]] = []

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            state["calls"] += 1

    inclusive: dict[str, int] = {}
    stack: list[str] = []

    def tree(frame: Any, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            if event == "call":
                code = frame.f_code
                path = code.co_filename.rsplit("site-packages/", 1)[-1].rsplit("server/", 1)[-1]
                key = f"{path}:{code.co_firstlineno}({code.co_name})"
            else:
                key = f"<{getattr(arg, '__qualname__', arg)}>"
            for k in set(stack):
                inclusive[k] = inclusive.get(k, 0) + 1
            inclusive[key] = inclusive.get(key, 0) + 1
            stack.append(key)
        elif stack:
            stack.pop()

    def mark(name: str) -> None:
        if state["on"] and all(n != name for n, _, _ in round_marks):
            round_marks.append((name, time.perf_counter(), state["calls"]))
            if until and mode == "calls":
                if name == since:
                    profile.enable()
                elif name == until:
                    profile.disable()
            if until and mode == "tree":
                if name == since:
                    stack.clear()
                    sys.setprofile(tree)
                elif name == until:
                    sys.setprofile(None)

    write = selector_events._SelectorSocketTransport.write

    def watched_write(self: Any, data: Any) -> None:
        if mode == "before-post" and b"tool_call_dispatch" in bytes(data[:4096]):
            after_dispatch.clear()
            watch["since"] = time.perf_counter()
        if state["on"] and round_marks:
            head = bytes(data[:4096])
            for needle, name in MARKS:
                if needle in head:
                    mark(name)
        write(self, data)

    selector_events._SelectorSocketTransport.write = watched_write  # type: ignore[method-assign]
    received = H11Protocol.data_received

    def watched_received(self: Any, data: bytes) -> None:
        if state["on"] and data.startswith(b"POST /api/calls/"):
            mark("POST arrives")
            if watch["since"]:
                state["rounds"].append([watch["since"], time.perf_counter(), list(after_dispatch)])
                watch["since"] = 0.0
        received(self, data)

    H11Protocol.data_received = watched_received  # type: ignore[method-assign]
    statements: list[str] = []
    connect = sqlite3.connect

    def statement(sql: str) -> None:
        at = (time.perf_counter() - round_marks[0][1]) * 1e6
        statements.append(f"[{len(round_marks)}] {at:6,.0f} us {' '.join(sql.split())[:120]}")

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(
            lambda sql: statement(sql) if state["on"] and round_marks else None
        )
        return connection

    if mode == "sql":
        sqlite3.connect = traced_connect

    class Marking(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            name = " ".join(sql.split()[:4])[:40]
            mark_each(name)
            cursor = super().execute(sql, *args)
            mark_each(f"{name} (done)")
            return cursor

    def marking_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(*args, **kwargs, factory=Marking)

    if mode == "segments":
        sqlite3.connect = marking_connect

    run_handle = asyncio.events.Handle._run

    def traced_run(self: Any) -> None:
        if state["on"] and round_marks:
            round_marks.append((f"step {_step(self)}", time.perf_counter(), state["calls"]))
        run_handle(self)

    if mode in ("steps", "step-times"):
        asyncio.events.Handle._run = traced_run  # type: ignore[method-assign]

    # before-post: each step from the dispatch's write to the POST's read, with its end.
    after_dispatch: list[tuple[str, float, float]] = []
    watch = {"since": 0.0}

    def timed_run(self: Any) -> None:
        began = time.perf_counter()
        run_handle(self)
        if watch["since"]:
            # The step that wrote the dispatch counts from the write.
            after_dispatch.append((_step(self), max(began, watch["since"]), time.perf_counter()))

    if mode == "before-post":
        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]

    seen: dict[str, int] = {}

    def mark_each(name: str) -> None:
        """``mark``, once per time it is reached (a second BEGIN is ``BEGIN #2``)."""
        if state["on"] and round_marks:
            seen[name] = seen.get(name, 0) + 1
            mark(name if seen[name] == 1 else f"{name} #{seen[name]}")

    if mode == "segments":
        _watch_segments(mark_each)

    def start(signum: int, frame: Any) -> None:
        round_marks.clear()
        statements.clear()
        seen.clear()
        state["on"], state["calls"] = True, 0
        if mode == "calls" and not until:
            profile.enable()
        elif mode in ("marks", "steps"):
            sys.setprofile(count)

    def stop(signum: int, frame: Any) -> None:
        if mode == "calls":
            profile.disable()
        elif mode in ("marks", "steps"):
            sys.setprofile(None)
        state["on"] = False
        if mode != "before-post":
            state["rounds"].append(list(round_marks) if mode != "sql" else list(statements))
        if mode == "calls":
            profile.dump_stats(str(out))
        elif mode == "tree":
            out.write_text(json.dumps(inclusive))
        else:
            out.write_text(json.dumps(state["rounds"]))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["hostcall", *argv]
    runpy.run_module("hostcall", run_name="__main__", alter_sys=True)


def _step(handle: Any) -> str:
    """A loop step's name: its task's coroutine, else its callback."""
    callback = getattr(handle._callback, "__self__", None)
    coro = callback.get_coro() if isinstance(callback, asyncio.Task) else None
    return getattr(coro, "__qualname__", None) or repr(handle._callback)[:80]


def _watch_segments(mark: Any) -> None:
    """``segments``: marks where the result POST's handler passes from one part to the next
    (each first time in a round trip), timed with nothing else recorded."""
    from starlette.applications import Starlette
    from starlette.routing import Router

    import hostcall.call_answers as call_answers
    from hostcall.engine import Engine
    from hostcall.store.sqlite.connection import _Transaction
    from hostcall.tokens import Tokens

    # Where the request's own task begins (uvicorn has parsed it and started the task), and
    # where the middleware hands it to the router: the layers' share of the wait before the
    # handler starts.
    app_call, router_call = Starlette.__call__, Router.__call__

    async def watched_app(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/calls/"):
            mark("app called")
        await app_call(self, scope, receive, send)

    async def watched_router(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/calls/"):
            mark("router called")
        await router_call(self, scope, receive, send)

    Starlette.__call__ = watched_app  # type: ignore[method-assign]
    Router.__call__ = watched_router  # type: ignore[method-assign]
    read_body = call_answers.read_body

    async def watched_body(*args: Any, **kwargs: Any) -> Any:
        mark("handler starts")
        body = await read_body(*args, **kwargs)
        mark("body read")
        return body

    call_answers.read_body = watched_body  # type: ignore[assignment]
    verify = Tokens.verify

    def watched_verify(self: Any, *args: Any, **kwargs: Any) -> Any:
        claims = verify(self, *args, **kwargs)
        mark("token verified")
        return claims

    Tokens.verify = watched_verify  # type: ignore[method-assign]
    enter, leave = _Transaction.__aenter__, _Transaction.__aexit__

    async def watched_enter(self: Any) -> None:
        mark("BEGIN sent")
        await enter(self)
        mark("BEGIN done")

    async def watched_leave(self: Any, *args: Any) -> None:
        if not self.joined:
            mark("COMMIT sent")
        await leave(self, *args)
        if not self.joined:
            mark("COMMIT done")

    _Transaction.__aenter__ = watched_enter  # type: ignore[method-assign]
    _Transaction.__aexit__ = watched_leave  # type: ignore[method-assign]
    follow = Engine.follow

    async def watched_follow(self: Any, outcome: Any) -> Any:
        mark("published")
        return await follow(self, outcome)

    Engine.follow = watched_follow  # type: ignore[method-assign]


# ---- the client -----------------------------------------------------------------------------


async def drive(
    root: Path, mode: str, marks: tuple[str, str], iterations: int, workdir: Path, out: Path
) -> None:
    import servers
    from clients import RawHttp, client_for
    from round_trip import Side, hostcall_iteration

    argv = servers.serve_argv(workdir, workdir / "rt.db", root)[3:]  # after "-m hostcall"
    wrapper = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--serve",
        mode,
        str(out),
        *marks,
        "--",
    ]
    env = dict(
        os.environ,
        HOSTCALL_SECRET_KEYS=secrets.token_urlsafe(32),
        PYTHONPATH=os.pathsep.join([str(root / "server"), str(Path(__file__).parent)]),
    )
    with servers.running("hostcall", [*wrapper, *argv], workdir, env, cwd=root) as server:
        async with client_for(server) as http:
            raw = await RawHttp.open(server.port)
            try:
                side = Side(http, server.port, raw)
                pid = server.proc.pid
                for i in range(WARMUP + iterations):
                    hook = (lambda: os.kill(pid, signal.SIGUSR1)) if i >= WARMUP else None
                    await hostcall_iteration(side, before_answer=hook)
                    if hook is not None:
                        os.kill(pid, signal.SIGUSR2)
                        await asyncio.sleep(0.05)  # the server's handler writes the file
            finally:
                raw.close()
        server.check_alive()


def report(
    mode: str, out: Path, iterations: int, top: int, sort: str, callees: str, callers: str = ""
) -> None:
    if mode == "calls":
        stats = pstats.Stats(str(out))
        total = sum(nc for _, nc, _, _, _ in stats.stats.values())  # type: ignore[attr-defined]
        print(f"Python function calls per round trip: {total / iterations:,.0f}")
        tasks = sum(
            nc
            for (file, _, name), (_, nc, _, _, _) in stats.stats.items()  # type: ignore[attr-defined]
            if name == "create_task"
        )
        steps = sum(
            nc
            for (file, _, name), (_, nc, _, _, _) in stats.stats.items()  # type: ignore[attr-defined]
            if name == "_run" and file.endswith("asyncio/events.py")
        )
        print(f"event-loop callbacks run: {steps / iterations:.1f}, tasks created: "
              f"{tasks / iterations:.1f}")  # fmt: skip
        stats.sort_stats(sort).print_stats(top)
        if callees:
            stats.print_callees(callees)
        if callers:
            stats.print_callers(callers)
        return
    rounds = json.loads(out.read_text())
    if mode == "before-post":
        report_before_post(rounds)
        return
    if mode == "tree":
        print("calls made inside each function (inclusive), per round trip, between the marks")
        ranked = sorted(rounds.items(), key=lambda kv: -kv[1])
        for key, n in ranked[:top]:
            if not callees or callees in key:
                print(f"  {n / iterations:8,.1f}  {key}")
        return
    if mode in ("steps", "step-times", "segments"):
        print("the last round trip's loop steps and marks: calls and us since the POST arrived")
        shapes: dict[tuple[str, ...], list[Any]] = {}
        for r in rounds:
            shapes.setdefault(tuple(n for n, _, _ in r), []).append(r)
        shape, alike = max(shapes.items(), key=lambda kv: len(kv[1]))
        print(f"the most common sequence ({len(alike)} of {len(rounds)}), medians:")
        for i, name in enumerate(shape):
            us = statistics.median((r[i][1] - r[0][1]) * 1e6 for r in alike)
            calls = statistics.median(r[i][2] - r[0][2] for r in alike)
            print(f"  {calls:6,.0f}  {us:7,.0f}  {name}")
        return
    if mode == "sql":
        print("statements of a round trip, [n]: after the nth mark (1: the POST's arrival), "
              "median us from it")  # fmt: skip
        alike = [r for r in rounds if len(r) == len(rounds[-1])]
        for i, line in enumerate(rounds[-1]):
            at = statistics.median(float(r[i].split(" us ")[0].split("]")[1].replace(",", ""))
                                   for r in alike)  # fmt: skip
            mark, _, sql = line.partition(" us ")
            print(f"  {mark.split(']')[0]}] {at:7,.0f} us {sql}")
        print(f"statements per round trip: {statistics.mean(len(r) for r in rounds):.1f}")
        return
    print(f"n={len(rounds)}; from the result POST's bytes arriving, medians:")
    names = ["POST arrives", *(name for _, name in MARKS)]
    for name in names[1:]:
        found = [
            (t - r[0][1], c - r[0][2])
            for r in rounds
            if r and r[0][0] == "POST arrives"
            for n, t, c in r
            if n == name
        ]
        if not found:
            print(f"  {name}: not seen")
            continue
        us = statistics.median(t for t, _ in found) * 1e6
        calls = statistics.median(c for _, c in found)
        extra = f", {calls:,.0f} calls" if mode == "marks" else ""
        print(f"  {name}: {us:,.0f} us{extra} (seen {len(found)})")


def report_before_post(rounds: list[Any]) -> None:
    """Medians over the round trips: the client's turn on the server's clock, how much of it
    the loop was busy, and the steps that ran (by name)."""
    turn = [(posted - wrote) * 1e6 for wrote, posted, _ in rounds]
    busy = [sum(end - began for _, began, end in steps) * 1e6 for _, _, steps in rounds]
    # A POST read right after a step ended (within 30 us) may have waited for that step.
    held = [
        steps[-1][0]
        for _, posted, steps in rounds
        if steps and (posted - steps[-1][2]) * 1e6 < 30 and steps[-1][2] - steps[-1][1] > 30e-6
    ]
    print(f"n={len(rounds)}; from the dispatch's write to the result POST's read, medians:")
    print(f"  the client's turn: {statistics.median(turn):,.0f} us")
    print(f"  the loop busy in it: {statistics.median(busy):,.0f} us "
          f"(mean {statistics.mean(busy):,.0f})")  # fmt: skip
    print(f"  POSTs read right after a step of 30 us or more: {len(held)} of {len(rounds)}")
    for name in sorted(set(held), key=held.count, reverse=True):
        print(f"    {held.count(name):4}  after {name[:90]}")
    spent: dict[str, list[float]] = {}
    for _, _, steps in rounds:
        per: dict[str, float] = {}
        for name, began, end in steps:
            per[name] = per.get(name, 0.0) + (end - began) * 1e6
        for name, us in per.items():
            spent.setdefault(name, []).append(us)
    print("  steps (rounds seen, median us when seen, total us over all rounds):")
    for name, values in sorted(spent.items(), key=lambda kv: -sum(kv[1]))[:15]:
        print(f"    {len(values):4}  {statistics.median(values):7,.0f}  {sum(values):9,.0f}  "
              f"{name[:90]}")  # fmt: skip


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        mode, out, until, since = sys.argv[2], Path(sys.argv[3]), sys.argv[4], sys.argv[5]
        serve(mode, out, sys.argv[7:], until, since)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=50, help="round trips recorded")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="calls",
    )
    parser.add_argument("--top", type=int, default=30, help="functions listed (calls)")
    parser.add_argument(
        "--sort", default="tottime", help="calls: pstats' order (cumulative, ncalls…)"
    )
    parser.add_argument("--callers", default="", help="calls: what calls functions matching this")
    parser.add_argument(
        "--callees", default="", help="calls: list what functions matching this call"
    )
    parser.add_argument(
        "--since",
        choices=["POST arrives", *(name for _, name in MARKS)],
        default="POST arrives",
        help="calls with --until: count from this mark",
    )
    parser.add_argument(
        "--until",
        choices=[name for _, name in MARKS],
        default="",
        help="calls: count from the result POST's arrival to this mark only",
    )
    parser.add_argument("checkout", nargs="?", type=Path, default=Path(__file__).parent.parent)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostcall-profile-") as tmp:
        out = Path(tmp) / "profile.out"
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                drive(
                    args.checkout.resolve(),
                    args.mode,
                    (args.until, args.since),
                    args.n,
                    Path(tmp),
                    out,
                )
            )
        report(args.mode, out, args.n, args.top, args.sort, args.callees, args.callers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
