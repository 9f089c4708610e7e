"""Hostcall browser benchmark: Debian's Chromium, headless, driven by Playwright.

1. Weight: the loader and everything the widget loads on open, gzipped, as the browser got it.
2. Host-page cost: main-thread time a page pays for the snippet before the widget is opened.
3. Tool round trip: server emits the call -> the page's handler answers -> server has the
   validated result; floor: SSE event -> POST echo -> SSE event, same browser, same run.
4. Page tool: the same round trip for a tool the page registered with WebMCP, against the
   agent file's client tool, in one widget (bench/page_tool_bench.py).
5. Attachment: an image sent with a message, Send -> the model's first byte in the widget,
   against a text-only message in the same widget (bench/attach_bench.py).

Usage: .venv/bin/python bench/browser_bench.py [--quick]
A measurement: exits 0 when a target is missed, 1 when a section failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import queue
import secrets
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import servers
from attach_bench import attachment
from page_tool_bench import page_tool
from playwright.sync_api import Browser, Page, Response, sync_playwright
from report import compare, ms, print_table, summary
from streams import RawStream

from hostcall.qa.plugin import CHROMIUM_ARGS
from hostcall.qa.weight import LOADER_BUDGET, WIDGET_BUDGET, OpenWidget, Weighed, gzipped, weigh

CHROMIUM = "/usr/bin/chromium"  # Debian's; never Playwright's download (tests/e2e/conftest.py)
ASK = "What should I work on next?"  # the planner's read_board_tasks rule: no approval
# The planner's count_tasks rule: the tool its page_tools block admits (a read, no approval),
# which bench/pages/webmcp.html registers with WebMCP.
PAGE_ASK, PAGE_TOOL = "How many tasks are done?", "count_tasks"
AGENT = "bench"  # servers.bench_agents: a copy of demo/agents/planner.json
HOST_COST_BUDGET = 0.010
DISPATCH = "hostcall.tool_call_dispatch"
TARGETS = {"p50": 2.0, "p99": 3.0}  # the round trip's, x the floor (PRODUCT.md)
GREETING = "hello"  # the planner's greeting rule: a reply, no tool
TURNS = 10  # round trips per conversation, then a fresh widget (the widget slows as it grows)
TIMEOUT = 10.0
# Stamps on one clock for every frame (timeOrigin + now, ms since the epoch): in the widget's
# frame, when each hostcall.tool_call_dispatch reaches its JS (one more listener on its
# EventSource) and when the page's hostcall:result for a call reaches it; in the host page,
# when each hostcall:call reaches it. Both travel on the widget's MessageChannel: the listeners
# go on its ports (the widget's, made by the MessageChannel it constructs; the page's, handed
# over with the hello), added before the page's and the widget's own, so they stamp arrival,
# before any handling. And, where the browser has WebMCP, the host page's getTools() calls
# are counted (section 4: how often the bridge lists the page's tools). Nothing else is added.
PROBE = """window.benchAt = () => performance.timeOrigin + performance.now()
const benchOn = (port, type, into) => port.addEventListener('message', e => {
  if (e.data?.type === type) into[e.data.callId] = benchAt() })
