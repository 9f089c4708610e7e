"""What end users see, in real Chromium: a phone gets a full-screen sheet and no
keyboard popping up; a light accent gets dark text; ↻ asks first; Escape in the reject box
goes back instead of closing the chat; a message sent while the server is down stays with a
retry; a cut paste and a blocked Enter say why; a model that is down reads as a sentence, not
an address; an embed mistake is named exactly in the console and the server's log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from hostcall.qa.servers import HostcallServer, HostPage, serve_host_page
from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import ASK_ADD, ASK_NEXT, SLOW, open_chat

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def demo(shared_demo: Demo) -> Demo:
    """A test here opens its own browser context, so its own conversation; one that stops the
    server or changes its agents starts a demo of its own."""
    return shared_demo


def phone_page(browser: Browser, **options: object) -> Page:
    context = browser.new_context(
        viewport=PHONE, screen=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
        locale="en-US", **options,
    )  # fmt: skip
    page = context.new_page()
    page.set_default_timeout(10_000)
    return page


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_on_a_phone_the_chat_is_a_full_screen_sheet_without_the_keyboard(
    browser: Browser, demo: Demo, theme: str
) -> None:
    page = phone_page(browser, color_scheme=theme)
    # A notched phone: the sheet keeps clear of these strips, which show its own background.
    page.context.new_cdp_session(page).send(
        "Emulation.setSafeAreaInsetsOverride", {"insets": {"top": 47, "bottom": 34}}
    )
    try:
        page.goto(demo.board + f"?theme={theme}")
        launcher = page.locator("[data-part=hostcall-launcher]")
        box = launcher.bounding_box()
        assert box and box["x"] + box["width"] <= PHONE["width"], "the launcher is on screen"
        shot(page, f"phone-{theme}-board")
        widget = Widget(page, timeout=SLOW).open()  # the launcher's click
        sheet = page.locator("[data-part=hostcall-panel]").bounding_box()
        assert sheet == {"x": 0, "y": 0, "width": PHONE["width"], "height": PHONE["height"]}
        expect(launcher).to_be_hidden()  # the sheet has its own close button
        # The strips are the widget's colour in its theme (they stayed white in dark mode),
        # the header's accent above.
        strips = page.locator("[data-part=hostcall-panel]").evaluate(
            """el => { const s = getComputedStyle(el)
              return [s.paddingTop, s.paddingBottom, s.backgroundColor, s.backgroundImage] }"""
        )
        body = {"light": "rgb(255, 255, 255)", "dark": "rgb(21, 23, 28)"}[theme]
        assert strips[:3] == ["47px", "34px", body]
        assert "rgb(79, 70, 229)" in strips[3]  # the default accent, #4f46e5
        shown = widget.frame.locator("body").evaluate("el => getComputedStyle(el).backgroundColor")
        assert shown == body
        expect(widget.frame.locator("html")).to_have_attribute("data-viewport", "phone")
        # Opening did not focus the composer (that would pop the keyboard over the chat).
        assert widget.frame.locator("[data-part=composer-input]").evaluate(
            "el => document.activeElement !== el"
        )
        widget.send(ASK_ADD)
        call = widget.calls("create_task")
        expect(call).to_have_attribute("data-state", "waiting", timeout=SLOW)
        call.locator("[data-part=reject]").click()
        reason = call.locator("[data-part=reject-reason]")
        expect(reason).to_be_visible(timeout=SLOW)
        assert reason.evaluate("el => document.activeElement !== el")
        shot(page, f"phone-{theme}-confirmation", readme=f"phone-{theme}")
        widget.frame.locator("[data-part=close]").click()
        # The close crosses to the page by postMessage: on a busy machine, past 5 s.
        expect(launcher).to_be_visible(timeout=SLOW)
        expect(page.locator("[data-part=hostcall-panel]")).to_be_hidden(timeout=SLOW)
    finally:
        page.context.close()


def test_a_light_accent_gets_dark_text_in_the_widget_and_on_the_launcher(
    browser: Browser, demo: Demo
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(demo.board + "?accent=%23facc15")  # the board passes it to data-accent
        launcher = page.locator("[data-part=hostcall-launcher]")
        expect(launcher).to_have_css("background-color", "rgb(250, 204, 21)")
        # Black, drawn by CSS from the accent's lightness: lch(0 0 0).
        assert launcher.evaluate("el => getComputedStyle(el).color") == "lch(0 0 0)"
        launcher.click()
        widget = Widget(page, timeout=SLOW)
        title = widget.frame.locator("[data-part=title]")
        expect(title).to_have_css("color", "rgb(0, 0, 0)", timeout=SLOW)
        expect(widget.frame.locator("[data-part=header]")).to_have_css(
            "background-color", "rgb(250, 204, 21)"
        )
        widget.send("hello")
        mine = widget.frame.locator("[data-part=message][data-role=user]").last
        expect(mine).to_have_css("color", "rgb(0, 0, 0)")
        shot(page, "accent-yellow", readme="accent-yellow")
    finally:
        page.context.close()


def test_new_conversation_asks_first(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_ADD)
    expect(widget.calls("create_task")).to_have_attribute("data-state", "waiting", timeout=SLOW)
    widget.frame.locator("[data-part=new-conversation]").click()
    question = widget.frame.locator("[data-part=restart-confirm]")
    expect(question).to_be_visible()
    expect(question).to_contain_text("Start a new conversation?")
    expect(widget.frame.locator("[data-part=restart-no]")).to_be_focused()
    shot(page, "restart-asks-first", readme="restart-asks-first")
    widget.frame.locator("[data-part=restart-no]").click()
    expect(question).to_be_hidden()
    expect(widget.calls("create_task")).to_have_count(1)  # nothing was lost
    widget.frame.locator("[data-part=new-conversation]").click()
    # The question is drawn once its module has loaded; a person presses Escape on what they see.
    expect(widget.frame.locator("[data-part=restart-no]")).to_be_focused()
    widget.frame.locator("[data-part=restart-no]").press("Escape")  # Escape is "no", and stays in
    expect(question).to_be_hidden()
    expect(page.locator("[data-part=hostcall-launcher]")).to_have_attribute("aria-expanded", "true")
    expect(widget.calls("create_task")).to_have_count(1)
    widget.frame.locator("[data-part=new-conversation]").click()
    widget.frame.locator("[data-part=restart-yes]").click()
    expect(widget.calls("create_task")).to_have_count(0)
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(0)
    widget.wait_until_idle()


def test_escape_in_the_reject_reason_goes_back_and_keeps_the_chat_open(
    page: Page, demo: Demo
) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_ADD)
    call = widget.calls("create_task")
    expect(call).to_have_attribute("data-state", "waiting", timeout=SLOW)
    call.locator("[data-part=reject]").click()
    reason = call.locator("[data-part=reject-reason]")
    reason.fill("not now")
    reason.press("Escape")
    expect(call.locator("[data-part=confirm]")).to_be_visible()
    expect(call.locator("[data-part=confirm] button:focus")).to_have_count(1)  # focus stays
    expect(page.locator("[data-part=hostcall-panel]")).to_be_visible()
    expect(page.locator("[data-part=hostcall-launcher]")).to_have_attribute("aria-expanded", "true")
    # Escape elsewhere still closes the chat, as before.
    call.locator("[data-part=confirm] button:focus").press("Escape")
    expect(page.locator("[data-part=hostcall-panel]")).to_be_hidden()


def test_a_message_sent_while_the_server_is_down_stays_with_a_retry(
    page: Page, tmp_path: Path
) -> None:
    demo = start_demo(tmp_path)
    try:
        widget = open_chat(page, demo)
        demo.stop()
        box = widget.frame.locator("[data-part=composer-input]")
        box.fill("hello while you are down")
        box.press("Enter")
        failed = widget.frame.locator("[data-part=message][data-role=user][data-state=failed]")
        expect(failed).to_have_count(1, timeout=SLOW)
        expect(failed.locator("[data-part=message-text]")).to_have_text("hello while you are down")
        expect(failed.locator("[data-part=message-failed]")).to_contain_text("Not sent.")
        shot(page, "send-failed-kept", readme="send-failed-kept")
        demo = start_demo(tmp_path, db=demo.db, port=demo.port, host_port=demo.host_port)
        failed.locator("[data-part=message-retry]").click()
        sent = widget.frame.locator("[data-part=message][data-role=user]")
        expect(sent).to_have_count(1)
        expect(sent.last).not_to_have_attribute("data-state", "failed", timeout=SLOW)
        expect(widget.last_reply()).to_contain_text("Hello!", timeout=SLOW)
    finally:
        demo.stop()


def test_a_paste_over_the_limit_says_it_was_cut(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    box = widget.frame.locator("[data-part=composer-input]")
    box.focus()
    box.evaluate("el => document.execCommand('insertText', false, 'x'.repeat(8100))")
    assert box.evaluate("el => el.value.length") == 8000
    limit = widget.frame.locator("[data-part=composer-limit]")
    expect(limit).to_have_text("Messages are limited to 8,000 characters; the rest was not added.")
    box.fill("short")
    expect(limit).to_be_hidden()


def test_a_message_the_server_refuses_reads_as_a_translated_sentence(
    page: Page, demo: Demo
) -> None:
    # U+001F survives the widget's trim() but not the server's strip(): an empty message, 422.
    widget = open_chat(page, demo)
    box = widget.frame.locator("[data-part=composer-input]")
    box.fill("\x1f")
    box.press("Enter")
    error = widget.frame.locator("[data-part=error]")
    expect(error).to_have_text("This message could not be sent. Please change it and try again.")
    expect(error).not_to_contain_text("field")  # the server's English detail stays out
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(0)
    box.fill("hello")
    box.press("Enter")
    expect(widget.last_reply()).to_contain_text("Hello!", timeout=SLOW)


def test_enter_while_a_confirmation_waits_says_why(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo)
    widget.send(ASK_ADD)
    expect(widget.calls("create_task")).to_have_attribute("data-state", "waiting", timeout=SLOW)
    box = widget.frame.locator("[data-part=composer-input]")
    box.fill(ASK_NEXT)
    box.press("Enter")
    hint = widget.frame.locator("[data-part=composer-hint]")
    expect(hint).to_have_text(
        "First answer the action above: approve, edit or reject it, or fill in its form."
    )
    expect(box).to_have_value(ASK_NEXT)  # kept, not lost
    expect(widget.frame.locator("[data-part=message][data-role=user]")).to_have_count(1)
    shot(page, "enter-blocked-hint", readme="enter-blocked-hint")
    widget.calls("create_task").locator("[data-part=approve]").click()
    expect(hint).to_be_hidden(timeout=SLOW)


# A model on loopback's discard port (nothing listens there), which its environment allows.
DOWN_AGENTS = Path(__file__).parent / "agents" / "down"
DOWN_MODEL = json.loads((DOWN_AGENTS / "down.json").read_text(encoding="utf-8"))


@pytest.mark.hostcall_agent(DOWN_AGENTS)
def test_a_model_that_is_down_reads_as_a_sentence_and_the_log_has_the_detail(
    widget: Widget, hostcall_server: HostcallServer
) -> None:
    widget.send("hello?")
    error = widget.error()
    expect(error).to_contain_text(
        "The assistant is not available right now. Please try again later.", timeout=SLOW
    )
    text = error.inner_text()
    assert "127.0.0.1" not in text and "ConnectError" not in text and "model_" not in text
    expect(error.locator("[data-part=retry]")).to_be_visible()
    widget.wait_until_idle()
    log = hostcall_server.output()
    assert "run failed: agent=down" in log and "code=model_unreachable" in log
    assert DOWN_MODEL["model"]["base_url"] in log  # type: ignore[index]


def test_an_unknown_agent_is_named_in_the_console_and_the_log(page: Page, demo: Demo) -> None:
    # A page whose snippet names an agent the server does not have. The server is shared: the
    # log is read from here on.
    logged = len(demo.output())
    with serve_host_page(HostPage(demo.hostcall, "plannr", snippet={"open": "true"})) as host:
        with page.expect_console_message(
            lambda m: m.text.startswith("Hostcall: no widget"), timeout=SLOW
        ) as message:
            page.goto(host.url)
        assert message.value.text == (
            "Hostcall: no widget: there is no agent 'plannr' on this server (check the "
            "snippet's data-agent)"
        )
        expect(page.locator("[data-part=hostcall-launcher]")).to_have_count(0)
        expect(page.locator("[data-part=hostcall-frame]")).to_have_count(0)
    assert "widget refused: unknown_agent: agent=plannr" in demo.output()[logged:]


# A conversation whose model-token budget is spent: copied from widget/locale-*.js on purpose.
LIMIT_SENTENCES = {
    "en": "This conversation has reached its limit. Please start a new conversation.",
    "fr": "Cette conversation a atteint sa limite. Veuillez commencer une nouvelle conversation.",
    "es": "Esta conversación ha alcanzado su límite. Empieza una nueva conversación.",
    "ja": "この会話は上限に達しました。新しい会話を始めてください。",
}


@pytest.mark.parametrize("lang", list(LIMIT_SENTENCES))
def test_a_conversation_past_its_token_budget_asks_for_a_new_one_in_the_visitor_s_language(
    page: Page, tmp_path: Path, lang: str
) -> None:
    # The message was marked "Not sent." with a retry that could only fail for 30 days.
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = agents / "planner.json"
    data = json.loads(planner.read_text())
    data["limits"] = {"model_tokens_per_conversation": 5}
    planner.write_text(json.dumps(data))
    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    try:
        widget = open_chat(page, demo, f"?locale={lang}")
        widget.send("hello")  # the first message is let through, and spends the budget
        expect(widget.last_reply()).to_contain_text("Hello!", timeout=SLOW)
        box = widget.frame.locator("[data-part=composer-input]")
        box.fill("again")
        box.press("Enter")
        error = widget.frame.locator("[data-part=error]")
        expect(error).to_have_text(LIMIT_SENTENCES[lang])
        expect(error.locator("[data-part=retry]")).to_have_count(0)
        users = widget.frame.locator("[data-part=message][data-role=user]")
        expect(users).to_have_count(1)  # "again" is not left in the thread, failed
        # A new conversation has a budget of its own.
        widget.frame.locator("[data-part=new-conversation]").click()
        widget.frame.locator("[data-part=restart-yes]").click()
        expect(users).to_have_count(0)
        widget.send("hello")
        expect(widget.last_reply()).to_contain_text("Hello!", timeout=SLOW)
    finally:
        demo.stop()
