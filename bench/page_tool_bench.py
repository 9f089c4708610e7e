"""The browser bench's section 4: a tool the page registers itself with WebMCP, against an
agent file's client tool, in the same widget of the same run.

Chromium with WebMCP on (``--enable-features=WebMCP``; ``http://localhost`` is a secure
context), the host page registering ``count_tasks`` with ``document.modelContext`` alone
(bench/pages/webmcp.html), and the snippet's handler for ``read_board_tasks``. Both round trips
are timed as section 3 times them (the server emits the call -> it has the validated result,
on the bench's own SSE stream), alternating in one conversation, so the ratio compares the
two paths through the widget and nothing else: a page tool adds the page's ``executeTool``
behind the same postMessage channel. Target: at most 1.1x the client tool's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from playwright.sync_api import Playwright
from report import compare, ms, print_table, summary

from hostcall.qa.plugin import CHROMIUM_ARGS, WEBMCP_ARGS

if TYPE_CHECKING:
    from browser_bench import Env, Mode

TARGET = 1.1  # the page tool's round trip, x the client tool's (p50)
# Parts of the round trip on the frames' one clock, from a call's TIMINGS
# (bench/browser_bench.py), in ms. Not the parts joined to the observer's clock: under load
# its thread's stamps came late enough to make the SSE part negative.
SEGMENTS: dict[str, Callable[[dict[str, Any]], float]] = {
    "widget: DISPATCH reaches its JS -> hostcall:call reaches the page": lambda s: (
        s["call"] - s["dispatch"]
    ),
    "page: hostcall:call -> its hostcall:result reaches the widget": lambda s: (
        s["result"] - s["call"]
    ),
    "widget: hostcall:result -> fetch POST /result called": lambda s: s["post"][0] - s["result"],
    "POST: fetch called -> request sent": lambda s: s["post"][1] - s["post"][0],
    "POST: request sent -> response starts (the server)": lambda s: s["post"][2] - s["post"][1],
}


def page_tool(playwright: Playwright, env: Env, mode: Mode) -> None:
    """Section 4, in a Chromium of its own with WebMCP on."""
    from browser_bench import CHROMIUM  # the bench imports this module: not at the top

    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + WEBMCP_ARGS)
    try:
        round_trips(replace(env, browser=browser), mode)
    finally:
        browser.close()


def round_trips(env: Env, mode: Mode) -> None:
    from browser_bench import ASK, PAGE_ASK, TURNS, Observer, Widget

    observer = Observer()
    timed: dict[str, list[float]] = {ASK: [], PAGE_ASK: []}
    cold: dict[str, list[float]] = {ASK: [], PAGE_ASK: []}
    steps: dict[str, list[dict[str, Any]]] = {ASK: [], PAGE_ASK: []}  # TIMINGS of each call
    lists, page_calls = 0, 0  # the page's getTools() calls (PROBE), its tool's calls
    pairs = max(1, TURNS // 2)  # a widget makes TURNS runs, as in section 3
    total = mode.warmup + mode.round_trips
    try:
        for first in range(0, total, pairs):
            widget = Widget(env, observer, webmcp=True)
            # A fresh widget's first call of each kind imports code (the call code): timed on
            # rows of their own, as in section 3.
            for text in (ASK, PAGE_ASK):
                cold[text].append(widget.ask(text)[0])
            count = min(total, first + pairs) - first
            ids: list[tuple[str, str]] = []
            for i in range(first, first + count):
                # Each goes first in every other pair: neither always meets a warmer widget.
                for text in (ASK, PAGE_ASK) if i % 2 else (PAGE_ASK, ASK):
                    elapsed, call_id, _ = widget.ask(text)
                    if i >= mode.warmup:
                        timed[text].append(elapsed)
                        ids.append((text, call_id))
            timings = widget.close(count + 1, count + 1)
            lists, page_calls = lists + widget.lists, page_calls + count + 1
            for text, call_id in ids:
                steps[text].append(timings[call_id])
    finally:
        observer.close()
    env.hc.check_alive()
    page, client = summary(timed[PAGE_ASK]), summary(timed[ASK])
    first_page, first_client = summary(cold[PAGE_ASK]), summary(cold[ASK])
    # Where the two differ, on the frames' one clock (section 3b's stamps), ms -> s.
    parts = {
        kind: {label: summary([f(s) / 1000 for s in steps[text]]) for label, f in SEGMENTS.items()}
        for kind, text in (("page", PAGE_ASK), ("client", ASK))
    }
    print_table(
        f"4. Page tool (WebMCP) round trip against an agent file's client tool, headless "
        f"Chromium with WebMCP on, n={mode.round_trips} each after {mode.warmup} warm-up, "
        "alternating in one widget",
        [
            *(
                compare(
                    f"server emits call -> has validated result, {stat}",
                    page[stat],
                    client[stat],
                    ms,
                    TARGET if stat == "p50" else None,
                )
                for stat in ("p50", "p99", "mean")
            ),
            *(
                compare(
                    f"{label}, p50",
                    parts["page"][label]["p50"],
                    parts["client"][label]["p50"],
                    ms,
                    None,
                )
                for label in SEGMENTS
            ),
            (
                "the page's getTools() calls per page tool call (a count: load does not change it)",
                f"{lists / page_calls:.2f}",
                "-",
                "-",
                "-",
                "info",
            ),
            compare(
                "a fresh widget's first call of each (imports the call code), p50",
                first_page["p50"],
                first_client["p50"],
                ms,
                None,
            ),
        ],
        [
            "page tool: count_tasks, registered by the host page with "
            "document.modelContext.registerTool, admitted by the agent's page_tools block; "
            "client tool: read_board_tasks, the agent file's, answered by Hostcall('register')",
            "both answer at once; timed as in section 3 (tool_call_dispatch -> "
            "TOOL_CALL_RESULT on the bench's own SSE stream), the two kinds alternating, a "
            f"fresh widget every {2 * pairs} round trips",
        ],
        header=("measure", "page tool", "client tool", "ratio", "target", "verdict"),
    )
