"""The widget's security boundary in real Chromium.

Three origins: the demo's host page (``localhost``), Hostcall (``127.0.0.1``), and a third one
served here (``127.0.0.2`` where the loopback network allows it) for a hostile sibling frame
and for a site that is not on the agent's list of allowed origins.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
import uvicorn
from playwright.sync_api import Frame, FrameLocator, Locator, Page, Request, Response, expect
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from hostcall.demo_host import create_demo_host_app
from hostcall.settings import ROOT
from tests.e2e.conftest import Demo, free_port, shot, start_demo

pytestmark = pytest.mark.e2e

PAGES = Path(__file__).parent / "pages"
WIDGET = "[data-part=hostcall-frame]"

IMG = '<img src=x onerror="window.__pwned=1">'
JS_LINK = "[x](javascript:alert(1))"
JS_LINK_BARE = "[y](javascript:window.__pwned=2)"  # no parentheses: parsed as a link, then refused

# Every frame of the page: `securitypolicyviolation` events, and (top page only) every message.
RECORDER = """
window.__violations = []
document.addEventListener('securitypolicyviolation', e => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`)
})
if (window === window.top) {
  // Every message the page can read: on the window, and on every port a hello hands it (the
  // widget's channel; origin "port:" + the hello's). Added before the loader's listener.
  window.__messages = []
  const record = (origin, data) => {
    try { data = JSON.stringify(data) } catch { data = String(data) }
    window.__messages.push({ origin, data })
  }
  window.addEventListener('message', e => {
    record(e.origin, e.data)
    const from = 'port:' + e.origin
    for (const port of e.ports) port.addEventListener('message', m => record(from, m.data))
  }, true)
}
"""


# ----------------------------------------------------------------------------- helpers


class Session:
    """The widget's conversation, as the server gave it (read off the network) when the
    visitor's first message made it."""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.base = base
        self._made: list[Response] = []
        self._body: dict[str, Any] = {}
        page.on("response", self._seen)

    def _seen(self, response: Response) -> None:
        if response.request.method == "POST" and response.url.endswith(
            "/api/agents/planner/conversations"
        ):
            self._made.append(response)  # read later: not inside the event handler

    def _created(self) -> dict[str, Any]:
        for _ in range(500):
            if self._made:
                break
            self.page.wait_for_timeout(20)
        assert len(self._made) == 1, f"{len(self._made)} conversations made"
        self._body = self._body or self._made[0].json()
        return self._body

    @property
    def conversation_id(self) -> str:
        return str(self._created()["conversationId"])

    @property
    def session_token(self) -> str:
        return str(self._created()["sessionToken"])

    @property
    def stream_token(self) -> str:
        return str(self._created()["streamToken"])

    def snapshot(self) -> dict[str, Any]:
        response = httpx.get(
            f"{self.base}/api/conversations/{self.conversation_id}",
            headers={"Authorization": f"Bearer {self.session_token}"},
        )
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def call(self, call_id: str) -> dict[str, Any]:
        return next(c for c in self.snapshot()["calls"] if c["toolCallId"] == call_id)


def open_chat(page: Page, demo: Demo, query: str = "") -> tuple[FrameLocator, Session]:
    """Open the demo board, click the launcher, wait until the widget can send."""
    page.goto(demo.board + query)
    session = Session(page, demo.hostcall)
    page.locator("[data-part=hostcall-launcher]").click()
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    return widget, session


def say(widget: FrameLocator, text: str) -> None:
    widget.locator("[data-part=composer-input]").fill(text)
    widget.locator("[data-part=send]").click()


def last_text(widget: FrameLocator, role: str) -> Locator:
    """The text of the last message of `role` (without the screen-reader prefix)."""
    return widget.locator(f"[data-part=message][data-role={role}]").last.locator(
        "[data-part=message-text]"
    )


def widget_frame(page: Page) -> Frame:
    handle = page.locator(WIDGET).element_handle()
    frame = handle.content_frame() if handle else None
    assert frame is not None
    return frame


def inject_frame(page: Page, url: str, name: str) -> Frame:
    """Append an iframe of `url` to the page and wait for it to load."""
    page.evaluate(
        """([src, name]) => new Promise(resolve => {
          const f = document.createElement('iframe')
          Object.assign(f, { src, name, title: name, onload: () => resolve(0) })
          f.dataset.part = name
          document.body.append(f)
        })""",
        [url, name],
    )
    handle = page.locator(f"[data-part={name}]").element_handle()
    frame = handle.content_frame() if handle else None
    assert frame is not None, f"no frame {name}: {[f.url for f in page.frames]}"
    return frame


def rows(demo: Demo, sql: str, *params: str) -> list[tuple[Any, ...]]:
    """Read the server's database (read-only, beside the running server)."""
    with contextlib.closing(sqlite3.connect(f"file:{demo.db}?mode=ro", uri=True)) as db:
        return db.execute(sql, params).fetchall()


def csp(response: httpx.Response) -> dict[str, str]:
    header = response.headers["content-security-policy"]
    directives = (part.strip().partition(" ") for part in header.split(";"))
    return {name: value for name, _, value in directives}


def third_host() -> str:
    """127.0.0.2 is cross-site to both localhost and 127.0.0.1 (Linux routes 127/8 to lo);
    elsewhere another port of 127.0.0.1 is still another origin."""
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError:
        return "127.0.0.1"
    return "127.0.0.2"


@pytest.fixture
def elsewhere(demo: Demo) -> Iterator[str]:
    """A third origin: `/` is the demo board with the same snippet (an origin the agent does
    not allow), `/pages/` serves tests/e2e/pages (the forger)."""
    host = third_host()
    app = Starlette(
        routes=[
            Mount("/pages", app=StaticFiles(directory=PAGES)),
            Mount("/", app=create_demo_host_app(demo.hostcall)),
        ]
    )
    config = uvicorn.Config(
        app, host=host, port=free_port(), log_level="warning", lifespan="off", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "third-origin server down"
        time.sleep(0.02)
    yield f"http://{host}:{config.port}"
    server.should_exit = True
    thread.join(10)


def assert_inert(page: Page, frame: Frame) -> None:
    """No payload ran or became markup, in the host page or in the widget."""
    for where, target in (("host page", page), ("widget", frame)):
        found = target.evaluate(
            """() => ({
              pwned: typeof window.__pwned,
              imgs: [...document.querySelectorAll('img')].map(i => i.outerHTML),
              jsLinks: [...document.querySelectorAll('a[href]')]
                .filter(a => !/^https?:$/.test(a.protocol)).map(a => a.outerHTML),
              handlers: [...document.querySelectorAll('*')]
                .filter(el => [...el.attributes].some(a => /^on/i.test(a.name)))
                .map(el => el.outerHTML.slice(0, 200)),
              violations: window.__violations || [],
            })"""
        )
        assert found == {
            "pwned": "undefined",
            "imgs": [],
            "jsLinks": [],
            "handlers": [],
            "violations": [],
        }, f"{where}: {found}"


# ----------------------------------------------------------------------------- 1. forged messages


GENUINE = {"tasks": [{"id": "G-1", "title": "Genuine task", "status": "todo"}]}
FORGED = {"tasks": [{"id": "F-1", "title": "FORGED task", "status": "todo"}]}

# Run in a forging frame: post each message, then a sentinel, to the top page and every other
# frame of it, to any origin ('*'). A hello carries a port of the forger's own channel, as the
# widget's does: whatever a receiver would post on it is kept in window.__stolen. Returns how
# many windows it posted to.
FORGE = """messages => {
  const top = window.parent
  const targets = [top]
  for (let i = 0; i < top.frames.length; i++) {
    if (top.frames[i] !== window) targets.push(top.frames[i])
  }
  window.__stolen ||= []
  for (const message of [...messages, { type: 'test:forged' }]) {
    for (const target of targets) {
      if (message.type !== 'hostcall:hello') {
        target.postMessage(message, '*')
        continue
      }
      const channel = new MessageChannel()
      channel.port1.onmessage = e => window.__stolen.push(e.data)
      target.postMessage(message, '*', [channel.port2])
    }
  }
  return targets.length
}"""
# Run in a receiving window: resolves once `n` sentinels arrived. Messages from one window
# are dispatched in order, so by then every forged message has been through every listener.
ARM = """n => {
  window.__forged = new Promise((resolve, reject) => {
    let seen = 0
    addEventListener('message', e => {
      if (e.data?.type === 'test:forged' && ++seen === n) resolve(n)
    })
    setTimeout(() => reject(new Error('the forged messages were not delivered')), 8000)
  })
}"""


def forge(page: Page, forgers: list[Frame], messages: list[dict[str, Any]]) -> None:
    """Post `messages` from every forger; return once the page and the widget dispatched them."""
    receivers = [page.main_frame, widget_frame(page)]
    for receiver in receivers:
        receiver.evaluate(ARM, len(forgers))
    for forger in forgers:
        assert forger.evaluate(FORGE, messages) >= 2 + len(forgers) - 1  # page, widget, others
    for receiver in receivers:
        receiver.evaluate("window.__forged")


def test_forged_messages_from_a_foreign_sibling_frame_are_ignored(
    page: Page, demo: Demo, elsewhere: str
) -> None:
    widget, session = open_chat(page, demo)
    forgers = [
        # Another origin altogether: rejected on event.origin.
        inject_frame(page, f"{elsewhere}/pages/forger.html", "forger"),
        # The host page's origin in a window that is not the parent: rejected on event.source
        # by the widget.
        inject_frame(page, f"{demo.board}board.css", "page-origin-impostor"),
        # The widget's origin in a frame that is not the widget: rejected on event.source by
        # the loader.
        inject_frame(page, f"{demo.hostcall}/static/widget.css", "widget-origin-impostor"),
    ]
    assert len({urlsplit(f.url).netloc for f in forgers}) == 3

    # While idle: every message type, to the widget and to the host page alike. The hello
    # would hand the loader the forger's own channel, which the page's calls would then take.
    forge(page, forgers, [
        {"type": "hostcall:hello", "version": 2},
        {"type": "hostcall:send", "text": "FORGED message sent as the user"},
        {"type": "hostcall:handlers", "tools": []},
        {"type": "hostcall:call", "callId": "k_forged", "toolName": "create_task",
         "input": {"title": "FORGED task"}, "deadline": "2099-01-01T00:00:00Z"},
        {"type": "hostcall:event", "event": "message",
         "detail": {"role": "assistant", "text": "FORGED event"}},
        {"type": "hostcall:close"},
    ])  # fmt: skip
    expect(page.locator("[data-part=hostcall-panel]")).to_be_visible()  # no forged close
    expect(widget.locator("[data-part=message][data-role=user]")).to_have_count(0)
    expect(page.locator("[data-part=event-log]")).not_to_contain_text("FORGED")
    assert page.evaluate("demoBoard.runs()") == []  # the forged call ran no handler

    # A handler the test releases by hand, so the call stays open while it is forged.
    page.evaluate(
        """() => {
          window.__runs = 0
          Hostcall('register', 'read_board_tasks', () => {
            window.__runs++
            return new Promise(resolve => { window.__release = resolve })
          })
        }"""
    )
    say(widget, "What should I work on next?")
    card = widget.locator("[data-part=tool-call][data-tool=read_board_tasks]")
    expect(card.locator("[data-part=tool-call-note]")).to_have_text("Running in the page…")
    call_id = card.get_attribute("data-call-id")
    assert call_id

    forge(page, forgers, [
        {"type": "hostcall:result", "callId": call_id, "output": FORGED},
        {"type": "hostcall:result", "callId": call_id, "error": {"message": "FORGED error"}},
        {"type": "hostcall:cancel", "callId": call_id},  # would abort the page's handler
        {"type": "hostcall:call", "callId": call_id, "toolName": "read_board_tasks",
         "input": {"boardId": "main"}, "deadline": "2099-01-01T00:00:00Z"},
    ])  # fmt: skip
    assert session.call(call_id)["state"] == "delivered"  # not answered by a forgery
    expect(card.locator("[data-part=tool-call-note]")).to_have_text("Running in the page…")
    assert page.evaluate("window.__runs") == 1

    # The genuine answer is the one the server keeps.
    page.evaluate("output => window.__release(output)", GENUINE)
    expect(card).to_have_attribute("data-state", "done")
    expect(widget.locator("[data-part=send]")).to_be_enabled()

    call = session.call(call_id)
    assert call["outcome"] == {"output": GENUINE}
    assert call["route"] == "handler"  # the forged empty handler list was not believed
    snapshot = session.snapshot()
    texts = [m["text"] for m in snapshot["messages"]]
    assert not [t for t in texts if "FORGED" in t], texts
    assert "Genuine task" in texts[-1]
    assert [c["toolCallName"] for c in snapshot["calls"]] == ["read_board_tasks"]
    handled = rows(
        demo, "SELECT tools FROM surfaces WHERE conversation_id = ?", session.conversation_id
    )
    assert [sorted(json.loads(tools)) for (tools,) in handled] == [
        ["create_task", "read_board_tasks"]
    ]

    expect(widget.locator("[data-part=messages]")).not_to_contain_text("FORGED")
    expect(page.locator("[data-part=hostcall-panel]")).to_be_visible()
    expect(page.locator("[data-part=event-log]")).not_to_contain_text("FORGED")
    assert page.evaluate("window.__runs") == 1
    assert page.evaluate("demoBoard.runs()") == []  # the board's own handlers never ran
    assert "FORGED task" not in [t["title"] for t in page.evaluate("demoBoard.tasks()")]
    # No channel a forger offered was taken: nothing (handlers, calls, results) came on it.
    assert [f.evaluate("window.__stolen") for f in forgers] == [[], [], []]


# ----------------------------------------------------------------------------- 2. CSP, origins


def test_widget_page_csp_frame_ancestors_is_the_allowed_origin_or_self(demo: Demo) -> None:
    allowed = demo.board.rstrip("/")
    url = f"{demo.hostcall}/widget/planner"

    ok = httpx.get(url, params={"origin": allowed})
    assert ok.status_code == 200
    assert csp(ok)["frame-ancestors"] == allowed
    assert "x-frame-options" not in ok.headers

    standalone = httpx.get(url)
    assert standalone.status_code == 200
    # Standalone: top level, or this server's own pages (the console's "try it" pane).
    assert csp(standalone)["frame-ancestors"] == "'self'"
    assert standalone.headers["x-frame-options"] == "SAMEORIGIN"

    for origin in ("http://evil.example", f"{allowed}; script-src *", "http://localhost"):
        refused = httpx.get(url, params={"origin": origin})
        assert refused.status_code == 403, origin
        assert csp(refused)["frame-ancestors"] == "'none'", origin
        assert refused.headers["x-frame-options"] == "DENY"
        assert 'data-part="page-error"' in refused.text
        assert "hc-config" not in refused.text  # the error page carries no widget


def test_widget_framed_by_a_page_not_allowed_does_not_run(
    page: Page, demo: Demo, elsewhere: str
) -> None:
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    expected = (
        f"Hostcall: no widget: the page's origin {elsewhere} is not an allowed origin of the "
        "agent 'planner' (add it to the agent's allowed_origins, or --allow-origin)"
    )
    with page.expect_console_message(lambda m: m.text == expected, timeout=15_000):
        page.goto(f"{elsewhere}/")  # the same board and snippet, on an origin not on the list

    # The loader asked the server first (/embed/check: the exact mistake, not a guess between
    # the possible ones) and drew nothing: no launcher to hover, no frame.
    expect(page.locator("[data-part=hostcall-launcher]")).to_have_count(0)
    expect(page.locator("[data-part=hostcall-panel]")).to_have_count(0)
    expect(page.locator(WIDGET)).to_have_count(0)
    assert expected in console, console
    assert "widget refused: origin_not_allowed: agent=planner" in demo.output()

    # A frame made anyway (a page mounting it by hand) is refused by the widget page's CSP.
    inject_frame(page, f"{demo.hostcall}/widget/planner?origin={quote(elsewhere)}", "own")
    assert any("frame-ancestors 'none'" in line for line in console), console
    assert rows(demo, "SELECT count(*) FROM conversations") == [(0,)]
    shot(page, "security-origin-not-allowed")


def test_a_page_claiming_an_allowed_origin_cannot_frame_the_widget(
    page: Page, demo: Demo, elsewhere: str
) -> None:
    """The origin the widget trusts is the one the browser enforced, not one a URL claims."""
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.goto(f"{elsewhere}/pages/forger.html")
    allowed = demo.board.rstrip("/")
    frame = inject_frame(page, f"{demo.hostcall}/widget/planner?origin={quote(allowed)}", "lie")

    assert frame.evaluate("document.querySelector('[data-part=widget], #hc-config')") is None
    assert any(f"frame-ancestors {allowed}" in line for line in console), console
    assert rows(demo, "SELECT count(*) FROM conversations") == [(0,)]


# ----------------------------------------------------------------------------- 3. XSS


def test_xss_in_model_text_tool_inputs_and_handler_outputs_is_inert(page: Page, demo: Demo) -> None:
    page.add_init_script(RECORDER)
    widget, _ = open_chat(page, demo)
    frame = widget_frame(page)

    # Handler output, echoed by the model's reply and shown in the call's result.
    page.evaluate(
        """tasks => Hostcall('register', 'read_board_tasks', () => ({ tasks }))""",
        [
            {"id": "X-1", "title": IMG, "status": "in-progress"},
            {"id": "X-2", "title": f"{JS_LINK} {JS_LINK_BARE}", "status": "todo"},
        ],
    )
    say(widget, "What should I work on next?")
    reply = last_text(widget, "assistant")
    expect(reply.get_by_role("listitem")).to_have_text(
        [f"{IMG} (in-progress)", f"{JS_LINK} {JS_LINK_BARE} (todo)"]
    )
    result = widget.locator("[data-part=tool-call][data-tool=read_board_tasks]").locator(
        "[data-part=tool-call-result]"
    )
    result.locator("summary").click()
    expect(result).to_contain_text(IMG)
    expect(widget.locator("[data-part=send]")).to_be_enabled()

    # The user's own words become the tool input and the model's text.
    typed = f"Add a task to {IMG} {JS_LINK} {JS_LINK_BARE}"
    say(widget, typed)
    expect(last_text(widget, "user")).to_have_text(typed)
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card.locator("[data-part=tool-call-input]")).to_contain_text(
        f"{IMG} {JS_LINK} {JS_LINK_BARE}"
    )
    assert_inert(page, frame)
    card.locator("[data-part=approve]").click()
    expect(card).to_have_attribute("data-state", "done")
    expect(page.locator("[data-part=task-title]", has_text=IMG)).to_have_text(
        f"{IMG} {JS_LINK} {JS_LINK_BARE}"
    )
    expect(last_text(widget, "assistant")).to_have_text(
        f"Done: I created {IMG} {JS_LINK} {JS_LINK_BARE} on your board (todo)."
    )
    assert_inert(page, frame)
    shot(page, "security-xss-inert")


def test_xss_in_schema_titles_and_descriptions_is_inert(page: Page, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    shutil.copytree(ROOT / "demo" / "agents", agents)
    planner = json.loads((agents / "planner.json").read_text())
    planner["name"] = f"Planner {IMG}"
    planner["greeting"] = f"Hi {IMG} {JS_LINK} {JS_LINK_BARE}"
    tool = next(t for t in planner["tools"] if t["name"] == "create_task")
    tool["description"] = f"Creates a task {IMG} {JS_LINK_BARE}"
    for schema in (tool["input_schema"], tool["output_schema"]):
        schema["properties"]["title"]["title"] = f"Title {IMG}"
        schema["properties"]["title"]["description"] = f"Help {JS_LINK} {JS_LINK_BARE} {IMG}"
    tool["output_schema"]["properties"]["id"]["title"] = f"Id {JS_LINK_BARE}"
    (agents / "planner.json").write_text(json.dumps(planner))

    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    try:
        page.add_init_script(RECORDER)
        page.goto(demo.board)
        page.locator("[data-part=toggle-manual-create]").check()  # create_task → the form
        widget, _ = open_chat(page, demo, "")
        frame = widget_frame(page)
        expect(widget.locator("[data-part=title]")).to_have_text(f"Planner {IMG}")
        expect(widget.locator("[data-part=message-text]").first).to_have_text(
            f"Hi {IMG} {JS_LINK} {JS_LINK_BARE}"
        )

        say(widget, "Add a task to ship the release")
        card = widget.locator("[data-part=tool-call][data-tool=create_task]")
        expect(card.locator("[data-part=tool-call-input]")).to_contain_text(f"Title {IMG}")
        card.locator("[data-part=edit]").click()  # the input schema's form
        expect(card.get_by_label(f"Title {IMG}")).to_have_value("Ship the release")
        expect(card.locator("[data-part=form]")).to_contain_text(
            f"Help {JS_LINK} {JS_LINK_BARE} {IMG}"
        )
        assert_inert(page, frame)
        card.locator("[data-part=cancel]").click()
        card.locator("[data-part=approve]").click()

        form = card.locator("[data-part=form][data-purpose=answer]")  # the output schema's
        expect(form).to_be_visible()
        expect(card.locator("[data-part=tool-description]")).to_have_text(
            f"Creates a task {IMG} {JS_LINK_BARE}"
        )
        expect(form.get_by_label(f"Title {IMG}")).to_have_value("Ship the release")
        expect(form.get_by_label(f"Id {JS_LINK_BARE}")).to_be_visible()
        form.locator("[data-part=submit]").click()  # id missing: errors next to the fields
        expect(form.locator("[data-part=field-error]:visible")).to_have_count(1)
        assert_inert(page, frame)
        shot(page, "security-xss-schema-inert")
    finally:
        demo.stop()


def test_xss_in_the_server_error_pages_is_inert(page: Page, demo: Demo) -> None:
    page.add_init_script(RECORDER)
    page.goto(f"{demo.hostcall}/widget/{quote(IMG, safe='')}")
    expect(page.locator("[data-part=page-error]")).to_contain_text(IMG)
    assert_inert(page, page.main_frame)

    page.goto(f"{demo.hostcall}/widget/planner?origin={quote(IMG + JS_LINK, safe='')}")
    expect(page.locator("[data-part=page-error]")).to_contain_text(f"The page at {IMG}{JS_LINK}")
    assert_inert(page, page.main_frame)


# ----------------------------------------------------------------------------- 4. tokens


def tokens_in(request: Request) -> set[str]:
    """Every token the widget sends: bearer header, `?token=`, `token` in a JSON body."""
    found = set()
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        found.add(auth[7:])
    found.update(parse_qs(urlsplit(request.url).query).get("token", []))
    if request.post_data and request.post_data.startswith("{"):
        token = json.loads(request.post_data).get("token")
        if isinstance(token, str):
            found.add(token)
    return found


def keys_of(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from keys_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from keys_of(item)


def test_tokens_never_reach_the_host_page(page: Page, demo: Demo) -> None:
    page.add_init_script(RECORDER)
    tokens: set[str] = set()
    page.on("request", lambda r: tokens.update(tokens_in(r)) if "/api/" in r.url else None)

    page.goto(demo.board)
    page.locator("[data-part=toggle-manual-create]").check()  # create_task → the form
    widget, session = open_chat(page, demo, "")

    say(widget, "What should I work on next?")  # the page's handler: a result token
    tokens |= {session.session_token, session.stream_token}  # made with that message
    expect(widget.locator("[data-part=tool-call][data-tool=read_board_tasks]")).to_have_attribute(
        "data-state", "done"
    )
    expect(widget.locator("[data-part=send]")).to_be_enabled()

    say(widget, "Add a task to review the Q3 report")  # a decision token, then the form's
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card.locator("[data-part=approve]")).to_be_visible()
    call_id = card.get_attribute("data-call-id")
    assert call_id
    tokens.add(session.call(call_id)["decisionToken"])
    card.locator("[data-part=approve]").click()
    form = card.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible()
    tokens.add(session.call(call_id)["resultToken"])
    form.locator("[data-path='/id']").fill("T-42")
    form.locator("[data-part=submit]").click()
    expect(card).to_have_attribute("data-state", "done")
    expect(widget.locator("[data-part=send]")).to_be_enabled()

    tokens.discard("")
    assert len(tokens) >= 5 and all(len(t) >= 20 for t in tokens), tokens
    messages = page.evaluate("window.__messages")
    widget_sent = (demo.hostcall, f"port:{demo.hostcall}")  # the hello, then its channel
    datas = [json.loads(m["data"]) for m in messages if m["origin"] in widget_sent]
    types = {d.get("type") for d in datas}
    assert {"hostcall:hello", "hostcall:ready", "hostcall:call", "hostcall:event"} <= types
    assert not [k for k in keys_of(datas) if re.search("token", k, re.I)]
    leaks = [(t[:12], m["data"][:200]) for m in messages for t in tokens if t in m["data"]]
    assert not leaks, leaks

    # Nor anywhere else the host page could read.
    visible = page.evaluate(
        """() => JSON.stringify([document.documentElement.outerHTML, document.cookie,
              Object.entries(sessionStorage), Object.entries(localStorage)])"""
    )
    assert not [t[:12] for t in tokens if t in visible]
