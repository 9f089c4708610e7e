"""The database going away while a visitor writes, in Chromium, in each language: the
message the server could not take stays in the thread with a sentence saying so (never
an error code) and a Retry; once PostgreSQL is back, Retry sends it, once, and the
agent answers.

The demo runs on PostgreSQL through a TCP proxy on loopback that the test cuts and
restores (tests/support/proxy.py): a real 503 store_unavailable, not a mocked one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo, shot, start_demo
from tests.e2e.flows_helpers import SLOW, open_chat, snapshot
from tests.support.databases import fresh_schema
from tests.support.proxy import CuttableProxy, proxied

pytestmark = pytest.mark.e2e

# Strings copied from widget/locale-*.js on purpose: a missing key fails here.
SENTENCES = {
    "en": ("Not sent.", "The service is briefly unavailable. Please try again in a moment.",
           "Retry"),
    "fr": ("Non envoyé.", "Le service est momentanément indisponible. Réessayez dans un instant.",
           "Réessayer"),
    "es": ("No enviado.",
           "El servicio no está disponible por un momento. Inténtalo de nuevo en unos instantes.",
           "Reintentar"),
    "ja": ("送信されませんでした。",
           "サービスが一時的に利用できません。少し待ってからもう一度お試しください。", "再試行"),
}  # fmt: skip
HELLO = "Hello"


@pytest.fixture
def outage_demo(tmp_path: Path) -> Iterator[tuple[Demo, CuttableProxy]]:
    with fresh_schema() as url, proxied(url) as (proxy, through):
        running = start_demo(tmp_path, extra=["--db", through])
        try:
            yield running, proxy
        finally:
            running.stop()


@pytest.mark.parametrize("lang", list(SENTENCES))
def test_a_message_sent_while_the_database_is_down_says_so_and_retry_sends_it_once(
    page: Page, outage_demo: tuple[Demo, CuttableProxy], lang: str
) -> None:
    demo, proxy = outage_demo
    not_sent, sentence, retry = SENTENCES[lang]
    widget = open_chat(page, demo, f"?locale={lang}")

    proxy.cut()
    box = widget.frame.locator("[data-part=composer-input]")
    box.fill(HELLO)
    box.press("Enter")
    failed = widget.frame.locator("[data-part=message][data-state=failed]")
    expect(failed).to_have_count(1, timeout=SLOW)
    note = failed.locator("[data-part=message-failed]")
    expect(note).to_have_text(f"{not_sent} {sentence} {retry}")
    expect(note).not_to_contain_text("store_unavailable")
    button = failed.locator("[data-part=message-retry]")
    expect(button).to_have_accessible_name(retry)
    shot(page, f"outage-not-sent-{lang}")

    proxy.restore()
    deadline = time.monotonic() + 20
    while httpx.get(f"{demo.url}/healthz", timeout=2).status_code != 200:
        assert time.monotonic() < deadline, "the server did not recover"
        time.sleep(0.2)
    button.click()
    expect(failed).to_have_count(0)
    widget.wait_until_idle()
    expect(widget.last_reply()).not_to_have_text("", timeout=SLOW)
    # Sent once: the conversation holds one message from the visitor, and one run.
    snap = snapshot(page, demo)
    users = [m["text"] for m in snap["messages"] if m["role"] == "user"]
    assert users == [HELLO], users
    assert snap["run"]["status"] == "finished", snap["run"]
