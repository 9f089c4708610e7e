"""Known visitors in real Chromium: the host page (localhost) identifies its signed-in
visitor with a token its own backend signs; the widget (127.0.0.1) shows that person's
conversation, on any browser; logout, or another person signing in in the same browser,
never shows the previous person's conversation, calls or tokens."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Route

from hostcall.qa.servers import (
    HostcallServer,
    HostPage,
    free_port,
    serve_in_thread,
    start_hostcall,
)
from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import shot
from tests.e2e.flows_helpers import SLOW
from tests.support.identity import SECRET, SECRET_ENV, hs_token

pytestmark = pytest.mark.e2e

USER_TEXTS = "[data-part=message][data-role=user] [data-part=message-text]"
IDENTIFY = "**/session/identify"
# The host page's backend: who is signed in, and a fresh token for them at each ask.
SCRIPT = """
window.errors = []
Hostcall('on', 'error', e => errors.push(e.code))
window.signIn = () => Hostcall('identify', () => fetch('/token').then(r => r.text()))
if (document.cookie.includes('signed=1')) signIn()
"""


@dataclass(frozen=True)
class Issued:
    """A token the site's backend handed its page: when it was asked for, and its ``exp``."""

    token: str
    at: float
    exp: int


@dataclass
class Site:
    """The host page's origin: its page, and its backend's idea of who is signed in."""

    page: HostPage
    user: str = ""
    tokens: int = 0
    lifetime: int = 600  # seconds each token is valid for
    first_lifetime: int = 0  # seconds the first token is valid for (0: ``lifetime``)
    forged: bool = False  # sign with a key the agent does not know
    issued: list[Issued] = field(default_factory=list)

    def app(self) -> Starlette:
        async def index(request: Request) -> HTMLResponse:
            return HTMLResponse(self.page.html(), headers={"Cache-Control": "no-store"})

        async def token(request: Request) -> PlainTextResponse:
            self.tokens += 1
            first = self.tokens == 1 and self.first_lifetime
            now = time.time()
            exp = int(now) + (self.first_lifetime if first else self.lifetime)
            secret = "not-the-secret-hostcall-was-given!" if self.forged else SECRET
            token = hs_token(self.user, plan="pro", exp=exp, secret=secret) if self.user else ""
            self.issued.append(Issued(token, now, exp))
            return PlainTextResponse(token)

        return Starlette(routes=[Route("/", index), Route("/token", token)])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[HostcallServer, Site]]:
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    planner["identity"] = {"issuer": "https://shop.example", "audience": "hostcall",
                           "secret_env": SECRET_ENV, "leeway": 0}  # fmt: skip
    (agents / "planner.json").write_text(json.dumps(planner))
    platform = json.loads((agents / "_platform.json").read_text())
    platform["allowed_env"] = [SECRET_ENV]
    (agents / "_platform.json").write_text(json.dumps(platform))
    port = free_port()
    server = start_hostcall(tmp_path, agents=agents, env={SECRET_ENV: SECRET},
                            allow_origins=(f"http://localhost:{port}",))  # fmt: skip
    site = Site(HostPage(f"http://127.0.0.1:{server.port}", "planner", script=SCRIPT, port=port))
    try:
        with serve_in_thread(site.app(), port=port):
            yield server, site
    finally:
        server.stop()


@pytest.fixture
def hostcall(served: tuple[HostcallServer, Site]) -> HostcallServer:
    return served[0]


@pytest.fixture
def site(served: tuple[HostcallServer, Site]) -> Site:
    return served[1]


def people(server: HostcallServer) -> dict[str, str | None]:
    db = sqlite3.connect(server.db)
    try:
        return dict(db.execute("SELECT id, person FROM conversations").fetchall())
    finally:
        db.close()


def opened(page: Page, site: Site) -> Widget:
    page.goto(site.page.url)
    return Widget(page).open()


def streaming(widget: Widget) -> None:
    """The person's conversation's event stream is open (its tickets name the person)."""
    expect(widget.frame.locator("[data-part=connection][data-state=open]")).to_have_count(
        1, timeout=10_000
    )


def user_texts(widget: Widget) -> list[str]:
    return widget.frame.locator(USER_TEXTS).all_inner_texts()