if (location.pathname.startsWith('/widget/')) {
  window.benchDispatched = {}
  window.benchResults = {}
  window.MessageChannel = class extends MessageChannel { constructor () { super()
    benchOn(this.port1, 'hostcall:result', benchResults) } }
  window.EventSource = class extends EventSource { constructor (...args) { super(...args)
    this.addEventListener('hostcall.tool_call_dispatch', e => {
      benchDispatched[JSON.parse(e.data).value.toolCallId] = benchAt() }) } }
} else if (location.pathname === '/pages/host.html') {
  window.benchCalls = {}
  window.benchLists = 0
  const mc = document.modelContext, list = mc?.getTools
  if (list) mc.getTools = (...args) => (benchLists++, list.apply(mc, args))
  addEventListener('message', e => {
    const port = e.data?.type === 'hostcall:hello' && e.ports[0]
    if (port) benchOn(port, 'hostcall:call', benchCalls)
  }, true)
}"""
# Resource Timing of the POSTs whose URL contains ``part``, in order, on the PROBE's clock:
# [URL, fetch called, request sent, response starts, response ends, 1 if it opened a connection].
POSTS = """part => performance.getEntriesByType('resource').filter(e => e.name.includes(part))
  .map(e => [e.name, ...[e.startTime, e.requestStart, e.responseStart, e.responseEnd]
    .map(t => t + performance.timeOrigin), e.connectEnd > e.connectStart ? 1 : 0])"""
# Per call id: dispatch and result (PROBE), post (POSTS of its /api/calls/{id}/result).
TIMINGS = """() => { const out = {}, posts = {}
  for (const [url, ...post] of (POSTS)('/result')) posts[url.split('/').at(-2)] = post
  for (const [id, at] of Object.entries(benchDispatched))
    out[id] = { dispatch: at, result: benchResults[id], post: posts[id] }
  return out }""".replace("POSTS", POSTS)


@dataclass(frozen=True, kw_only=True)
class Mode:
    loads: int  # host-page loads per variant (with / without the snippet)
    round_trips: int
    warmup: int
    profiled: int  # more round trips, under the CPU profiler (not timed)


FULL = Mode(loads=30, round_trips=100, warmup=10, profiled=10)
QUICK = Mode(loads=10, round_trips=20, warmup=5, profiled=5)


@dataclass
class Env:
    browser: Browser
    apps: servers.Server  # bench/browser_apps.py: the floor app plus bench/pages
    hc: servers.Server
    probe: str = ""  # one more init script for each page (section 4's steps in the page)

    def host_page(self, snippet: bool, *, webmcp: bool = False, agent: str = AGENT) -> str:
        """``webmcp``: the page registers a tool of its own too (bench/pages/webmcp.html)."""
        # localhost, while Hostcall is on 127.0.0.1: two sites, as on a customer's page.
        return (
            f"http://localhost:{self.apps.port}/pages/host.html"
            f"?snippet={int(snippet)}&webmcp={int(webmcp)}&hc={self.hc.url}&agent={agent}"
        )

    def new_page(self) -> Page:  # in a context of its own: empty cache and storage
        page = self.browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        if self.probe:
            page.context.add_init_script(self.probe)
        page.set_default_timeout(TIMEOUT * 1000)
        return page


def table(
    title: str, header: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> None:
    """A table with a header of the section's own."""
    print_table(title, rows, notes, header=header)


def origin(url: str) -> str:
    return "{0.scheme}://{0.netloc}".format(urlsplit(url))


# ---- 1. weight -----------------------------------------------------------------------------


def weight(env: Env) -> None:
    page = env.new_page()
    seen, done = [], []
    page.on("request", lambda r: seen.append(r))
    page.on("requestfinished", lambda r: done.append(r))
    page.goto(env.host_page(True))
    page.click("[data-part=hostcall-launcher]")  # hover mounts the iframe, the click opens it
    page.wait_for_function("bench.ready")
    page.wait_for_timeout(1000)  # anything the widget fetches late
    own = (env.hc.url, origin(env.host_page(True)))
    third = [r.url for r in seen if origin(r.url) not in own and not r.url.startswith("data:")]
    opened = len(done)
    # Then the first tool call: what the widget imports only now (toolcalls.js and the rest).
    frame = page.frame_locator("[data-part=hostcall-frame]")
    frame.locator("[data-part=composer-input]").fill(ASK)
    frame.locator("[data-part=composer-input]").press("Enter")
    frame.locator("[data-part=tool-call][data-state=done]").wait_for()
    page.wait_for_timeout(500)

    files, later = weigh(done[:opened], env.hc.url), weigh(done[opened:], env.hc.url)
    page.context.close()
    first_call = {f.path: f for f in later if not f.path.startswith("/api/")}  # each file once
    widget = OpenWidget.of(files)

    def row(label: str, entries: Sequence[Weighed], budget: int | None) -> tuple[str, ...]:
        raw, gz, sent = sum(f.raw for f in entries), gzipped(entries), sum(f.sent for f in entries)
        enc = entries[0].encoding if len(entries) == 1 else ""
        goal = "-" if budget is None else f"<= {budget:,} B"
        verdict = "info" if budget is None else "ok" if gz <= budget else "MISSED"
        return (label, f"{raw:,} B", f"{gz:,} B", f"{sent:,} B {enc}".strip(), goal, verdict)

    rows = [
        row("/embed.js (loader)", widget.loader, LOADER_BUDGET),
        *(row(f.path, [f], None) for f in widget.frame),
        row(f"widget in the iframe, {len(widget.frame)} files", widget.frame, None),
        row("whole widget: loader + iframe", widget.whole, WIDGET_BUDGET),
        row(
            f"then with the first message, {len(first_call)} files", list(first_call.values()), None
        ),
        ("third-party requests", str(len(third)), "", "", "0", "MISSED" if third else "ok"),
    ]
    table(
        "1. Weight, as Chromium loaded it: host page, hover + click the launcher, widget ready "
        "(then one tool call)",
        ("file", "raw", "gzip -9", "sent (Content-Length)", "target", "verdict"),
        rows,
        [
            "1 KB = 1,024 B; targets: loader 3 KB, whole widget 30 KB gzipped (big vendors: "
            "130-600 KB); the open event stream is not counted",
            f"also on open, API JSON: {len(widget.data)} requests, "
            f"{sum(f.sent for f in widget.data):,} B sent "
            f"({', '.join(f.path.rsplit('/', 1)[-1] for f in widget.data)}); "
            f"third-party: {third or 'none'}",
            "imported with the first message and its tool call, not on open: "
            f"{', '.join(sorted(p.rsplit('/', 1)[-1] for p in first_call))}",
        ],
    )


