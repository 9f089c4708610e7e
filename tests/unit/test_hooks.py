"""The widget's test hooks are API: every ``data-part`` it creates is documented in
docs/testing.md, so a QA suite never depends on an undocumented selector."""

from __future__ import annotations

import re

from hostcall.assets import WIDGET_DIR
from hostcall.settings import ROOT

# Every way widget code names a part: h(…, {'data-part': 'x'}), form actions {part: 'x'},
# the shell's button('x', …) helper, el.dataset.part = 'x', and data-part="x" in templates.
PATTERNS = [
    r"'data-part': '([a-z-]+)'",
    r"\bpart: '([a-z-]+)'",
    r"\bbutton\('([a-z-]+)'",
    r"dataset\.part = '([a-z-]+)'",
    r'data-part="([a-z-]+)"',
]


def parts_in_code() -> set[str]:
    sources = [p.read_text() for p in WIDGET_DIR.glob("*.js")]
    sources += [(ROOT / "server" / "hostcall" / "templates" / "widget.html").read_text()]
    return {m for text in sources for pattern in PATTERNS for m in re.findall(pattern, text)}


def test_every_data_part_of_the_widget_is_documented_for_qa() -> None:
    found = parts_in_code()
    assert {"tool-call", "message-text", "approve", "hostcall-launcher"} <= found  # sanity
    documented = set(re.findall(r"`([a-z-]+)`", (ROOT / "docs" / "testing.md").read_text()))
    assert found - documented == set(), "document these in docs/testing.md"


def test_the_agent_finished_signal_is_documented() -> None:
    text = (ROOT / "docs" / "testing.md").read_text()
    assert "data-agent-state" in text and "`idle`" in text
    # Set with the changes it describes (chat.js), from the run's state (app.js).
    assert "dataset.agentState" in (WIDGET_DIR / "chat.js").read_text()
    assert "ui.setAgentState(" in (WIDGET_DIR / "app.js").read_text()
