"""The browser bench's section 5: an image sent with a message, from Send to the model's first
byte in the widget, against a text-only message in the same widget of the same run.

The agent is ``bench-files`` (bench/servers.py): the bench's planner with an ``attachments``
block and a scripted rule that answers a message carrying a PNG. In the widget, the file is
chosen with the attach button (Playwright's ``set_input_files``, as a visitor's picker gives
it); then Send is pressed, stamped on the frame's clock, and the first ``TEXT_MESSAGE_CONTENT``
of the assistant's reply is stamped as it reaches the widget's EventSource. The image's path
is the upload (``POST .../attachments``, its bytes), the message with the file's id, the
run, and the model's first byte, which a file-less message skips the first step of; the
baseline is a message the planner answers at once ("hello"), alternating with the image in
one widget. The upload's own part is read from Resource Timing.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from report import compare, kib, ms, print_table, summary

if TYPE_CHECKING:
    from browser_bench import Env, Mode

AGENT = "bench-files"
PAIRS = 5  # image and text messages per widget, then a fresh one (it slows as it grows)
# Stamps on the frame's clock: the first content event of each assistant message.
PROBE = """if (location.pathname.startsWith('/widget/')) {
  window.benchAt = () => performance.timeOrigin + performance.now()
  window.benchFirst = []
  const assistant = new Set()
  window.EventSource = class extends EventSource { constructor (...args) { super(...args)
    this.addEventListener('TEXT_MESSAGE_START', e => {
      const d = JSON.parse(e.data); if (d.role === 'assistant') assistant.add(d.messageId) })
    this.addEventListener('TEXT_MESSAGE_CONTENT', e => {
      const d = JSON.parse(e.data)
      if (assistant.delete(d.messageId)) benchFirst.push(benchAt()) }) } }
}"""
# Press Send, stamped: the composer's own submit, as Enter does.
SEND = """text => { const box = document.querySelector('[data-part=composer-input]')
  box.value = text
  const at = benchAt()
  document.querySelector('[data-part=composer]').requestSubmit()
  return at }"""
# The uploads' Resource Timing, on the frame's clock: [fetch called, response ends].
UPLOADS = """() => performance.getEntriesByType('resource')
  .filter(e => e.name.includes('/attachments?'))
  .map(e => [e.startTime + performance.timeOrigin, e.responseEnd + performance.timeOrigin])"""
TEXT = "hello"  # the planner's greeting rule: a reply, no tool
ASK = "What is in this picture?"  # with the image: the bench-files rule


def photo(side: int = 180) -> bytes:
    """A PNG of noise (``side`` x ``side``, RGB): about as large compressed as raw, like a
    photograph (~95 KiB at 180 px)."""
    noise = os.urandom(side * side * 3)
    rows = b"".join(b"\x00" + noise[y * side * 3 : (y + 1) * side * 3] for y in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def attachment(env: Env, mode: Mode, workdir: Path) -> None:
    image = workdir / "photo.png"
    image.write_bytes(photo())
    timed: dict[str, list[float]] = {"image": [], "text": []}
    upload: list[float] = []
    total = mode.warmup + mode.round_trips
    done = 0
    while done < total:
        page = env.new_page()
        page.context.add_init_script(PROBE)
        try:
            page.goto(env.host_page(True, agent=AGENT))
            page.evaluate("Hostcall('open')")
            page.wait_for_function("bench.ready")
            frame = next(f for f in page.frames if f"/widget/{AGENT}" in f.url)
            idle = frame.locator("html[data-agent-state=idle]")
            picker = frame.locator("[data-part=attach] input[type=file]")
            chips = frame.locator("[data-part=attachment-chip][data-state=ready]")
            # Untimed: the conversation made by a first message, and attach.js imported by
            # a file chosen and removed, so every timed message meets the same widget.
            replies = frame.evaluate("benchFirst.length")
            frame.evaluate(SEND, TEXT)
            frame.wait_for_function("n => benchFirst.length > n", arg=replies)
            picker.set_input_files(str(image))
            frame.locator("[data-part=attachment-remove]").click()
            chips.wait_for(state="detached")
            for i in range(done, min(total, done + PAIRS)):
                # Each goes first in every other pair: neither always meets a warmer widget.
                for kind in ("image", "text") if i % 2 else ("text", "image"):
                    idle.wait_for(state="attached")
                    if kind == "image":
                        picker.set_input_files(str(image))
                        chips.wait_for()
                    replies = frame.evaluate("benchFirst.length")
                    sent = frame.evaluate(SEND, ASK if kind == "image" else TEXT)
                    frame.wait_for_function("n => benchFirst.length > n", arg=replies)
                    first = frame.evaluate(f"benchFirst[{replies}]")
                    if i >= mode.warmup:
                        timed[kind].append((first - sent) / 1000)
            idle.wait_for(state="attached")
            warm = max(0, min(PAIRS, mode.warmup - done))  # this widget's warm-up images
            upload += [(end - start) / 1000 for start, end in frame.evaluate(UPLOADS)[warm:]]
        finally:
            page.context.close()
        done += PAIRS
    env.hc.check_alive()
    image_s, text_s, upload_s = summary(timed["image"]), summary(timed["text"]), summary(upload)
    print_table(
        f"5. An image attachment: Send -> the model's first byte in the widget, headless "
        f"Chromium, n={len(timed['image'])} each after {mode.warmup} warm-up, alternating in "
        "one widget",
        [
            *(
                compare(
                    f"Send -> first model byte in the widget's JS, {stat}",
                    image_s[stat],
                    text_s[stat],
                    ms,
                    None,
                )
                for stat in ("p50", "p99", "mean")
            ),
            (
                "of which the upload (POST /attachments: fetch called -> response ends), p50",
                ms(upload_s["p50"]),
                "-",
                f"{upload_s['p50'] / image_s['p50']:.0%} of it",
                "-",
                "info",
            ),
            ("the image", kib(image.stat().st_size), "-", "-", "-", "info"),
        ],
        [
            f"image: a {kib(image.stat().st_size)} PNG of noise chosen with the attach button, "
            f"then Send with {ASK!r} (upload, message with its id, run); text: {TEXT!r} (the "
            "message, run); both answered by a scripted rule at once",
            "stamped on the widget frame's clock: Send (the composer's submit) and the first "
            "TEXT_MESSAGE_CONTENT of the assistant's reply reaching its EventSource; the "
            f"upload from Resource Timing; a fresh widget every {2 * PAIRS} messages, after an "
            "untimed first message and a file chosen and removed (attach.js imported)",
        ],
        header=("measure", "image", "text only", "ratio", "target", "verdict"),
    )
