"""docs/protocol.md and the server agree: error codes, events, and the fields of the bodies."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hostcall.errors import ToolErrorCode
from hostcall.protocol.codes import ErrorCode, RunErrorCode
from hostcall.protocol.events import CustomName, EventType
from hostcall.settings import ROOT
from tests.unit.conftest import BOARD, Harness

DOC = (ROOT / "docs" / "protocol.md").read_text()
# The modules behind the documented API (the console, models and blocks have their own docs).
PACKAGE = ROOT / "server" / "hostcall"
API_SOURCES = [*PACKAGE.glob("*.py"), *(PACKAGE / "protocol").glob("*.py")]


def _section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end > 0 else None]


def test_the_documented_error_codes_are_the_protocol_module_s() -> None:
    rows = [line for line in _section("Errors").splitlines() if re.match(r"\| \d{3} \|", line)]
    columns = [re.sub(r"\([^()]*\)", "", row.split("|")[2]) for row in rows]  # no asides
    documented = {code for column in columns for code in re.findall(r"`([a-z_]+)`", column)}
    assert documented == {c.value for c in ErrorCode}


def test_every_error_code_the_api_raises_is_a_known_code() -> None:
    known = {c.value for c in (*ErrorCode, *RunErrorCode, *ToolErrorCode)}
    raised: dict[str, Path] = {}
    for path in API_SOURCES:
        for code in re.findall(r'\bcode(?:=| = |=code or )"([a-z_]+)"', path.read_text()):
            raised[code] = path
    unknown = {code: str(path.relative_to(ROOT)) for code, path in raised.items()
               if code not in known}  # fmt: skip
    assert not unknown, f"add these to hostcall/protocol/codes.py and docs/protocol.md: {unknown}"


def test_every_documented_error_code_is_raised_somewhere() -> None:
    source = "\n".join(
        p.read_text() for p in (ROOT / "server" / "hostcall").rglob("*.py") if p.name != "codes.py"
    )
    never = [c.value for c in ErrorCode
             if f'"{c.value}"' not in source and f"ErrorCode.{c.name}" not in source]  # fmt: skip
    assert never == []


def test_every_event_is_documented() -> None:
    events = _section("Event stream")
    for kind in EventType:
        assert f"| `{kind.value}` |" in events, kind
    for name in CustomName:
        assert f"| `{name.value}` |" in events, name


def _keys(value: Any, into: set[str]) -> set[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in ("input", "output", "inputSchema", "outputSchema", "properties"):
                into.add(key)
                _keys(item, into)
            else:
                into.add(key)
    elif isinstance(value, list):
        for item in value:
            _keys(item, into)
    return into


def test_every_field_of_the_snapshot_and_of_conversation_creation_is_documented(
    harness: Harness,
) -> None:
    r = harness.http.post("/api/agents/planner/conversations", json={"locale": "fr"})
    created = r.json()
    conv = harness.conversation()
    auth = conv.auth
    harness.http.post(f"/api/conversations/{conv.id}/capabilities",
                      json={"tools": ["read_board_tasks"]}, headers=auth)  # fmt: skip
    harness.say(conv, "What should I work on next?")
    assert harness.answer(harness.open_call(conv), BOARD).status_code == 200
    harness.say(conv, "Add a task to write the notes")
    call = harness.open_call(conv)
    snap = harness.settle(conv)
    missing = sorted(k for k in _keys(snap, set()) | _keys(created, set())
                     if f'"{k}"' not in DOC and f"`{k}`" not in DOC)  # fmt: skip
    assert missing == [], f"fields the server sends that docs/protocol.md does not name: {missing}"
    assert call["state"] == "awaiting_confirmation"


def test_a_second_decision_after_an_approval_with_edits_is_input_changed(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    harness.say(conv, "Add a task to write the notes")
    call = harness.open_call(conv)
    edited = {"title": "Write the release notes", "description": "", "dueDate": ""}
    assert harness.decide(call, "approve", input=edited).status_code == 200
    before = harness.events(conv)
    r = harness.decide(call, "reject", reason="changed my mind")
    assert r.status_code == 409 and r.json()["error"]["code"] == "input_changed"
    assert harness.events(conv) == before
    assert "`409 input_changed` after an approval with edits" in DOC.replace("\n", " ")