# ---- 2. host-page cost ---------------------------------------------------------------------


def load_metrics(env: Env, snippet: bool) -> dict[str, float]:
    """Chromium's Performance.getMetrics for one load in a fresh context (cold cache), and
    ``Requests``: how many went to Hostcall."""
    page = env.new_page()
    try:
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if r.url.startswith(env.hc.url) else None)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(env.host_page(snippet), wait_until="load")  # the async loader has run by then
        page.wait_for_timeout(300)
        # Read before anything is evaluated in the page: Playwright's own scripts would count.
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        launcher = page.evaluate("!!document.querySelector('[data-part=hostcall-launcher]')")
        if launcher != snippet or len(page.frames) != 1:
            raise RuntimeError(f"snippet={snippet}: launcher {launcher}, {len(page.frames)} frames")
        return metrics | {"Requests": len(asked)}
    finally:
        page.context.close()


def host_cost(env: Env, mode: Mode) -> None:
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for i in range(2 + mode.loads):  # 2 warm-up pairs; the order alternates within pairs
        for snippet in (True, False) if i % 2 else (False, True):
            metrics = load_metrics(env, snippet)
            if i >= 2:
                runs[snippet].append(metrics)
    rows = []
    for label, key, judged in (
        ("JS run (ScriptDuration, wall)", "ScriptDuration", True),
        ("main-thread CPU (ThreadTime)", "ThreadTime", True),
        ("main-thread tasks (TaskDuration, wall)", "TaskDuration", False),
        ("layout (LayoutDuration)", "LayoutDuration", False),
        # Counts, which the machine's load does not change: what the snippet made Chromium do.
        ("DOM nodes", "Nodes", False),
        ("layouts (LayoutCount)", "LayoutCount", False),
        ("style recalculations (RecalcStyleCount)", "RecalcStyleCount", False),
        ("JS event listeners", "JSEventListeners", False),
        ("requests to Hostcall", "Requests", False),
    ):
        on, off = (statistics.median(m[key] for m in runs[s]) for s in (True, False))
        if not key.endswith("Duration") and key != "ThreadTime":
            rows.append((label, f"{on:.0f}", f"{off:.0f}", f"{on - off:+.0f}", "-", "info"))
        else:
            verdict = "info" if not judged else "ok" if on - off < HOST_COST_BUDGET else "MISSED"
            rows.append(
                (
                    label,
                    ms(on),
                    ms(off),
                    f"{(on - off) * 1000:+.2f} ms",
                    "< 10 ms" if judged else "-",
                    verdict,
                )
            )
    table(
        f"2. Host-page cost before the widget is opened, median of {mode.loads} loads each",
        ("CDP Performance.getMetrics", "with snippet", "without", "delta", "target", "verdict"),
        rows,
        [
            "the same page with and without the README snippet (stub, one handler, async "
            "/embed.js); each load in a fresh context (cold cache), read 300 ms after 'load'",
            "wall times include waiting for a core (2 cores, shared with the servers)",
        ],
    )


# ---- 3. tool round trip --------------------------------------------------------------------

Events = queue.Queue[tuple[float, str, str]]


