"""The widget's face in real Chromium: languages, accessibility (axe-core and
keyboard only), standalone use, inline mount and the dark theme.

One demo server for the module; every test has its own browser context, so its own
conversation, board and storage.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Frame, FrameLocator, Locator, Page, expect

from hostcall.settings import ROOT
from tests.e2e.conftest import Demo, shot, start_demo

pytestmark = pytest.mark.e2e

WIDGET = "[data-part=hostcall-frame]"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = start_demo(tmp_path_factory.mktemp("ui"))
    yield running
    running.stop()


# ----------------------------------------------------------------------------- helpers


def launcher(page: Page) -> Locator:
    return page.locator("[data-part=hostcall-launcher]")


def open_chat(page: Page, url: str) -> FrameLocator:
    page.goto(url)
    launcher(page).click()
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    return widget


def say(widget: FrameLocator | Page, text: str) -> None:
    widget.locator("[data-part=composer-input]").fill(text)
    widget.locator("[data-part=send]").click()


def widget_frame(page: Page) -> Frame:
    handle = page.locator(WIDGET).element_handle()
    frame = handle.content_frame() if handle else None
    assert frame is not None
    return frame


def confirmation(widget: FrameLocator) -> Locator:
    """Ask for a task (sent with Enter), and return its call card once it waits for the person."""
    composer = widget.locator("[data-part=composer-input]")
    composer.fill("Add a task to review the Q3 report before Friday")
    composer.press("Enter")
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card.locator("[data-part=approve]")).to_be_visible()
    return card


# ----------------------------------------------------------------------------- 5. languages

# Strings copied from widget/locale-*.js on purpose: a broken or missing locale file fails here.
LANGUAGES = {
    "en": {"launcher": "Chat", "placeholder": "Type a message…", "send": "Send",
           "close": "Close chat", "new": "New conversation", "waiting": "Waiting for you",
           "prompt": "The agent wants to run this action. Check the details first.",
           "buttons": ["Approve", "Edit", "Reject"]},
    "fr": {"launcher": "Discussion", "placeholder": "Écrivez un message…", "send": "Envoyer",
           "close": "Fermer la discussion", "new": "Nouvelle conversation",
           "waiting": "En attente de vous",
           "prompt": "L\u2019agent veut exécuter cette action. Vérifiez d\u2019abord les détails.",
           "buttons": ["Approuver", "Modifier", "Refuser"]},
    "es": {"launcher": "Chat", "placeholder": "Escribe un mensaje…", "send": "Enviar",
           "close": "Cerrar el chat", "new": "Nueva conversación", "waiting": "Esperándote",
           "prompt": "El agente quiere ejecutar esta acción. Revisa primero los detalles.",
           "buttons": ["Aprobar", "Editar", "Rechazar"]},
    "ja": {"launcher": "チャット", "placeholder": "メッセージを入力…", "send": "送信",
           "close": "チャットを閉じる", "new": "新しい会話", "waiting": "あなたの対応待ち",
           "prompt": "エージェントがこの操作の実行を求めています。内容を確認してください。",
           "buttons": ["承認", "編集", "却下"]},
}  # fmt: skip


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_widget_renders_in_each_language(page: Page, demo: Demo, lang: str) -> None:
    want = LANGUAGES[lang]
    page.goto(f"{demo.board}?locale={lang}")
    expect(launcher(page)).to_have_attribute("aria-label", want["launcher"])
    widget = open_chat(page, f"{demo.board}?locale={lang}")
    expect(widget.locator("html")).to_have_attribute("lang", lang)
    expect(widget.locator("[data-part=composer-input]")).to_have_attribute(
        "placeholder", want["placeholder"]
    )
    expect(widget.locator("[data-part=send]")).to_have_accessible_name(want["send"])
    header = widget.locator("[data-part=header]")
    expect(header.locator("[data-part=close]")).to_have_accessible_name(want["close"])
    expect(header.locator("[data-part=new-conversation]")).to_have_accessible_name(want["new"])

    card = confirmation(widget)
    expect(card.locator("[data-part=tool-call-status]")).to_have_text(want["waiting"])
    expect(card.locator("[data-part=confirm] > p")).to_have_text(want["prompt"])
    expect(card.locator("[data-part=confirm]").get_by_role("button")).to_have_text(want["buttons"])
    shot(page, f"ui-language-{lang}", readme="japanese" if lang == "ja" else None)

    if lang == "ja":
        # Real glyphs, not the missing-glyph box: two different kanji, drawn in the font the
        # buttons use, must differ (tofu boxes are all alike) and must not be blank.
        drawn = widget_frame(page).evaluate(
            """() => {
              const font = getComputedStyle(document.querySelector('[data-part=approve]')).font
              const g = document.createElement('canvas').getContext('2d')
              const draw = text => {
                g.canvas.width = 80; g.canvas.height = 40; g.font = font; g.fillText(text, 4, 28)
                return g.getImageData(0, 0, 80, 40).data.join()
              }
              return { a: draw('承'), b: draw('認'), blank: draw('') }
            }"""
        )
        assert drawn["a"] != drawn["b"], "Japanese renders as missing-glyph boxes"
        assert drawn["blank"] not in (drawn["a"], drawn["b"])


# ----------------------------------------------------------------------------- 6. axe-core


def audit(target: Page | Frame, state: str) -> None:
    """axe-core on one document: no serious or critical violation."""
    result = Axe().run(target)
    bad = [v for v in result.response["violations"] if v["impact"] in ("serious", "critical")]
    report = "\n".join(
        f"  {v['id']} ({v['impact']}): {v['help']}\n"
        + "\n".join(f"    {n['target']}: {n.get('failureSummary', '')!r}" for n in v["nodes"][:5])
        for v in bad
    )
    assert not bad, f"axe-core, {state}:\n{report}"


def _open_chat(page: Page, demo: Demo) -> Frame:
    open_chat(page, demo.board)
    return widget_frame(page)


def _confirmation_card(page: Page, demo: Demo) -> Frame:
    widget = open_chat(page, demo.board)
    say(widget, "What should I work on next?")  # lists, bold, a result
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    confirmation(widget)
    return widget_frame(page)


def _form_fallback(page: Page, demo: Demo) -> Frame:
    page.goto(demo.board)
    page.locator("[data-part=toggle-manual-create]").check()
    card = confirmation(open_chat(page, demo.board))
    card.locator("[data-part=approve]").click()
    form = card.locator("[data-part=form][data-purpose=answer]")
    form.locator("[data-part=submit]").click()  # the id is missing: inline errors
    expect(form.locator("[data-part=field-error]:visible")).to_have_count(1)
    return widget_frame(page)


def _dark_theme(page: Page, demo: Demo) -> Frame:
    widget = open_chat(page, f"{demo.board}?theme=dark")
    say(widget, "What should I work on next?")
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    confirmation(widget).locator("[data-part=reject]").click()  # the reason box too
    return widget_frame(page)


def _origin_not_allowed(page: Page, demo: Demo) -> Frame:
    page.goto(f"{demo.hostcall}/widget/planner?origin=http://evil.example")
    expect(page.locator("[data-part=page-error]")).to_be_visible()
    return page.main_frame


STATES: dict[str, Callable[[Page, Demo], Frame]] = {
    "open-chat": _open_chat,
    "confirmation-card": _confirmation_card,
    "form-fallback": _form_fallback,
    "dark-theme": _dark_theme,
    "origin-not-allowed-403": _origin_not_allowed,
}


@pytest.mark.parametrize("state", list(STATES))
def test_axe_finds_no_serious_violation(page: Page, demo: Demo, state: str) -> None:
    audit(STATES[state](page, demo), state)


# ----------------------------------------------------------------------------- 7. keyboard


def tab_to_launcher(page: Page) -> Locator:
    """Tab through the page's own controls to the launcher (the last one)."""
    button = launcher(page)
    for _ in range(10):
        page.keyboard.press("Tab")
        if button.evaluate("el => el === document.activeElement"):
            break
    expect(button).to_be_focused()
    return button


