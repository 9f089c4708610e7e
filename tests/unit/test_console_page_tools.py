"""A page's own tool in the operator console: its call says so, in the conversation's JSON and
on its page (in each of the console's languages), with the digest of the registration the
run planned with; an agent file's tool of the same conversation says nothing of the kind."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.console.text import LOCALES, TEXT
from tests.support.harness import Harness, write_agent
from tests.unit.console_client import ConsoleClient, fast_passwords
from tests.unit.test_page_tools import BOARD, NOTE, digest, offer

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

SIZES_RULE = {"match": "which sizes", "tool": "sizes", "arguments": {}, "reply": "Sizes."}
AGENT: dict[str, Any] = {
    **BOARD,
    "model": {**BOARD["model"], "rules": [*BOARD["model"]["rules"], SIZES_RULE]},
}
SURFACE = "tab-a-0000"


@pytest.fixture
def board(tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, AGENT)
    h = Harness(tmp_path, agents_dir)
    yield h
    h.stop()


def page_data(text: str) -> dict[str, Any]:
    """The JSON block the conversation page's script reads (console/render.py)."""
    found = re.search(r'<script type="application/json" id="hc-data">(.*?)</script>', text, re.S)
    assert found, "no data block in the page"
    data: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return data


def test_a_page_tools_call_is_marked_with_its_digest_and_an_agent_files_is_not(
    board: Harness,
) -> None:
    h = board
    conv = h.conversation("board")
    assert offer(h, conv, SURFACE, [NOTE], tools=["sizes"]).status_code == 200
    h.say(conv, "add a note")
    note = h.open_call(conv)
    assert h.answer(note, {"ok": True}).status_code == 200
    h.finish(conv)
    h.say(conv, "which sizes")
    sizes = h.open_call(conv)
    assert sizes["toolCallName"] == "sizes" and "pageTool" not in sizes
    operator = ConsoleClient(h.app, h.runtime, "olga", "operator")

    detail = operator.http.get(f"/console/api/conversations/{conv.id}").json()
    marks = {c["toolCallName"]: c["pageDigest"] for c in detail["calls"]}
    assert marks == {"add_note": digest(NOTE), "sizes": None}

    for lang in LOCALES:
        r = operator.http.get(f"/console/conversations/{conv.id}?lang={lang}")
        assert r.status_code == 200
        data = page_data(r.text)
        shown = {c["toolCallName"]: c["pageDigest"] for c in data["data"]["calls"]}
        assert shown == marks
        # The label the page's script writes beside the route, in the reader's language.
        assert data["t"]["page_tool"] == TEXT[lang]["page_tool"]
        assert "{digest}" in data["t"]["page_digest"]
