"""The QA kit (hostcall/qa, docs/testing.md) used as a customer would: a scripted agent given as
a dict, the plugin's server and host page on another origin, and the ``Widget`` helper.

These tests are also the guarantee that docs/testing.md's example works.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from hostcall.qa.servers import HostcallServer, HostPage
from hostcall.qa.widget import Widget

pytestmark = pytest.mark.e2e

SHOP: dict[str, Any] = {
    "id": "shop",
    "name": "Shop assistant",
    "greeting": "Hello! I can add things to your cart.",
    "model": {
        "kind": "scripted",
        "rules": [
            {
                "match": r"(?i)add (?P<qty>\d+) (?P<sku>\w+)",
                "tool": "add_to_cart",
                "arguments": {"sku": "{{ sku }}", "qty": "{{ qty }}"},
                "reply": "Your cart has {{ result.count }} items.",
                "error_reply": "Not added ({{ error.code }}{% if error.reason %}: "
                "{{ error.reason }}{% endif %}).",
            },
            {
                "match": r"(?i)where is my order",
                "tool": "order_status",
                "arguments": {"order": "A-1"},
                "reply": "Your order is {{ result.status }}{% if result.tracking %} "
                "(tracking {{ result.tracking | join(', ') }}){% endif %}.",
            },
        ],
        "fallback": "Ask me to add something.",
    },
    "tools": [
        {
            "name": "add_to_cart",
            "description": "Adds an item to the cart.",
            "require_confirmation": True,
            "input_schema": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "title": "Product"},
                    "qty": {"type": "string", "title": "Quantity"},
                },
                "required": ["sku", "qty"],
            },
            "output_schema": {
                "type": "object",
                "properties": {"count": {"type": "integer"}},
                "required": ["count"],
            },
        },
        {
            "name": "order_status",
            "description": "Where an order is.",
            "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}},
            "output_schema": {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["packed", "shipped"]},
                    "tracking": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["status"],
            },
        },
    ],
}

CART_HANDLER = """
  window.added = []
  Hostcall('register', 'add_to_cart', async (input) => {
    window.added.push(input)
    return { count: window.added.reduce((n, i) => n + Number(i.qty), 0) }
  })
"""


@pytest.fixture
def shop_page(hostcall_page: Page, host_page: HostPage) -> Page:
    host_page.script = CART_HANDLER
    return hostcall_page


@pytest.mark.hostcall_agent(SHOP)
def test_approved_call_runs_the_page_handler_once(shop_page: Page, widget: Widget) -> None:
    # `widget` opened the page before the handler was set: reload with it.
    shop_page.reload()
    widget.open()
    widget.send("add 2 apples")
    card = widget.wait_for_call("add_to_cart", "waiting")
    expect(card.locator("[data-part=tool-call-input]")).to_contain_text("apples")
    widget.approve()
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Your cart has 2 items.")
    assert shop_page.evaluate("window.added") == [{"sku": "apples", "qty": "2"}]
    assert widget.messages("assistant")[0] == "Hello! I can add things to your cart."


@pytest.mark.hostcall_agent(SHOP)
def test_edited_input_is_what_the_handler_gets(shop_page: Page, widget: Widget) -> None:
    shop_page.reload()
    widget.open()
    widget.send("add 1 pear")
    widget.edit({"qty": "5"}, "add_to_cart")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Your cart has 5 items.")
    assert shop_page.evaluate("window.added") == [{"sku": "pear", "qty": "5"}]


@pytest.mark.hostcall_agent(SHOP)
def test_rejection_reason_reaches_the_model_and_nothing_runs(
    shop_page: Page, widget: Widget
) -> None:
    shop_page.reload()
    widget.open()
    widget.send("add 3 plums")
    widget.reject("too many")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Not added (approval_rejected: too many).")
    assert shop_page.evaluate("window.added") == []


@pytest.mark.hostcall_agent(SHOP)
def test_a_person_answers_through_the_form_with_a_list(
    widget: Widget, hostcall_server: HostcallServer
) -> None:
    widget.send("where is my order?")
    widget.wait_for_call("order_status", "waiting")
    assert widget.state() == "waiting"  # a person must act: the root says so
    widget.fill_form({"status": "shipped", "tracking": ["Z1", "Z2"]}, "order_status")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Your order is shipped (tracking Z1, Z2).")
    assert httpx.get(f"{hostcall_server.url}/healthz").status_code == 200


def test_default_agent_is_the_demo_planner(widget: Widget, host_page: HostPage) -> None:
    assert host_page.agent == "planner"
    widget.send("hello")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_contain_text("Hello!")


# What the root says when "idle" arrives, recorded by the page itself (a MutationObserver runs
# right after the attribute changes, before any later frame could draw what it describes).
RECORD_AT_IDLE = """() => {
  window.seenAtIdle = []
  const root = document.documentElement
  new MutationObserver(() => {
    if (root.dataset.agentState !== 'idle') return
    const texts = document.querySelectorAll(
      '[data-part=message][data-role=assistant] [data-part=message-text]')
    window.seenAtIdle.push(texts.length ? texts[texts.length - 1].textContent : '')
  }).observe(root, { attributes: true, attributeFilter: ['data-agent-state'] })
}"""


def test_idle_shows_once_the_last_reply_is_drawn(widget: Widget) -> None:
    """``data-agent-state=idle`` is made with the run's last changes (docs/testing.md), so what
    a test reads right after ``wait_until_idle()`` is the whole reply, not the greeting."""
    frame = next(f for f in widget.page.frames if "/widget/" in f.url)
    frame.evaluate(RECORD_AT_IDLE)
    widget.send("hello")
    widget.wait_until_idle()
    assert widget.messages("assistant")[-1].startswith("Hello! Ask me")
    seen = frame.evaluate("window.seenAtIdle")
    assert len(seen) == 1 and seen[0].startswith("Hello! Ask me"), seen


# A normal page script: it reads the page's own elements, so it must run where a page's script
# does (at the end of the body), not in <head> before them.
BODY_SCRIPT = """
  const cart = document.getElementById('cart')
  window.added = []
  Hostcall('register', 'add_to_cart', async (input) => {
    window.added.push(input)
    cart.textContent = `${window.added.length} line(s)`
    return { count: window.added.reduce((n, i) => n + Number(i.qty), 0) }
  })