class Observer:
    """SSE streams the bench reads in a thread of its own; events stamped on arrival."""

    def __init__(self) -> None:
        # perf_counter -> ms since the epoch, the frames' clock (timeOrigin + now): to time
        # an event's way from the server to a page's JS against its arrival here.
        self.epoch_ms = 1000 * (time.time() - time.perf_counter())
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.pumps: list[asyncio.Task[None]] = []

    def follow(self, port: int, path: str) -> Events:
        events: Events = queue.Queue()

        async def pump(stream: RawStream) -> None:
            try:
                async for kind, data in stream.events():
                    events.put((time.perf_counter(), kind, data))
            finally:
                stream.close()

        async def start() -> None:
            stream = await RawStream.open(servers.HOST, port, path)
            self.pumps.append(asyncio.create_task(pump(stream)))

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(TIMEOUT)
        time.sleep(0.3)  # replayed events, if any, are dropped
        while not events.empty():
            events.get_nowait()
        return events

    def close(self) -> None:
        async def stop() -> None:
            for task in self.pumps:
                task.cancel()
            await asyncio.gather(*self.pumps, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)
        self.loop.close()


def until(events: Events, last: str) -> dict[str, tuple[float, str]]:
    """(arrival time, data) of the first event of each type, up to the first ``last``."""
    seen: dict[str, tuple[float, str]] = {}
    deadline = time.monotonic() + TIMEOUT
    while last not in seen:
        try:
            at, kind, data = events.get(timeout=max(0.001, deadline - time.monotonic()))
        except queue.Empty:
            raise RuntimeError(f"no {last} within {TIMEOUT} s; got {sorted(seen)}") from None
        if kind == "RUN_ERROR":
            raise RuntimeError(f"the run failed: {data}")
        seen.setdefault(kind, (at, data))
    return seen


def _posted(path_end: str) -> Callable[[Response], bool]:
    return lambda r: r.request.method == "POST" and urlsplit(r.url).path.endswith(path_end)


class Widget:
    """A fresh host page with the widget open, the conversation its first message created
    (a greeting, no tool: the widget makes its conversation with the first message, not on
    open), and the bench's own stream on it, opened once that run is over. ``webmcp``: the
    page registers its own tool too, and the server has admitted it before the first run."""

    def __init__(self, env: Env, observer: Observer, *, webmcp: bool = False) -> None:
        self.page = env.new_page()
        self.page.context.add_init_script(PROBE)
        self.page.goto(env.host_page(True, webmcp=webmcp))
        self.page.evaluate("Hostcall('open')")
        self.page.wait_for_function("bench.ready")
        self.frame = next(f for f in self.page.frames if f"/widget/{AGENT}" in f.url)
        # The page's tool goes to the server with the surface's first capabilities: a run
        # started before they are in would plan without it.
        offering = self.page.expect_response(_posted("/capabilities")) if webmcp else nullcontext()
        with (
            self.page.expect_response(_posted(f"/api/agents/{AGENT}/conversations")) as made,
            self.page.expect_response(_posted("/messages")) as sent,
            offering as offered,
        ):
            self.page.evaluate(f"Hostcall('send', {json.dumps(GREETING)})")
        if sent.value.status != 202:
            raise RuntimeError(f"the widget's first message answered {sent.value.status}")
        if offered is not None:
            admitted = [t["name"] for t in offered.value.json().get("pageTools", [])]
            if admitted != [PAGE_TOOL]:
                raise RuntimeError(f"the page's tool was not admitted: {offered.value.json()}")
        conv = made.value.json()
        # The greeting's run is over when the widget says so: the bench's runs must not
        # meet it (409 run_in_progress).
        self.frame.locator("html[data-agent-state=idle]").wait_for(
            state="attached", timeout=TIMEOUT * 1000
        )
        self.path = f"/api/conversations/{conv['conversationId']}"
        self.auth = {"Authorization": f"Bearer {conv['sessionToken']}"}
        self.http = httpx.Client(base_url=env.hc.url, timeout=TIMEOUT, trust_env=False)
        token = self.http.post(f"{self.path}/stream-token", headers=self.auth).json()
        self.events = observer.follow(
            env.hc.port, f"{self.path}/events?token={token['streamToken']}"
        )

    def ask(self, text: str = ASK) -> tuple[float, str, float]:
        """One run (posted by the bench, as the widget would); DISPATCH -> RESULT, call id,
        and when DISPATCH reached the observer (perf_counter). ``text``: ASK calls the
        agent file's client tool, PAGE_ASK the page's own (WebMCP) tool."""
        self.http.post(
            f"{self.path}/messages", json={"text": text}, headers=self.auth
        ).raise_for_status()
        seen = until(self.events, "RUN_FINISHED")
        call = json.loads(seen[DISPATCH][1])["value"]
        outcome = json.loads(seen["TOOL_CALL_RESULT"][1])
        page_tool = call.get("pageTool") is True
        if (
            call["route"] != "handler"
            or outcome["state"] != "answered"
            or (page_tool != (text == PAGE_ASK))
        ):
            raise RuntimeError(f"not answered by the page's handler: {call} -> {outcome}")
        return (
            seen["TOOL_CALL_RESULT"][0] - seen[DISPATCH][0],
            call["toolCallId"],
            seen[DISPATCH][0],
        )

    def close(self, runs: int, page_runs: int = 0) -> dict[str, dict[str, Any]]:
        """The widget's timings per call id (TIMINGS); checks the handler ran ``runs`` times
        (and the page's WebMCP tool ``page_runs``)."""
        handled, timings = self.page.evaluate("bench.calls"), self.frame.evaluate(TIMINGS)
        executed = self.page.evaluate("window.benchPageCalls || 0")
        self.lists: int = self.page.evaluate("benchLists")  # PROBE: the page's getTools()
        for call_id, at in self.page.evaluate("benchCalls").items():  # PROBE, host page
            timings[call_id]["call"] = at
        self.http.close()
        self.page.context.close()
        if handled != runs:
            raise RuntimeError(f"the page's handler ran {handled} times for {runs} calls")
        if executed != page_runs:
            raise RuntimeError(f"the page's WebMCP tool ran {executed} times for {page_runs}")
        return timings  # type: ignore[no-any-return]