def test_keyboard_only_open_send_approve_and_close(page: Page, demo: Demo) -> None:
    page.goto(demo.board)
    button = tab_to_launcher(page)
    widget = page.frame_locator(WIDGET)
    panel = page.locator("[data-part=hostcall-panel]")

    page.keyboard.press("Enter")
    expect(panel).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(
        widget.locator("[data-part=composer-input]"), "opened: focus in the composer"
    ).to_be_focused()

    page.keyboard.type("Add a task to review the Q3 report before Friday")
    page.keyboard.press("Enter")
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    approve = card.locator("[data-part=approve]")
    expect(approve, "the question takes the focus").to_be_focused()
    page.keyboard.press("Tab")
    expect(card.locator("[data-part=edit]")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(approve).to_be_focused()
    page.keyboard.press("Enter")
    expect(card).to_have_attribute("data-state", "done")
    expect(page.locator("[data-part=task]", has_text="Review the Q3 report")).to_be_visible()

    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(button, "closed: focus back on the launcher").to_be_focused()
    expect(button).to_have_attribute("aria-expanded", "false")


def test_keyboard_reopening_with_space_moves_focus_into_the_chat(page: Page, demo: Demo) -> None:
    page.goto(demo.board)
    button = tab_to_launcher(page)
    composer = page.frame_locator(WIDGET).locator("[data-part=composer-input]")
    panel = page.locator("[data-part=hostcall-panel]")
    page.keyboard.press(" ")
    expect(composer, "opened with Space: focus in the composer").to_be_focused()
    page.keyboard.press("Escape")
    expect(button, "closed: focus back on the launcher").to_be_focused()

    # Again and again: the frame may get the page's "focus" before it is laid out again,
    # when its composer cannot take focus yet (it raced about once in a dozen reopenings).
    for again in range(6):
        page.keyboard.press(" ")
        expect(panel).to_be_visible()
        # Otherwise every space typed next toggles the panel from the launcher.
        expect(composer, f"opened again ({again}): focus in the composer").to_be_focused()
        page.keyboard.press("Escape")
        expect(button, "closed: focus back on the launcher").to_be_focused()


def test_focus_goes_to_the_composer_after_a_decision(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo.board)
    card = confirmation(widget)
    approve = card.locator("[data-part=approve]")
    expect(approve).to_be_focused()
    page.keyboard.press("Enter")
    expect(card).to_have_attribute("data-state", "done")
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    # The focused button is gone with the question; focus must not fall to <body>.
    expect(widget.locator("[data-part=composer-input]")).to_be_focused()


# ----------------------------------------------------------------------------- 8. standalone


def test_standalone_widget_answers_client_tools_with_the_form(page: Page, demo: Demo) -> None:
    page.goto(f"{demo.hostcall}/widget/planner")
    expect(page.locator("html")).to_have_attribute("data-mode", "standalone")
    expect(page.locator("[data-part=send]")).to_be_enabled()
    expect(page.locator("[data-part=close]")).to_have_count(0)

    say(page, "What should I work on next?")
    card = page.locator("[data-part=tool-call][data-tool=read_board_tasks]")
    form = card.locator("[data-part=form][data-purpose=answer]")
    expect(form).to_be_visible()
    expect(card).to_have_attribute("data-state", "waiting")
    expect(card.locator("[data-part=tool-call-note]")).to_have_text(
        "The agent needs a result for this action. Fill it in below."
    )
    form.locator("[data-part=add-item]").click()
    form.locator("[data-path='/tasks/0/title']").fill("Write the launch post")
    form.locator("[data-path='/tasks/0/status']").fill("todo")
    form.locator("[data-part=submit]").click()
    expect(card).to_have_attribute("data-state", "done")
    reply = page.locator("[data-part=message][data-role=assistant]").last
    expect(reply).to_contain_text("Write the launch post")
    shot(page, "ui-standalone-answered")


# ----------------------------------------------------------------------------- 9. inline, dark


def test_inline_mount_renders_in_the_page(page: Page, demo: Demo) -> None:
    page.goto(f"{demo.board}?mount=inline")
    aside = page.get_by_role("complementary", name="Assistant")
    frame = aside.locator(WIDGET)
    expect(frame).to_be_visible()
    expect(launcher(page)).to_have_count(0)
    widget = page.frame_locator(WIDGET)
    expect(widget.locator("html")).to_have_attribute("data-mode", "inline")
    expect(widget.locator("[data-part=close]")).to_have_count(0)
    box = frame.bounding_box()
    assert box and box["height"] >= 400, box

    say(widget, "What should I work on next?")
    card = widget.locator("[data-part=tool-call][data-tool=read_board_tasks]")
    expect(card).to_have_attribute("data-state", "done")
    expect(widget.locator("[data-part=send]")).to_be_enabled()
    shot(page, "ui-inline")


def test_dark_theme_renders_dark(page: Page, demo: Demo) -> None:
    widget = open_chat(page, f"{demo.board}?theme=dark")
    expect(widget.locator("html")).to_have_attribute("data-theme", "dark")
    colours: dict[str, Any] = widget_frame(page).evaluate(
        """() => ({
          scheme: getComputedStyle(document.documentElement).colorScheme,
          body: getComputedStyle(document.body).backgroundColor,
          text: getComputedStyle(document.body).color,
        })"""
    )
    assert colours == {"scheme": "dark", "body": "rgb(21, 23, 28)", "text": "rgb(231, 233, 238)"}
    confirmation(widget)
    shot(page, "ui-dark", readme="dark-theme")


# ----------------------------------------------------------------------------- readable cards


def test_confirmation_card_shows_no_due_date_the_user_did_not_give(page: Page, demo: Demo) -> None:
    widget = open_chat(page, demo.board)
    say(widget, "Add a task to ship the release")  # no "before …": no due date
    card = widget.locator("[data-part=tool-call][data-tool=create_task]")
    expect(card.locator("[data-part=approve]")).to_be_visible()
    shown = card.locator("[data-part=tool-call-input]")
    expect(shown.locator("dd[data-key=title]")).to_have_text("Ship the release")
    # The scripted model renders the unmatched `due` group as the string "None".
    expect(shown.locator("dd[data-key=dueDate]")).to_have_count(0)


def test_long_field_titles_leave_room_for_the_values(page: Page, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    shutil.copytree(ROOT / "demo" / "agents", agents)
    planner = json.loads((agents / "planner.json").read_text())
    tool = next(t for t in planner["tools"] if t["name"] == "create_task")
    long_title = "The title of the task, exactly as it will appear on the board"
    tool["input_schema"]["properties"]["title"]["title"] = long_title
    (agents / "planner.json").write_text(json.dumps(planner))
    demo = start_demo(tmp_path, extra=["--agents", str(agents)])
    try:
        card = confirmation(open_chat(page, demo.board))
        shown = card.locator("[data-part=tool-call-input] [data-part=value]")
        expect(shown.get_by_text(long_title)).to_be_visible()
        widths = shown.evaluate(
            """dl => ({ list: dl.clientWidth,
                       value: Math.min(...[...dl.children].filter(el => el.tagName === 'DD')
                                             .map(dd => dd.clientWidth)) })"""
        )
        shot(page, "ui-long-field-title")
        assert widths["value"] >= widths["list"] / 3, f"values squeezed to one column: {widths}"
    finally:
        demo.stop()
