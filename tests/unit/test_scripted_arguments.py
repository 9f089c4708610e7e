"""A scripted rule's argument templates: one that is exactly one expression keeps its JSON type
(a number for a number parameter), any other renders as text (docs/agents.md, the scripted
model)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.models.base import Message, ToolCallRequest
from hostcall.models.scripted import ScriptedModel
from tests.support.harness import Harness, write_agent
from tests.support.loopback import Live, live_server
from tests.unit.test_server_tools import finished


def _arguments(arguments: dict[str, Any], said: str) -> dict[str, Any]:
    model = ScriptedModel.from_config({"kind": "scripted", "rules": [
        {"match": r"(?P<n>\d+) days?(?: for (?P<who>\w+))?", "tool": "t",
         "arguments": arguments},
    ]})  # fmt: skip

    async def first_call() -> ToolCallRequest:
        async for event in model.stream([Message(role="user", text=said)], []):
            if isinstance(event, ToolCallRequest):
                return event
        raise AssertionError("no call")

    return dict(json.loads(asyncio.run(first_call()).arguments))


def test_a_template_that_is_one_expression_keeps_its_json_type() -> None:
    sent = _arguments({
        "days": "{{ n | int }}", "half": " {{ n | int / 2 }} ", "text": "{{ n }}",
        "label": "{{ n }} days", "both": "{{ n }}{{ n }}", "flag": "{{ n == '3' }}",
        "list": "{{ [n | int, who] }}", "nested": {"at": ["{{ n | int + 1 }}"]},
        "literal": 7, "who": "{{ who }}", "missing": "{{ nobody }}",
    }, "3 days")  # fmt: skip
    assert sent == {
        "days": 3,
        "half": 1.5,
        "text": "3",
        "label": "3 days",
        "both": "33",
        "flag": True,
        "list": [3, ""],
        "nested": {"at": [4]},
        "literal": 7,
    }  # an optional group that did not match and an unknown name still leave the key out


@pytest.fixture(scope="module")
def target() -> Iterator[Live]:
    with live_server() as live:
        yield live


def test_an_http_tool_with_a_number_parameter_gets_the_number(
    tmp_path: Path, target: Live, made: list[Harness]
) -> None:
    """Rendered as text, ``"3"`` failed the tool's input schema: ``invalid_arguments``."""
    directory = tmp_path / "agents"
    write_agent(directory, {"environments": {"dev": {"allowed_hosts": [target.host]}}},
                name="_platform.json")  # fmt: skip
    write_agent(directory, {
        "id": "weather", "environment": "dev",
        "model": {"kind": "scripted", "rules": [{
            "match": r"forecast for (?P<days>\d+) days", "tool": "forecast",
            "arguments": {"days": "{{ days | int }}"},
            "reply": "got {{ result.body.path }}",
            "error_reply": "error {{ error.code }}",
        }]},
        "tools": [{
            "name": "forecast", "kind": "http", "description": "The forecast.",
            "effect": "read",
            "ai_params": [{"key": "days", "type": "integer", "required": True}],
            "request": {"method": "GET", "url": f"{target.base}/echo/{{{{ $fromAI.days }}}}"},
            "deadline_seconds": 5,
        }],
    })  # fmt: skip
    h = Harness(tmp_path, directory)
    made.append(h)
    target.rec.clear()
    conv = h.conversation("weather")
    h.say(conv, "forecast for 3 days")
    snap = finished(h, conv)
    [call] = snap["calls"]
    assert call["state"] == "answered", call
    assert call["input"] == {"days": 3}
    assert target.rec.last.raw_path == "/echo/3"
    assert h.assistant_texts(conv)[-1] == "got /echo/3"
