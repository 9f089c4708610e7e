"""Files sent with a message, in real Chromium: the widget framed in the task board
(localhost) from Hostcall (127.0.0.1), its planner given an ``attachments`` block and scripted
rules that match a file. A file is chosen with the attach button, dropped on the chat or
pasted; it waits as a chip and nothing is uploaded before Send; the scripted model sees the
image; a reload draws it again from the server. An SVG and a page, each named ``.png``, are
refused by the server with the reason, and nothing else is lost: the typed text and the other
file stay."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Frame, FrameLocator, Page, Request, Route, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo

pytestmark = pytest.mark.e2e
SLOW = 15_000
PHONE = {"width": 390, "height": 760}
ATTACHMENTS = {"max_files": 3, "types": {"image/png": "64KB", "text/plain": "16KB"}}
# First: a message with a PNG, whatever its text (empty too), is answered about the image;
# one with a text file, about the file.
RULES = [
    {"match": "", "attachment": {"type": "image/png"},
     "reply": "I see your image {{ attachment.name }} ({{ attachment.type }})."},
    {"match": "", "attachment": {"type": "text/plain", "name": "*.txt"},
     "reply": "I read {{ attachment.name }}."},
]  # fmt: skip
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="parent.hacked=1">'
    b'<rect width="9" height="9"/></svg>'
)
PAGE = b"<!doctype html><script>parent.hacked = 1</script><h1>not an image</h1>"


def png(width: int = 48, height: int = 32, rgb: tuple[int, int, int] = (226, 92, 40)) -> bytes:
    """A real PNG of one colour (no imaging library: a few chunks by hand)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture(autouse=True, scope="module")
def patient() -> Iterator[None]:
    """Every assertion here waits up to SLOW (a loaded machine streams late), then the
    default again for the modules after this one."""
    expect.set_options(timeout=SLOW)
    yield
    expect.set_options(timeout=5_000)


@dataclass(frozen=True)
class Site:
    demo: Demo
    files: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The demo, its planner taking PNG images and text files; the files a visitor has."""
    tmp = tmp_path_factory.mktemp("attachments")
    agents = tmp / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    planner["attachments"] = ATTACHMENTS
    planner["model"]["rules"] = RULES + planner["model"]["rules"]
    (agents / "planner.json").write_text(json.dumps(planner))
    files = tmp / "files"
    files.mkdir()
    (files / "sunset.png").write_bytes(png())
    (files / "notes.txt").write_text("Buy milk\n")
    (files / "drawing.png").write_bytes(SVG)  # an SVG named .png
    (files / "page.png").write_bytes(PAGE)  # a web page named .png
    (files / "logo.svg").write_bytes(SVG)  # an SVG as itself
    (files / "huge.png").write_bytes(png(300, 300) + bytes(80 * 1024))  # past 64 KB
    demo = start_demo(tmp, extra=["--agents", str(agents)])
    yield Site(demo, files)
    demo.stop()


class Held:
    """A route's handler that keeps its requests until ``release``, then lets all go."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self.released = False

    def __call__(self, route: Route) -> None:
        if self.released:
            route.continue_()
        else:
            self.routes.append(route)

    def release(self) -> None:
        self.released = True
        for route in self.routes:
            route.continue_()


def board(browser: Browser, site: Site, *, theme: str = "light", phone: bool = False,
          locale: str = "en-US",
          held: Held | None = None) -> tuple[Page, Widget]:  # fmt: skip
    """The visitor's task board, the chat opened (the widget able to send). ``held``: the
    widget's file code is held back, its stylesheet kept from it until released."""
    size = PHONE if phone else {"width": 900, "height": 820}
    options: dict[str, object] = (
        {"is_mobile": True, "has_touch": True, "screen": PHONE} if phone else {}
    )
    context = browser.new_context(viewport=size, locale=locale, color_scheme=theme, **options)  # type: ignore[arg-type]
    page = context.new_page()
    page.set_default_timeout(SLOW)
    page.on("request", lambda r: LOADED.setdefault(page, []).append(r.url.split("?")[0]))
    if held is not None:
        page.route("**/attach.css", held)
    page.goto(f"{site.demo.board}?theme={theme}")
    widget = Widget(page, timeout=SLOW).open()
    return page, widget


