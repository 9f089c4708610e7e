"""Shared steps of the flow and resilience tests: open the demo's chat, read the host page,
and look at the conversation as the server has it (the snapshot of docs/protocol.md).

The chat itself is driven with the QA kit's ``Widget`` (hostcall/qa/widget.py), as a site's
own suite would; everything is selected by role, label and `data-part`, the hooks the widget
documents.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Page

from hostcall.qa.widget import Widget
from tests.e2e.conftest import Demo

ASK_NEXT = "What should I work on next?"
ASK_ADD = "Add a task to review the Q3 report before Friday"
PROPOSED_TITLE = "Review the Q3 report"

# Generous for a first paint in a cold Chromium; the scripted model answers in milliseconds.
SLOW = 15_000


def open_chat(page: Page, demo: Demo, query: str = "") -> Widget:
    """Load the host page and open the chat with the QA kit's ``Widget``: it waits until
    the widget can send."""
    page.goto(demo.board + query)
    return Widget(page, timeout=SLOW).open()


def handler_runs(page: Page, tool: str) -> int:
    """How many times the host page's handler for `tool` ran (kept in sessionStorage)."""
    return int(page.evaluate("t => demoBoard.runs().filter(r => r.tool === t).length", tool))


def board_titles(page: Page, status: str | None = None) -> list[str]:
    """Task titles as the host page shows them, in board order."""
    column = f"[data-part=column][data-status={status}]" if status else "[data-part=board]"
    return page.locator(f"{column} [data-part=task-title]").all_inner_texts()


def session(page: Page, demo: Demo) -> dict[str, str]:
    """The widget's conversation: {conversationId, sessionToken}, read inside its frame from
    the widget's memory (it is stored nowhere a script could read it)."""
    frame = page.frame(url=lambda url: url.startswith(demo.hostcall))
    assert frame is not None, "the widget frame is not loaded"
    held = "async () => (await import('/static/app.js')).currentSession()"
    frame.wait_for_function(f"async () => ({held})().then(s => s.sessionToken)")
    saved = frame.evaluate(held)
    assert saved and saved.get("conversationId"), "the widget holds no conversation"
    return dict(saved)


def snapshot(page: Page, demo: Demo) -> dict[str, Any]:
    """GET /api/conversations/{id}: the conversation as the server has it."""
    # A new page's resume rotates the conversation's session: a tab it replaced
    # holds a dead token until its own next request resumes it. Ask this page first, then
    # its siblings.
    pages = [page, *(p for p in page.context.pages if p is not page)]
    for candidate in pages:
        saved = session(candidate, demo)
        response = httpx.get(
            f"{demo.hostcall}/api/conversations/{saved['conversationId']}",
            headers={"Authorization": f"Bearer {saved['sessionToken']}"},
            timeout=5,
        )
        if response.status_code != 401:
            break
    else:
        # The tab that resumed last is closed: resume as this page's widget would on its next
        # request (through its cookie, from its own frame), then read with that session.
        saved = _resume(page, demo)
        response = httpx.get(
            f"{demo.hostcall}/api/conversations/{saved['conversationId']}",
            headers={"Authorization": f"Bearer {saved['sessionToken']}"},
            timeout=5,
        )
    response.raise_for_status()
    return dict(response.json())


def _resume(page: Page, demo: Demo) -> dict[str, str]:
    frame = page.frame(url=lambda url: url.startswith(demo.hostcall))
    assert frame is not None, "the widget frame is not loaded"
    agent = urlsplit(frame.url).path.rsplit("/", 1)[-1]
    parent = "{0.scheme}://{0.netloc}".format(urlsplit(page.url))
    held = session(page, demo)["sessionToken"]  # sent as the widget does: no rotation
    resumed = frame.evaluate(
        """async ([agent, parent, held]) => {
            // The page's resume key, as the loader handed it to the widget (URL fragment).
            const resumeKey = new URLSearchParams(location.hash.slice(1)).get('key')
            const r = await fetch(`/api/agents/${agent}/session`, {
                method: 'POST', credentials: 'include',
                headers: {'content-type': 'application/json', authorization: `Bearer ${held}`},
                body: JSON.stringify({parentOrigin: parent, resumeKey})})
            return r.json()
        }""",
        [agent, parent, held],
    )
    assert resumed.get("sessionToken"), resumed
    return dict(resumed)


def calls_of(snap: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [c for c in snap["calls"] if c["toolCallName"] == tool]
