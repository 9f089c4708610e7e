"""An image result view in real Chromium (docs/agents.md "Views"): an image from an origin
the agent file lists is shown, fetched without a referrer; one from anywhere else (a
tracking pixel) is never fetched, only its description shown; the view comes back after a
reload. The images come from two loopback servers that keep what they are asked."""

from __future__ import annotations

import json
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hostcall.qa.widget import Widget
from hostcall.settings import DEMO_AGENTS
from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import SLOW, open_chat
from tests.e2e.test_ui import audit, widget_frame

pytestmark = pytest.mark.e2e


def _png(width: int, height: int) -> bytes:
    """A PNG of a blue-to-green gradient, drawn by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\0" + b"".join(bytes((40, 80 + 120 * x // width, 200 - 100 * y // height))
                         for x in range(width))
        for y in range(height)
    )  # fmt: skip
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = _png(240, 135)


class ImageHost:
    """A loopback server answering every GET with ``PNG``; ``asked`` keeps each request's
    path and Referer header."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []
        asked = self.asked

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked.append((self.path, self.headers.get("Referer")))
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _tool(allowed: str) -> dict[str, object]:
    return {
        "name": "show_photo",
        "title": "Show a photo",
        "description": "Shows the photo of a task from the page.",
        "input_schema": {"type": "object", "properties": {"which": {"type": "string"}}},
        "output_schema": {
            "type": "object",
            "properties": {"url": {"type": "string"}, "alt": {"type": "string"}},
            "required": ["url", "alt"],
        },
        "effect": "read",
        "view": {
            "type": "image",
            "image": {"src": "$.url", "alt": "$.alt"},
            "image_hosts": [allowed],
        },
    }


@pytest.fixture
def hosts() -> Iterator[tuple[ImageHost, ImageHost]]:
    allowed, tracker = ImageHost(), ImageHost()
    yield allowed, tracker
    allowed.close()
    tracker.close()


@pytest.fixture
def demo(tmp_path: Path, hosts: tuple[ImageHost, ImageHost]) -> Iterator[Demo]:
    """The demo, its planner given ``show_photo`` with an image view from ``allowed``."""
    allowed, _ = hosts
    agents = tmp_path / "agents"
    shutil.copytree(DEMO_AGENTS, agents)
    planner = json.loads((agents / "planner.json").read_text())
    planner["tools"].append(_tool(allowed.origin))
    planner["model"]["rules"][:0] = [
        {"match": f"(?i)show the {which}", "tool": "show_photo", "arguments": {"which": which},
         "reply": "There it is."}
        for which in ("photo", "pixel")
    ]  # fmt: skip
    (agents / "planner.json").write_text(json.dumps(planner))
    running = start_demo(tmp_path, extra=["--agents", str(agents)])
    yield running
    running.stop()


# The page's handler: the photo from the allowed host, the pixel from the tracker.
REGISTER = """([photo, pixel]) => Hostcall('register', 'show_photo', input =>
  input.which === 'pixel' ? {url: pixel, alt: 'A tracking pixel'}
                          : {url: photo, alt: 'The team at the launch'})"""


def _shown(widget: Widget, ask: str) -> None:
    widget.send(ask)
    expect(widget.call("show_photo").locator("[data-part=result-view]")).to_be_visible(timeout=SLOW)
    widget.wait_until_idle()


def test_an_image_view_shows_allowed_images_and_never_fetches_others(
    page: Page, demo: Demo, hosts: tuple[ImageHost, ImageHost]
) -> None:
    allowed, tracker = hosts
    widget = open_chat(page, demo)
    page.evaluate(REGISTER, [f"{allowed.origin}/team.png", f"{tracker.origin}/p.gif?u=visitor"])

    _shown(widget, "Show the photo")
    view = widget.call("show_photo").locator("[data-part=result-view]")
    expect(view).to_have_attribute("data-view", "image")
    img = view.locator("img[data-part=view-image]")
    expect(img).to_have_attribute("alt", "The team at the launch")
    expect(img).to_have_attribute("src", f"{allowed.origin}/team.png")
    img.scroll_into_view_if_needed()
    expect(img).to_have_js_property("complete", True, timeout=SLOW)
    assert img.evaluate("el => el.naturalWidth") == 240  # drawn, from the allowed host
    assert allowed.asked == [("/team.png", None)]  # asked once, told nothing of the page
    audit(widget_frame(page), "an image view")
    shot(page, "views-20-image")

    _shown(widget, "Show the pixel")
    expect(widget.calls("show_photo")).to_have_count(2)
    pixel = widget.call("show_photo").locator("[data-part=result-view]")
    # Only its description: no element would fetch it, and the page's CSP would refuse it.
    expect(pixel.locator("[data-part=view-image-alt]")).to_have_text("A tracking pixel")
    expect(pixel.locator("img")).to_have_count(0)
    shot(page, "views-21-image-refused")

    page.reload()
    widget = Widget(page, timeout=SLOW).open()
    views = widget.frame.locator("[data-part=result-view][data-view=image]")
    expect(views).to_have_count(2, timeout=SLOW)
    expect(views.first.locator("img")).to_have_attribute("alt", "The team at the launch")
    expect(views.last.locator("[data-part=view-image-alt]")).to_have_text("A tracking pixel")
    expect(views.first.locator("img")).to_have_js_property("complete", True, timeout=SLOW)
    assert tracker.asked == []  # never, before or after the reload