"""


@pytest.mark.hostcall_agent(SHOP)
def test_the_host_page_script_runs_after_the_body(host_page: HostPage, hostcall_page: Page) -> None:
    errors: list[str] = []
    hostcall_page.on("pageerror", lambda e: errors.append(str(e)))
    host_page.body = '<p id="cart">empty</p>'
    host_page.script = BODY_SCRIPT
    hostcall_page.goto(host_page.url)
    widget = Widget(hostcall_page).open()
    widget.send("add 2 apples")
    widget.approve("add_to_cart")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Your cart has 2 items.")
    expect(hostcall_page.locator("#cart")).to_have_text("1 line(s)")
    assert errors == []
    assert hostcall_page.evaluate("window.added") == [{"sku": "apples", "qty": "2"}]


@pytest.mark.hostcall_agent(SHOP)
def test_misuse_says_what_the_widget_shows(shop_page: Page, widget: Widget) -> None:
    hostcall_page = shop_page
    quick = Widget(hostcall_page, timeout=1_500)
    # Approving when nothing waits: the agent is idle, no card asks for a decision.
    with pytest.raises(AssertionError) as nothing:
        quick.approve()
    text = str(nothing.value)
    assert "could not find a card asking for a decision within 1.5 s" in text, text
    assert "the chat is open (launcher 'Chat')" in text, text
    assert "agent state: idle" in text and "cards: none" in text, text
    assert "last messages: assistant: Hello! I can add things to your cart." in text, text

    widget.send("add 2 apples")
    widget.wait_for_call("add_to_cart", "waiting")
    # Waiting for a call that never comes, and filling a form that is not open: the report
    # names the card that is there, what it asks, and the last events.
    with pytest.raises(AssertionError) as never:
        quick.wait_for_call("order_status")
    text = str(never.value)
    assert "could not see a 'order_status' card within 1.5 s" in text, text
    assert "agent state: waiting" in text, text
    assert "cards: add_to_cart waiting, asking for a decision" in text, text
    assert "| user: add 2 apples" in text, text
    assert "message user: add 2 apples, toolcall add_to_cart (awaiting_confirmation" in text, text
    with pytest.raises(AssertionError) as no_form:
        quick.fill_form({"status": "shipped"})
    assert "could not fill an answer form" in str(no_form.value), no_form.value

    # Closed: it says so.
    hostcall_page.locator("[data-part=hostcall-launcher]").click()
    with pytest.raises(AssertionError) as closed:
        quick.wait_until_idle()
    assert "the chat is closed (launcher 'Chat, 1 unread')" not in str(closed.value)
    assert "the chat is closed (launcher 'Chat')" in str(closed.value), closed.value

    # Nothing was lost by the failed waits: the call still waits, and goes on when approved.
    hostcall_page.locator("[data-part=hostcall-launcher]").click()
    widget.approve("add_to_cart")
    widget.wait_until_idle()
    expect(widget.last_reply()).to_have_text("Your cart has 2 items.")
    assert hostcall_page.evaluate("window.added") == [{"sku": "apples", "qty": "2"}]
