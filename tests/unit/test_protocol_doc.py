"""docs/protocol.md and the server agree: error codes, events, and the fields of the bodies."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import Any

from hostcall.errors import ToolErrorCode
from hostcall.notices import RUN_NOTICES
from hostcall.protocol.codes import ErrorCode, RunErrorCode
from hostcall.protocol.events import CustomName, EventType
from hostcall.settings import ROOT
from tests.support.harness import BOARD, Harness

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


# String literals equal to a code that are not codes: (file, value) and why.
NOT_CODES = {("models/openai_compat.py", "timeout")}  # a model config key


def _code_literals(path: Path, known: set[str], root: Path = PACKAGE) -> list[str]:
    """The lines of ``path`` holding a plain string literal equal to an error code, beyond
    enum members' own definitions (``NAME = "value"``: an enum of another closed set, such as
    ``FormReason``, may share a value)."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type != tokenize.STRING or tok.string[:1] not in "\"'":
            continue  # f-strings, bytes and prefixed strings hold no code
        value = ast.literal_eval(tok.string)
        if value in known and not re.match(r"\s*[A-Z_]+ = ", tok.line):
            where = (str(path.relative_to(root)), value)
            if where not in NOT_CODES:
                found.append(f"{where[0]}:{tok.start[0]}: {tok.line.strip()}")
    return found


def test_no_error_code_is_written_as_a_string_outside_the_enums() -> None:
    known = {c.value for c in (*ErrorCode, *RunErrorCode, *ToolErrorCode)}
    literals = [line for path in sorted(PACKAGE.rglob("*.py")) if path.name != "codes.py"
                for line in _code_literals(path, known)]  # fmt: skip
    assert literals == [], "use the enum member (hostcall/protocol/codes.py, ToolErrorCode)"


def test_the_scan_for_string_codes_finds_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""Says unknown_call."""\nraise NotFound("gone", code="unknown_call")\n')
    found = _code_literals(sample, {"unknown_call"}, root=tmp_path)
    assert found == ['sample.py:2: raise NotFound("gone", code="unknown_call")']


def test_every_run_error_code_is_documented_and_has_a_notice() -> None:
    run_error = next(line for line in _section("Event stream").splitlines()
                     if line.startswith("| `RUN_ERROR` |"))  # fmt: skip
    assert [c for c in RunErrorCode if f"`{c.value}`" not in run_error] == []
    assert set(RUN_NOTICES) == set(RunErrorCode)


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