# Where a round trip goes: label, seconds from (TIMINGS of the call, observer's DISPATCH ->
# RESULT); the floor's rows beside it (FLOOR_SEGMENTS) are the same steps, where it has them.
# No /delivered step: the dispatch written to the widget's surface is the claim,
# so the handler runs as soon as the event reaches the widget's JS.
SEGMENTS = (
    (
        "SSE: DISPATCH reaches the observer -> reaches the widget's JS",
        lambda s, t: (s["dispatch"] - s["observed"]) / 1000,
    ),
    (
        "widget: DISPATCH reaches its JS -> hostcall:call reaches the page",
        lambda s, t: (s["call"] - s["dispatch"]) / 1000,
    ),
    (
        "page: hostcall:call -> its hostcall:result reaches the widget",
        lambda s, t: (s["result"] - s["call"]) / 1000,
    ),
    (
        "widget: hostcall:result -> fetch POST /result called",
        lambda s, t: (s["post"][0] - s["result"]) / 1000,
    ),
    (
        "event reaches the page's JS -> fetch called (sum of the above)",
        lambda s, t: (s["post"][0] - s["dispatch"]) / 1000,
    ),
    ("POST: fetch called -> request sent", lambda s, t: (s["post"][1] - s["post"][0]) / 1000),
    (
        "POST: request sent -> response starts (server; its event is written first)",
        lambda s, t: (s["post"][2] - s["post"][1]) / 1000,
    ),
    (
        "rest: the observer's round trip minus event in JS -> response starts",
        lambda s, t: t - (s["post"][2] - s["dispatch"]) / 1000,
    ),
    (
        "POST: request sent -> TOOL_CALL_RESULT reaches the observer",
        lambda s, t: t - (s["post"][1] - s["observed"]) / 1000,
    ),
)
# label of SEGMENTS -> the floor's (kick reaches its JS, its POST /echo, round trip, kick
# reaches the observer)
FLOOR_SEGMENTS = {
    SEGMENTS[0][0]: lambda k, p, t, o: (k - o) / 1000,
    SEGMENTS[4][0]: lambda k, p, t, o: (p[0] - k) / 1000,
    SEGMENTS[5][0]: lambda k, p, t, o: (p[1] - p[0]) / 1000,
    SEGMENTS[6][0]: lambda k, p, t, o: (p[2] - p[1]) / 1000,
    SEGMENTS[7][0]: lambda k, p, t, o: t - (p[2] - k) / 1000,
    SEGMENTS[8][0]: lambda k, p, t, o: t - (p[1] - o) / 1000,
}