def frame_of(page: Page) -> Frame:
    frame = page.frame(url=lambda url: "/widget/" in url)
    assert frame is not None, "the widget frame is not loaded"
    return frame


def uploads(page: Page) -> list[Request]:
    """Every upload the widget makes from now on."""
    made: list[Request] = []
    page.on("request", lambda r: r.method == "POST" and "/attachments" in r.url and made.append(r))
    return made


def chip(chat: FrameLocator, name: str):  # type: ignore[no-untyped-def]
    named = chat.locator("[data-part=attachment-name]").get_by_text(name, exact=True)
    return chat.locator("[data-part=attachment-chip]").filter(has=named)


def image_drawn(page: Page, selector: str) -> None:
    """Wait until the thread's image under ``selector`` has loaded and has pixels."""
    frame_of(page).wait_for_function(
        "s => [...document.querySelectorAll(s)].some(i => i.complete && i.naturalWidth > 0)",
        arg=selector,
        timeout=SLOW,
    )


#: Every URL each page requested, from its first.
LOADED: dict[Page, list[str]] = {}


def loaded(page: Page, name: str) -> bool:
    return any(url.endswith(f"/static/{name}") for url in LOADED.get(page, []))


THREAD_IMAGE = "[data-part=message][data-role=user] [data-part=message-attachment] img"


def test_a_file_chosen_with_the_button_goes_on_send_and_is_there_after_a_reload(
    browser: Browser, site: Site
) -> None:
    page, widget = board(browser, site)
    chat = widget.frame
    made = uploads(page)
    attach = chat.get_by_label("Attach files")
    expect(attach).to_have_attribute("accept", "image/png,text/plain")
    # Reached by keyboard, before the text box.
    chat.locator("[data-part=composer-input]").focus()
    page.keyboard.press("Shift+Tab")
    expect(attach).to_be_focused()
    # The open chat has the button (files.js); the chips' code comes with the first file.
    assert loaded(page, "files.js") and not loaded(page, "attach.js"), LOADED[page]
    widget.attach([site.files / "sunset.png", site.files / "notes.txt"])
    assert loaded(page, "attach.js")
    sunset = chip(chat, "sunset.png")
    expect(sunset).to_have_attribute("data-state", "ready")
    expect(sunset.locator("img[data-part=attachment-thumb]")).to_have_count(1)
    expect(chip(chat, "notes.txt").locator("[data-part=attachment-icon]")).to_have_text("TXT")
    expect(chat.locator("[data-part=live]")).to_have_text(
        "notes.txt attached. It is sent with your next message."
    )
    # Removed by keyboard: focus stays with the files, on the remove button of another.
    chip(chat, "notes.txt").get_by_role("button", name="Remove notes.txt").focus()
    page.keyboard.press("Enter")
    expect(chat.locator("[data-part=attachment-chip]")).to_have_count(1)
    expect(sunset.get_by_role("button", name="Remove sunset.png")).to_be_focused()
    shot(page, "attachments-chips-light")
    assert made == [], "nothing is uploaded before Send"

    # Send: while the upload is on its way, its progress is said; then the message goes.
    seen: list[str] = []

    def while_uploading(route: Route) -> None:
        expect(chat.locator("[data-part=attachments-status]")).to_have_text("Uploading 1 of 1…")
        expect(sunset).to_have_attribute("data-state", "uploading")
        seen.append(route.request.url)
        route.continue_()

    page.route("**/attachments?name=*", while_uploading)
    box = chat.locator("[data-part=composer-input]")
    box.fill("What is in this picture?")
    box.press("Enter")
    reply = chat.locator("[data-part=message][data-role=assistant] [data-part=message-text]")
    expect(reply.last).to_have_text("I see your image sunset.png (image/png).")
    mine = chat.locator("[data-part=message][data-role=user]").last
    expect(mine.locator("[data-part=message-text]")).to_have_text("What is in this picture?")
    expect(mine.locator("[data-part=message-attachment]")).to_have_attribute(
        "data-type", "image/png"
    )
    image_drawn(page, THREAD_IMAGE)
    expect(chat.locator("[data-part=attachment-chip]")).to_have_count(0)  # sent: the chips go
    assert len(made) == 1 and "name=sunset.png" in made[0].url, [r.url for r in made]
    assert len(seen) == 1, "the progress was not shown while the file went up"
    widget.wait_until_idle()
    shot(page, "attachments-sent-light")

    # A reload: the thumbnail is drawn again, from the server's bytes.
    page.reload()
    widget = Widget(page, timeout=SLOW).open()
    mine = widget.frame.locator("[data-part=message][data-role=user]").last
    expect(mine.locator("[data-part=message-attachment] img")).to_have_attribute(
        "alt", "sunset.png"
    )
    image_drawn(page, THREAD_IMAGE)
    src = mine.locator("[data-part=message-attachment] img").get_attribute("src") or ""
    assert src.startswith("blob:"), src
    page.context.close()


