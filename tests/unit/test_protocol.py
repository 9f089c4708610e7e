"""hostcall/protocol/: typed objects to wire JSON, the encoder, and the widget's generated copy."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from hostcall.errors import BadRequest, Unprocessable
from hostcall.protocol.events import (
    CallDispatched,
    CallStateChanged,
    EventType,
    RunError,
    RunStarted,
    ToolCallResult,
    encode,
)
from hostcall.protocol.frames import stored_event
from hostcall.protocol.js_constants import MESSAGES, MODULES, generate
from hostcall.protocol.limits import MAX_MESSAGE_CHARS
from hostcall.protocol.requests import CallResult, Decision, NewConversation, NewMessage
from hostcall.protocol.responses import CallView
from hostcall.protocol.wire import ALWAYS, camel, to_wire
from hostcall.settings import ROOT

WIDGET = ROOT / "widget"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_widget_protocol_modules_are_what_the_protocol_module_generates(name: str) -> None:
    committed = (WIDGET / name).read_text()
    assert committed == generate(name), (
        f"widget/{name} is stale: run python -m hostcall.protocol.js_constants {name} > "
        f"widget/{name}"
    )


def test_the_loader_builds_the_same_message_types_as_the_widget() -> None:
    # The loader's lazy half, bridge.js, is the page's side of the postMessage protocol.
    loader = (WIDGET / "bridge.js").read_text()
    words = re.search(r"for \(const k of '([a-z ]+)'\.split", loader)
    assert words is not None, "the bridge's message words moved: update this test"
    assert tuple(words.group(1).split()) == MESSAGES


def test_no_widget_module_spells_an_event_name_or_a_limit_by_hand() -> None:
    for path in WIDGET.glob("*.js"):
        if path.name in MODULES:
            continue
        text = path.read_text()
        assert "hostcall.tool_call_" not in text, path.name
        assert not re.search(r"'(RUN|TEXT_MESSAGE|TOOL_CALL)_[A-Z_]+'", text), path.name
        assert "256 * 1024" not in text and "262144" not in text, path.name


# ---- typed objects to JSON ------------------------------------------------------------------


def test_camel_case_is_made_in_one_place() -> None:
    assert camel("tool_call_id") == "toolCallId"
    assert camel("delta") == "delta"
    assert camel("parent_message_id") == "parentMessageId"


def test_none_fields_are_left_out_unless_the_shape_always_carries_them() -> None:
    @dataclass(frozen=True)
    class Shape:
        kept_null: Any = field(metadata=ALWAYS)
        left_out: str | None = None
        nested: Any = None

    inner = Shape(kept_null=None)
    assert to_wire(Shape(kept_null=None, nested=inner)) == {
        "keptNull": None,
        "nested": {"keptNull": None},
    }


def test_an_ag_ui_event_carries_its_type_and_its_sse_name_is_the_type() -> None:
    name, data = encode(RunStarted("c_1", "r_1"))
    assert name == "RUN_STARTED"
    assert json.loads(data) == {"type": "RUN_STARTED", "threadId": "c_1", "runId": "r_1"}
    assert data.startswith('{"type":')  # stored_event relies on it to tell old rows
    name, data = encode(RunError("the model timed out", "model_timeout", "r_1"))
    assert json.loads(data) == {
        "type": "RUN_ERROR", "message": "the model timed out", "code": "model_timeout",
        "runId": "r_1",
    }  # fmt: skip


def test_a_hostcall_event_is_an_ag_ui_custom_event_named_for_what_it_is() -> None:
    name, data = encode(CallStateChanged("k_1", "delivered"))
    assert name == "hostcall.tool_call_state"
    assert json.loads(data) == {
        "type": "CUSTOM",
        "name": "hostcall.tool_call_state",
        "value": {"toolCallId": "k_1", "state": "delivered"},
    }
    view = CallView(
        tool_call_id="k_1", tool_call_name="t", kind="client", run_id="r_1", state="dispatched",
        input={"a": 1}, input_schema={}, output_schema={}, deadline="2026-01-01T00:00:00Z",
        route="form", delivered=False, outcome=None, result_token="tok",
    )  # fmt: skip
    name, data = encode(CallDispatched(view))
    value = json.loads(data)["value"]
    assert name == "hostcall.tool_call_dispatch" and value["outcome"] is None
    assert value["resultToken"] == "tok" and "decisionToken" not in value
    assert "approval" not in value and "simulated" not in value


def test_a_tool_result_keeps_a_null_outcome_and_role_tool() -> None:
    _, data = encode(ToolCallResult("m_1", "k_1", "{}", "answered", outcome=None))
    assert json.loads(data) == {
        "type": "TOOL_CALL_RESULT", "messageId": "m_1", "toolCallId": "k_1", "content": "{}",
        "state": "answered", "outcome": None, "role": "tool",
    }  # fmt: skip


def test_every_event_type_but_custom_has_its_class() -> None:
    from hostcall.protocol import events

    classes = {getattr(events, n).TYPE for n in dir(events) if hasattr(getattr(events, n), "TYPE")}
    assert classes == set(EventType)


@pytest.mark.parametrize(
    ("name", "old", "new_name", "new"),
    [
        ("RUN_STARTED", {"threadId": "c", "runId": "r"}, "RUN_STARTED",
         {"type": "RUN_STARTED", "threadId": "c", "runId": "r"}),
        ("TOOL_CALL_STATE", {"toolCallId": "k", "state": "delivered"}, "hostcall.tool_call_state",
         {"type": "CUSTOM", "name": "hostcall.tool_call_state",
          "value": {"toolCallId": "k", "state": "delivered"}}),
    ],
)  # fmt: skip
def test_rows_stored_before_events_carried_type_are_read_in_todays_shape(
    name: str, old: dict[str, Any], new_name: str, new: dict[str, Any]
) -> None:
    event = stored_event("c", 3, name, json.dumps(old))
    assert (event.id, event.name, event.data) == ("c:3", new_name, new)


# ---- request bodies -------------------------------------------------------------------------


def test_bodies_decode_into_typed_objects() -> None:
    assert NewMessage.decode({"text": "  hi  "}) == NewMessage("hi", False)
    assert NewConversation.decode({}) == NewConversation("")
    decision = Decision.decode({"token": "t", "decision": "approve", "input": {"a": 1}})
    assert (decision.decision, decision.input, decision.scope) == ("approve", {"a": 1}, "once")
    result = CallResult.decode({"token": "t", "error": {"code": "no_handler"}})
    assert result.error is not None and result.error.code == "no_handler"
    assert CallResult.decode({"output": None}).output is None  # null is an output


@pytest.mark.parametrize(
    ("body_type", "body", "error", "words"),
    [
        (NewMessage, {"text": "x" * (MAX_MESSAGE_CHARS + 1)}, Unprocessable, "8001 characters"),
        (NewMessage, {"text": "hi", "simulate": "yes"}, BadRequest, "'simulate'"),
        (NewConversation, {"locale": "de"}, BadRequest, "'en', 'es', 'fr', 'ja'"),
        (Decision, {"decision": "approve", "input": [1]}, BadRequest, "'input'"),
        (CallResult, {"token": 5, "output": 1}, BadRequest, "'token'"),
        (CallResult, {"error": {"code": "timeout"}}, BadRequest, "'client_error', 'no_handler'"),
        (CallResult, {"error": {"code": ["no_handler"]}}, BadRequest, "error.code"),
    ],
)
def test_a_bad_body_names_what_is_wrong(
    body_type: Any, body: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as caught:
        body_type.decode(body)
    assert words in str(caught.value)