def round_trip(env: Env, mode: Mode) -> None:
    observer, floor = Observer(), env.new_page()
    ours: list[float] = []
    theirs: list[float] = []
    cold: list[float] = []  # each fresh widget's first call
    kicked: list[float] = []  # when each floor kick reached the observer (epoch ms)
    steps: list[dict[str, Any]] = []
    try:
        floor.goto(f"{env.apps.url}/pages/floor.html?ch=browser")  # same origin as its SSE
        floor.wait_for_function("floor.ready")
        floor_events = observer.follow(env.apps.port, "/events?ch=browser")
        total = mode.warmup + mode.round_trips
        with httpx.Client(base_url=env.apps.url, timeout=TIMEOUT, trust_env=False) as kicker:
            for first in range(0, total, TURNS):
                widget, ids, observed = Widget(env, observer), [], {}
                # A fresh widget's first call also imports the call code (the lazy
                # split): it is timed on a row of its own, so the rows above it are the
                # percentiles of a round trip, not of a module import.
                cold.append(widget.ask()[0])
                for i in range(first, min(total, first + TURNS)):  # interleaved with the floor
                    elapsed, call_id, at = widget.ask()
                    observed[call_id] = observer.epoch_ms + 1000 * at
                    kicker.post("/kick/browser?after=20").raise_for_status()  # README: floor
                    echo = until(floor_events, "echo")
                    if i >= mode.warmup:
                        ours.append(elapsed)
                        theirs.append(echo["echo"][0] - echo["kick"][0])
                        kicked.append(observer.epoch_ms + 1000 * echo["kick"][0])
                        ids.append(call_id)
                timings = widget.close(min(total, first + TURNS) - first + 1)
                steps += [timings[i] | {"observed": observed[i]} for i in ids]
        kicks = floor.evaluate("floor.kicks")[-mode.round_trips :]
        echoes = floor.evaluate(f"({POSTS})('/echo/')")[-mode.round_trips :]
        profile = profiled(env, observer, mode.profiled)
        threaded = traced(env, observer, mode.profiled)
    finally:
        floor.context.close()
        observer.close()
    env.hc.check_alive()
    result, bare, first = summary(ours), summary(theirs), summary(cold)
    print_table(
        f"3. Browser tool round trip, headless Chromium, n={mode.round_trips} after "
        f"{mode.warmup} warm-up, interleaved with the floor",
        [
            *(
                compare(
                    f"server emits call -> has validated result, {stat}",
                    result[stat],
                    bare[stat],
                    ms,
                    TARGETS.get(stat),
                )
                for stat in ("p50", "p99", "mean")
            ),
            *(
                compare(
                    f"a fresh widget's first call (imports the call code), {stat}",
                    first[stat],
                    bare[stat],
                    ms,
                    None,
                )
                for stat in ("p50", "p99")
            ),
        ],
        [
            "hostcall: tool_call_dispatch -> TOOL_CALL_RESULT; floor: kick -> echo (the "
            "floor page answers kick with fetch POST /echo)",
            "both timed as the two events reach an SSE stream the bench holds on the same "
            "conversation / channel (raw asyncio, own thread, one clock)",
            f"runs posted by the bench with the widget's session; a fresh widget and "
            f"conversation every {TURNS} round trips, whose first call ({len(cold)} of "
            f"them) is not in the first three rows: it has rows of its own",
        ],
    )
    rows = []
    for label, f in SEGMENTS:
        hc = summary([f(s, t) for s, t in zip(steps, ours, strict=True)])
        fl = FLOOR_SEGMENTS.get(label)
        bare_step = fl and summary(
            [fl(k, p[1:], t, o) for k, p, t, o in zip(kicks, echoes, theirs, kicked, strict=True)]
        )
        rows.append(
            (
                label,
                ms(hc["p50"]),
                ms(bare_step["p50"]) if bare_step else "-",
                ms(hc["p99"]),
                ms(bare_step["p99"]) if bare_step else "-",
            )
        )
    opened = (sum(s["post"][4] for s in steps), sum(p[5] for p in echoes))
    table(
        "3b. Where the round trip goes",
        ("segment", "hostcall p50", "floor p50", "hostcall p99", "floor p99"),
        rows,
        [
            "one clock for every frame (timeOrigin + now): PROBE's stamps, Resource Timing of "
            "POST /result (widget frame) and POST /echo (floor page); the observer's arrivals "
            "on the same clock (time.time() taken with perf_counter once); rest: SSE delivery "
            "of the call to the page and of the result to the observer",
            "'DISPATCH reaches its JS -> POST /result sent' is 2 postMessages, the handler and "
            "the widget's checks: the dispatch is the claim, no request comes before the "
            "handler",
            f"POSTs that opened a connection: hostcall {opened[0]} of {len(steps)}, floor "
            f"{opened[1]} of {len(echoes)}",
        ],
    )
    table(
        f"3c. Widget frame's main thread, CPU profile over {mode.profiled} more round trips",
        ("function (self time)", "per round trip", "share"),
        profile,
        [
            "(program): native work outside JS (style, layout, paint); a layout that JS forces "
            "(e.g. reading scrollHeight) counts in that function"
        ],
    )
    table(
        f"3d. Widget frame's main thread, Chromium trace over {mode.profiled} more round trips: "
        "per round trip, mean (max)",
        ("what it ran", "while the call is with the page", "while the server takes the answer"),
        threaded,
        [
            "with the page: the dispatch reaches the widget's JS -> the result POST is sent; "
            "with the server: -> TOOL_CALL_RESULT reaches the widget's JS",
            "tasks begun in the span (not the dispatch's own); anything here may hold the "
            "page's answer up, or take a core from the page or the server",
        ],
    )


