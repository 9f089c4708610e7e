"""docs/testing.md's page-tools example, as a customer would run it: a module marked
``hostcall_webmcp`` (the plugin's Chromium with WebMCP on), a page registering its tool
through WebMCP alone, and ``Widget``'s page-tool helpers."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from hostcall.qa import HostPage, Widget

pytestmark = [pytest.mark.e2e, pytest.mark.hostcall_webmcp]

NOTES: dict[str, Any] = {
    "id": "notes",
    "name": "Notes",
    "page_tools": {"allow": ["add_note"], "tools": {"add_note": {"approval": "always"}}},
    "model": {
        "kind": "scripted",
        "rules": [
            {
                "match": r"(?i)^note (?P<text>.+)$",
                "tool": "add_note",
                "arguments": {"text": "{{ text }}"},
                "reply": "Noted: {{ result.saved }}.",
            }
        ],
        "fallback": "Ask me to note something.",
    },
}

REGISTER = """document.modelContext.registerTool({
  name: 'add_note', description: 'Adds a note.',
  inputSchema: {type: 'object', properties: {text: {type: 'string'}}, required: ['text']},
  execute: async ({text}) => ({saved: text}),
})"""


@pytest.fixture
def hostcall_agent() -> dict[str, Any]:
    return NOTES


def test_the_agent_adds_a_note_through_the_pages_own_tool(
    hostcall_page: Page, host_page: HostPage
) -> None:
    host_page.script = REGISTER
    hostcall_page.goto(host_page.url)
    notes = Widget(hostcall_page).open()
    assert notes.page_tools() == ["add_note"]
    assert notes.call_page_tool("add_note", {"text": "milk"}) == {"saved": "milk"}
    notes.send("note buy milk")
    notes.approve("add_note")
    expect(notes.last_reply()).to_have_text("Noted: buy milk.")
