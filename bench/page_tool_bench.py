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

import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from playwright.sync_api import Playwright
from report import compare, ms, print_table, summary

from hostcall.qa.plugin import CHROMIUM_ARGS, WEBMCP_ARGS

if TYPE_CHECKING:
    from browser_bench import Env, Mode

TARGET = 1.1  # the page tool's round trip, x the client tool's (p50)
# Round trips of each kind, x section 3's: the two p50s differ by about a millisecond of
# some 15, and at 100 each their ratio moved by 0.1x from run to run (resampling a run's own
# pairs gave a spread of 0.07-0.11x there, 0.05-0.08x at twice as many).
SAMPLES = 2
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

# Where a call goes in the host page, stamped on PROBE's clock (timeOrigin + now), per call
# id: ``call`` (PROBE's, as it arrives), ``exec`` when the bridge calls WebMCP's executeTool
# (after its own lookup), ``enter`` and ``ret`` when the page's execute begins and returns
# (pages/webmcp.html), ``resolved`` when executeTool's promise settles (this reaction runs
# before the bridge's await resumes: it was added first), ``posted`` when the bridge posts
# the result to the widget. A client tool's call has ``posted`` only. Added to each page
# before the bench's PROBE; a port's postMessage and executeTool are wrapped here, in the
# bench only: the bridge never wraps the page's WebMCP.
STEPS = """if (location.pathname === '/pages/host.html') {
  const at = () => performance.timeOrigin + performance.now(), steps = (window.benchSteps = {})
  let current
  window.benchStep = name => { const s = steps[current]; if (s && !(name in s)) s[name] = at() }
  addEventListener('message', e => {
    const port = e.data?.type === 'hostcall:hello' && e.ports[0]
    if (!port) return
    port.addEventListener('message', e => {
      if (e.data?.type === 'hostcall:call') steps[(current = e.data.callId)] = {} })
    const post = port.postMessage
    port.postMessage = function (m, ...rest) {
      if (m?.type === 'hostcall:result' && steps[m.callId]) steps[m.callId].posted = at()
      return post.call(this, m, ...rest)
    }
  }, true)
  const mc = document.modelContext, execute = mc?.executeTool
  if (execute) mc.executeTool = (...args) => {
    benchStep('exec')
    const done = execute.apply(mc, args)
    done.then(() => benchStep('resolved'), () => {})
    return done
  }
}"""
# The page's part of a call, step by step (STEPS): label -> (from, to, whether a client
# tool's call has the step too).
PAGE_STEPS: dict[str, tuple[str, str, bool]] = {
    "call reaches the page -> the bridge calls executeTool (its lookup)": ("call", "exec", False),
    "executeTool called -> the page's execute runs (Chromium)": ("exec", "enter", False),
    "the page's execute runs -> returns": ("enter", "ret", False),
    "execute returns -> executeTool resolves (Chromium)": ("ret", "resolved", False),
    "executeTool resolves -> the bridge posts the result": ("resolved", "posted", False),
    "call reaches the page -> the bridge posts the result": ("call", "posted", True),
    "result posted -> reaches the widget's JS": ("posted", "result", True),
}


def page_tool(playwright: Playwright, env: Env, mode: Mode) -> None:
    """Section 4, in a Chromium of its own with WebMCP on."""
    from browser_bench import CHROMIUM  # the bench imports this module: not at the top

    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + WEBMCP_ARGS)
    try:
        round_trips(replace(env, browser=browser, probe=STEPS), mode)
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
    n = SAMPLES * mode.round_trips
    total = mode.warmup + n
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
            in_page = widget.page.evaluate("benchSteps")  # STEPS, before the page closes
            timings = widget.close(count + 1, count + 1)
            for call_id, at in in_page.items():
                timings.get(call_id, {}).update(at)
            lists, page_calls = lists + widget.lists, page_calls + count + 1
            for text, call_id in ids:
                steps[text].append(timings[call_id])
    finally:
        observer.close()
    env.hc.check_alive()
    page, client = summary(timed[PAGE_ASK]), summary(timed[ASK])
    first_page, first_client = summary(cold[PAGE_ASK]), summary(cold[ASK])
    # The two kinds of each pair ran back to back in one widget: the median of their ratios
    # leaves out load that moves from one pair to the next. Reported beside the ratio of the
    # p50s, which the verdict stays on (the target's measure): in six runs of 100 each it
    # moved as much (0.96-1.26x against 0.99-1.17x; each round trip's own noise is larger).
    paired = statistics.median(p / c for p, c in zip(timed[PAGE_ASK], timed[ASK], strict=True))
    # Where the two differ, on the frames' one clock (section 3b's stamps), ms -> s.
    parts = {
        kind: {label: summary([f(s) / 1000 for s in steps[text]]) for label, f in SEGMENTS.items()}
        for kind, text in (("page", PAGE_ASK), ("client", ASK))
    }
    print_table(
        f"4. Page tool (WebMCP) round trip against an agent file's client tool, headless "
        f"Chromium with WebMCP on, n={n} each after {mode.warmup} warm-up, "
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
                "paired: median of each pair's page / client ratio (the same widget, back to back)",
                "-",
                "-",
                f"{paired:.2f}x",
                "-",
                "info",
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
    steps_table(steps[PAGE_ASK], steps[ASK], n)


def steps_table(page: list[dict[str, Any]], client: list[dict[str, Any]], n: int) -> None:
    """The page's part step by step (STEPS), p50 and mean of each kind, ms."""
    rows = []
    for label, (start, end, both) in PAGE_STEPS.items():
        figures = []
        for calls in (page, client) if both else (page,):
            spans = [(s[end] - s[start]) / 1000 for s in calls if start in s and end in s]
            stats = summary(spans) if len(spans) > 1 else None
            figures += [ms(stats["p50"]), ms(stats["mean"])] if stats else ["-", "-"]
        rows.append((label, *figures, *(["-", "-"] if not both else [])))
    print_table(
        f"4b. The page's part, step by step (n={n} each; the frames' clock "
        "rounds to 0.1 ms: the means say more than the p50s)",
        rows,
        [
            "executeTool goes through the browser process: the calling frame asks it to run "
            "the tool, it asks the tool's frame (this one), and the result comes back the "
            "same way; a client tool's handler is a call in the page",
        ],
        header=("step", "page tool p50", "mean", "client tool p50", "mean"),
    )