# 3d: marks for the trace, in a widget of its own (not timed): when a dispatch and a result
# reach the widget's JS. The result POST's sending is Chromium's own ResourceSendRequest.
MARKS = """if (location.pathname.startsWith('/widget/')) {
  window.EventSource = class extends EventSource { constructor (...args) { super(...args)
    for (const type of ['DISPATCH', 'TOOL_CALL_RESULT'])
      this.addEventListener(type, () => performance.mark(`bench:${type}`)) } }
}""".replace("DISPATCH", DISPATCH)
TRACE_CATEGORIES = ["devtools.timeline", "blink.user_timing", "toplevel"]
# What the widget's main thread did (trace event names), counted per round trip.
TRACED = (
    ("tasks run", ("ThreadControllerImpl::RunTask",)),
    ("frames (their PrePaint)", ("PrePaint",)),
    ("DOM events (scroll, scrollend...)", ("EventDispatch",)),
    ("style recalculations", ("UpdateLayoutTree",)),
    ("layouts", ("Layout",)),
    ("paints", ("Paint",)),
    ("timers fired", ("TimerFire",)),
    ("garbage collections", ("MinorGC", "MajorGC")),
)


def traced(env: Env, observer: Observer, runs: int) -> list[tuple[str, ...]]:
    """A Chromium trace of ``runs`` round trips in a fresh widget: what its main thread
    does while the call is with the page (the dispatch in its JS -> the result POST sent)
    and while the server takes the answer (-> TOOL_CALL_RESULT in its JS), per round trip.
    Counts, which the machine's load does not change; and the busy time, which it does."""
    widget = Widget(Env(env.browser, env.apps, env.hc, probe=MARKS), observer)
    widget.ask()  # warm
    env.browser.start_tracing(categories=TRACE_CATEGORIES)
    try:
        for _ in range(runs):
            widget.ask()
    finally:
        trace = json.loads(env.browser.stop_tracing())
    widget.close(runs + 1)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    marks = [e for e in events if e.get("name") == f"bench:{DISPATCH}"]
    if len(marks) != runs:
        raise RuntimeError(f"{len(marks)} dispatch marks in the trace for {runs} round trips")
    pid, tid = marks[0]["pid"], marks[0]["tid"]
    thread = sorted(
        (e for e in events if e["pid"] == pid and e["tid"] == tid), key=lambda e: e["ts"]
    )
    sent = [
        e["ts"]
        for e in thread
        if e.get("name") == "ResourceSendRequest"
        and "/result" in ((e.get("args") or {}).get("data") or {}).get("url", "")
    ]
    results = [e["ts"] for e in thread if e.get("name") == "bench:TOOL_CALL_RESULT"]
    spans: list[list[dict[str, float]]] = [[], []]
    for mark in marks:
        at = mark["ts"]
        post = next(t for t in sent if t > at)
        done = next(t for t in results if t > post)
        for span, (start, end) in zip(spans, ((at, post), (post, done)), strict=True):
            inside = [e for e in thread if e.get("ph") == "X" and start < e["ts"] < end]
            counts = {label: sum(e["name"] in names for e in inside) for label, names in TRACED}
            counts["busy"] = (
                sum(e.get("dur", 0) for e in inside if e["name"] == "ThreadControllerImpl::RunTask")
                / 1e6
            )
            counts["span"] = (end - start) / 1e6
            span.append(counts)

    def cell(span: list[dict[str, float]], key: str, fmt: Callable[[float], str]) -> str:
        values = [c[key] for c in span]
        return f"{fmt(statistics.fmean(values))} (max {fmt(max(values))})"

    count = "{:.1f}".format
    rows = [(label, *(cell(span, label, count) for span in spans)) for label, _ in TRACED]
    rows.append(("busy (wall, load-dependent)", *(cell(span, "busy", ms) for span in spans)))
    rows.append(("the span itself (traced)", *(cell(span, "span", ms) for span in spans)))
    return rows