def test_logout_and_a_second_person_never_see_the_first_one_s(
    page: Page, site: Site, hostcall: HostcallServer
) -> None:
    site.user = "ann"
    page.context.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    with page.expect_response(IDENTIFY) as identified:
        widget = opened(page, site)
    # Signed in, nothing written yet: no conversation made (the first message makes it).
    assert identified.value.status == 404 and people(hostcall) == {}
    widget.send("Ann's private note")
    widget.wait_until_idle()
    streaming(widget)
    shot(page, "known-visitor-ann")
    assert set(people(hostcall).values()) == {"ann"}

    page.evaluate("Hostcall('logout')")
    expect(widget.frame.locator(USER_TEXTS)).to_have_count(0, timeout=10_000)
    widget.wait_until_idle()
    shot(page, "known-visitor-logged-out")
    assert "Ann's private note" not in widget.frame.locator("body").inner_text()

    site.user = "bob"
    with page.expect_response(IDENTIFY) as identified:
        page.evaluate("signIn()")
    assert identified.value.status == 404 and len(people(hostcall)) == 1  # Ann's alone
    widget.send("Bob here")
    widget.wait_until_idle()
    assert user_texts(widget) == ["Bob here"]
    shot(page, "known-visitor-bob")

    # A reload, signed in as Bob: Bob's conversation comes back, never Ann's.
    page.reload()
    widget = Widget(page).open()
    expect(widget.frame.locator(USER_TEXTS)).to_have_count(1, timeout=10_000)
    assert user_texts(widget) == ["Bob here"]
    owners = people(hostcall)
    assert sorted(p for p in owners.values() if p) == ["ann", "bob"]


def test_the_same_person_continues_on_another_browser(
    browser: Browser, site: Site, hostcall: HostcallServer
) -> None:
    site.user = "ann"
    laptop = browser.new_context()
    laptop.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    first = opened(laptop.new_page(), site)
    first.send("Plan my week")
    first.wait_until_idle()
    laptop.close()

    phone = browser.new_context(viewport={"width": 390, "height": 780})
    phone.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    page = phone.new_page()
    widget = opened(page, site)
    expect(widget.frame.locator(USER_TEXTS)).to_have_text(["Plan my week"], timeout=10_000)
    widget.send("And next week")
    widget.wait_until_idle()
    streaming(widget)
    shot(page, "known-visitor-other-browser")
    assert len(people(hostcall)) == 1  # one conversation, continued
    phone.close()


def test_an_anonymous_conversation_is_adopted_on_sign_in(
    page: Page, site: Site, hostcall: HostcallServer
) -> None:
    widget = opened(page, site)
    widget.send("Before signing in")
    widget.wait_until_idle()
    assert list(people(hostcall).values()) == [None]
    site.user = "carol"
    page.evaluate("signIn()")
    expect(widget.frame.locator("html[data-agent-state=idle]")).to_have_count(1, timeout=10_000)
    for _ in range(100):
        if list(people(hostcall).values()) == ["carol"]:
            break
        page.wait_for_timeout(100)
    assert list(people(hostcall).values()) == ["carol"]
    expect(widget.frame.locator(USER_TEXTS)).to_have_text(["Before signing in"], timeout=10_000)
    widget.send("After signing in")
    widget.wait_until_idle()
    assert user_texts(widget) == ["Before signing in", "After signing in"]


def test_the_token_is_refreshed_before_it_expires(
    page: Page, site: Site, hostcall: HostcallServer
) -> None:
    # The first token lives 4 s (the agent allows no leeway), the ones after it 10 min: the
    # widget must ask the page for a fresh one before the first expires (it asks a fifth of
    # the lifetime ahead: 0.6 s or more here), and send with it.
    site.user, site.first_lifetime = "dan", 4
    page.context.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    widget = opened(page, site)
    until(lambda: site.tokens > 1, page)
    first, fresh = site.issued[:2]
    assert fresh.at < first.exp, "the widget asked for a fresh token only after the first expired"
    # Past the first token's exp: the server refuses it now, so a send that goes through was
    # made with the fresh one.
    until(lambda: refuses(hostcall, first.token) == "expired_identity", page)
    widget.send("Still me")
    widget.wait_until_idle()
    assert user_texts(widget) == ["Still me"]
    assert list(people(hostcall).values()) == ["dan"]


def until(done: Callable[[], bool], page: Page) -> None:
    """Wait, within the SLOW ceiling, for ``done()``: a state the server or the site reaches."""
    deadline = time.monotonic() + SLOW / 1000
    while not done():
        assert time.monotonic() < deadline, "not reached within the SLOW ceiling"
        page.wait_for_timeout(100)


def refuses(server: HostcallServer, token: str) -> str:
    """The error code the server answers an identify with ``token`` with ("" if it takes it)."""
    r = httpx.post(
        f"{server.hostcall}/api/agents/planner/session/identify",
        json={"locale": "en"},
        headers={"Origin": server.hostcall, "Hostcall-Identity": token},
    )
    code = r.json().get("error", {}).get("code", "") if r.status_code == 401 else ""
    return str(code)


def test_a_token_the_server_refuses_is_an_error_event_and_the_visitor_stays_anonymous(
    page: Page, site: Site, hostcall: HostcallServer
) -> None:
    site.user, site.forged = "eve", True
    page.context.add_cookies([{"name": "signed", "value": "1", "url": site.page.url}])
    page.goto(site.page.url)
    widget = Widget(page).open()
    widget.send("Hello")
    widget.wait_until_idle()
    page.wait_for_function("errors.length > 0", timeout=10_000)
    assert page.evaluate("errors") == ["bad_identity"]
    assert list(people(hostcall).values()) == [None]