def test_files_dropped_or_pasted_become_chips_and_go_alone(browser: Browser, site: Site) -> None:
    held = Held()
    page, widget = board(browser, site, held=held)
    chat = widget.frame
    made = uploads(page)
    frame = frame_of(page)
    image = list(png(24, 24, (40, 120, 220)))
    # Dropped on the conversation, as a DataTransfer from the desktop would be, at once: the
    # widget's file code still loading (no attach button yet), past its listeners (they come
    # before its stylesheet is asked for).
    chat.locator("link[href*='attach.css']").wait_for(state="attached")
    expect(chat.locator("[data-part=attach]")).to_have_count(0)
    frame.evaluate(
        """bytes => {
          const dt = new DataTransfer()
          dt.items.add(new File([new Uint8Array(bytes)], 'dropped.png', { type: 'image/png' }))
          const at = document.querySelector('[data-part=messages]')
          const init = { dataTransfer: dt, bubbles: true, cancelable: true }
          at.dispatchEvent(new DragEvent('dragover', init))
          at.dispatchEvent(new DragEvent('drop', init))
        }""",
        image,
    )
    held.release()
    expect(chip(chat, "dropped.png")).to_have_attribute("data-state", "ready")
    # Pasted in the composer (a screenshot on the clipboard).
    frame.evaluate(
        """() => {
          const dt = new DataTransfer()
          dt.items.add(new File(['Call the bank\\n'], 'pasted.txt', { type: 'text/plain' }))
          const init = { clipboardData: dt, bubbles: true, cancelable: true }
          document.querySelector('[data-part=composer-input]')
            .dispatchEvent(new ClipboardEvent('paste', init))
        }"""
    )
    expect(chip(chat, "pasted.txt")).to_have_attribute("data-state", "ready")
    assert made == [], "nothing is uploaded before Send"
    # Sent with no text: the message is its files alone.
    chat.locator("[data-part=send]").click()
    mine = chat.locator("[data-part=message][data-role=user]").last
    expect(mine.locator("[data-part=message-attachment]")).to_have_count(2)
    expect(mine).to_be_visible()
    reply = chat.locator("[data-part=message][data-role=assistant] [data-part=message-text]")
    expect(reply.last).to_have_text("I see your image dropped.png (image/png).")
    widget.wait_until_idle()
    expect(mine).to_be_visible()  # ended with no text, and kept
    expect(mine.locator("[data-part=message-attachment][data-type='text/plain']")).to_contain_text(
        "pasted.txt"
    )
    assert len(made) == 2, [r.url for r in made]
    page.context.close()