def profiled(env: Env, observer: Observer, runs: int) -> list[tuple[str, str, str]]:
    """Top self time in a fresh widget's frame, sampled every 100 us over ``runs`` runs."""
    widget = Widget(env, observer)
    cdp = widget.page.context.new_cdp_session(widget.frame)
    for method, params in (
        ("Profiler.enable", {}),
        ("Profiler.setSamplingInterval", {"interval": 100}),
        ("Profiler.start", {}),
    ):
        cdp.send(method, params)
    for _ in range(runs):
        widget.ask()
    profile = cdp.send("Profiler.stop")["profile"]
    widget.close(runs)
    frames = {node["id"]: node["callFrame"] for node in profile["nodes"]}
    self_time: Counter[str] = Counter()
    for sample, delta in zip(profile["samples"], profile["timeDeltas"], strict=True):
        f = frames[sample]
        where = f" {f['url'].rsplit('/', 1)[-1]}:{f['lineNumber'] + 1}" if f["url"] else ""
        self_time[f"{f['functionName'] or '(anonymous)'}{where}"] += delta / 1e6 / runs
    del self_time["(idle)"]
    busy = sum(self_time.values())
    return [
        *((name, ms(t), f"{t / busy:.0%}") for name, t in self_time.most_common(8)),
        ("busy, all functions", ms(busy), "100%"),
    ]


# ---- main ----------------------------------------------------------------------------------


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


SECTIONS = ("weight", "host-page cost", "round trip", "page tool", "attachment")


def run(mode: Mode, workdir: Path, sections: Sequence[str] = SECTIONS) -> int:
    failed = []
    apps_argv = [
        sys.executable,
        str(servers.ROOT / "bench" / "browser_apps.py"),
        "--ping",
        str(servers.PING_SECONDS),
        "--log-level",
        servers.LOG_LEVEL,
    ]
    with servers.running("apps", apps_argv, workdir, dict(os.environ)) as apps:
        hc_argv = [
            *servers.serve_argv(workdir, workdir / "browser.db"),
            "--allow-origin",
            f"http://localhost:{apps.port}",
        ]
        env_vars = dict(os.environ, HOSTCALL_SECRET_KEYS=secrets.token_urlsafe(32))
        with servers.running("hostcall", hc_argv, workdir, env_vars) as hc, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            print(
                f"browser: Chromium {browser.version} headless, playwright {version('playwright')}",
                flush=True,
            )
            env = Env(browser, apps, hc)
            try:
                for name, section in (
                    ("weight", lambda: weight(env)),
                    ("host-page cost", lambda: host_cost(env, mode)),
                    ("round trip", lambda: round_trip(env, mode)),
                    ("page tool", lambda: page_tool(p, env, mode)),
                    ("attachment", lambda: attachment(env, mode, workdir)),
                ):
                    if name not in sections:
                        continue
                    try:
                        section()
                    except Exception:
                        traceback.print_exc()
                        print(
                            f"\n!! section '{name}' failed to run; Hostcall's log:\n"
                            f"{hc.log_tail()}",
                            flush=True,
                        )
                        failed.append(name)
                    print(f"  (load average after {name}: {load()})", flush=True)
            finally:
                browser.close()
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer page loads and round trips")
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help="run this section only (may be given more than once)",
    )
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: run scripts/install --test", file=sys.stderr)
        return 1
    print("# Hostcall browser benchmark\n")
    print(f"command: {sys.executable} {' '.join(sys.argv)}")
    print(
        f"machine: nproc={os.cpu_count()}, {platform.platform()}, "
        f"python {platform.python_version()}; mode: {'quick' if args.quick else 'full'}"
    )
    print(f"load average at start: {load()} (other processes share these cores)", flush=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hostcall-browser-bench-") as tmp:
        code = run(QUICK if args.quick else FULL, Path(tmp), args.only or SECTIONS)
    print(
        f"\ntotal: {time.perf_counter() - started:.1f} s, load average at end: {load()}, "
        f"exit {code}"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