def test_an_svg_and_a_page_named_png_are_refused_with_why_and_nothing_is_lost(
    browser: Browser, site: Site
) -> None:
    page, widget = board(browser, site)
    chat = widget.frame
    made = uploads(page)
    # Refused at once by the agent's config, never uploaded: an SVG as itself, a PNG too large,
    # a fourth file past max_files (3).
    widget.attach([site.files / "logo.svg", site.files / "huge.png"])
    expect(chip(chat, "logo.svg")).to_have_attribute("data-state", "refused")
    expect(chip(chat, "logo.svg").locator("[data-part=attachment-reason]")).to_have_text(
        "logo.svg: this type of file is not accepted here."
    )
    expect(chip(chat, "huge.png").locator("[data-part=attachment-reason]")).to_have_text(
        "huge.png is too large (at most 64 kB)."
    )
    widget.attach([site.files / "drawing.png", site.files / "sunset.png", site.files / "page.png"])
    widget.attach([site.files / "notes.txt"])
    expect(chip(chat, "notes.txt").locator("[data-part=attachment-reason]")).to_have_text(
        "At most 3 files per message."
    )
    # Named .png, not PNG bytes: no picture drawn of them, ever.
    for name in ("drawing.png", "page.png"):
        expect(chip(chat, name).locator("img")).to_have_count(0)
        expect(chip(chat, name).locator("[data-part=attachment-icon]")).to_have_text("PNG")
    assert made == []

    box = chat.locator("[data-part=composer-input]")
    box.fill("Here are my pictures")
    box.press("Enter")
    # The server reads the SVG's bytes and refuses it: said by the file, read out; the text
    # is back in the composer; the other files wait; no message was sent.
    drawing = chip(chat, "drawing.png")
    expect(drawing).to_have_attribute("data-state", "refused")
    reason = "drawing.png was refused: its content is not a type accepted here."
    expect(drawing.locator("[data-part=attachment-reason]")).to_have_text(reason)
    expect(chat.locator("[data-part=live]")).to_have_text(reason)
    expect(box).to_have_value("Here are my pictures")
    expect(chip(chat, "sunset.png")).to_have_attribute("data-state", "ready")
    expect(chip(chat, "page.png")).to_have_attribute("data-state", "ready")
    expect(chat.locator("[data-part=message][data-role=user]")).to_have_count(0)
    expect(chat.locator("[data-part=error]")).to_have_count(0)
    widget.wait_until_idle()
    shot(page, "attachments-refused-light")

    # Sent again: the refused ones are dropped; the page named .png is refused in its turn.
    box.press("Enter")
    page_png = chip(chat, "page.png")
    expect(page_png.locator("[data-part=attachment-reason]")).to_have_text(
        "page.png was refused: its content is not a type accepted here."
    )
    expect(box).to_have_value("Here are my pictures")
    expect(chip(chat, "sunset.png")).to_have_attribute("data-state", "uploaded")  # not again
    expect(chip(chat, "drawing.png")).to_have_count(0)
    widget.wait_until_idle()

    # And again: the picture goes, uploaded once, with the text.
    box.press("Enter")
    reply = chat.locator("[data-part=message][data-role=assistant] [data-part=message-text]")
    expect(reply.last).to_have_text("I see your image sunset.png (image/png).")
    mine = chat.locator("[data-part=message][data-role=user]")
    expect(mine).to_have_count(1)
    expect(mine.locator("[data-part=message-text]")).to_have_text("Here are my pictures")
    expect(mine.locator("[data-part=message-attachment]")).to_have_count(1)
    expect(chat.locator("[data-part=attachment-chip]")).to_have_count(0)
    names = sorted(r.url.split("name=")[1] for r in made)
    assert names == ["drawing.png", "page.png", "sunset.png"], names
    assert frame_of(page).evaluate("() => window.hacked === undefined")
    assert page.evaluate("() => window.hacked === undefined")
    page.context.close()


@pytest.mark.parametrize(
    ("theme", "phone", "locale"), [("dark", False, "fr-FR"), ("light", True, "ja-JP")]
)
def test_chips_and_thumbnails_in_dark_in_french_and_on_a_phone(
    browser: Browser, site: Site, theme: str, phone: bool, locale: str
) -> None:
    page, widget = board(browser, site, theme=theme, phone=phone, locale=locale)
    chat = widget.frame
    lang = locale[:2]
    attach = chat.locator("[data-part=attach]")
    expect(attach.locator("input[type=file]")).to_have_accessible_name(
        {"fr": "Joindre des fichiers", "ja": "ファイルを添付"}[lang]
    )
    if phone:  # touch-sized
        box = attach.bounding_box()
        assert box and box["height"] >= 44, box
    widget.attach([site.files / "sunset.png", site.files / "notes.txt", site.files / "logo.svg"])
    expect(chip(chat, "logo.svg")).to_have_attribute("data-state", "refused")
    name = f"attachments-{'phone' if phone else theme}-{lang}"
    shot(page, f"{name}-chips")
    chat.locator("[data-part=composer-input]").fill("?")
    chat.locator("[data-part=send]").click()
    image_drawn(page, THREAD_IMAGE)
    widget.wait_until_idle()
    shot(page, f"{name}-sent")
    page.context.close()
