"""hostcall/schemas.py: the quick verdict (jsonschema-rs) never accepts a value jsonschema
refuses, on generated schemas and values; jsonschema has the last word and the words."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from hostcall.schema_patterns import with_re2
from hostcall.schemas import CompiledSchema
from tests.support.harness import Harness, write_agent
from tests.support.redos import (
    FAST_SECONDS,
    HOSTILE_PATTERN,
    HOSTILE_TEXT,
    RESPONSIVE_SECONDS,
    timed,
    while_answering_healthz,
)

FORMATS = FormatChecker()
# jsonschema, matching patterns with RE2 as hostcall/schemas.py has it do.
REFERENCE = with_re2(Draft202012Validator)
NAMES = ["id", "title", "status", "n", "tags"]  # few keys: values hit the properties often

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, 1.0, 2.5, -1.0])
    | st.text(max_size=4)
    | st.sampled_from(["todo", "done", "a@b.example", "2026-12-01", "not a date", ""]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=2), inner, max_size=4)
    ),
    max_leaves=12,
)

types = st.sampled_from(["string", "number", "integer", "boolean", "null", "array", "object"])
numbers = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.0])
sizes = st.integers(0, 3)


@st.composite
def leaf(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["type", "types", "string", "number", "enum", "const",
                                 "format", "pattern", "bool", "empty"]))  # fmt: skip
    if kind == "type":
        return {"type": draw(types), "title": "annotated", "description": "ignored"}
    if kind == "types":
        return {"type": draw(st.lists(types, min_size=1, max_size=3, unique=True))}
    if kind == "string":
        schema = {"type": "string"} if draw(st.booleans()) else {}
        for key in ("minLength", "maxLength"):
            if draw(st.booleans()):
                schema[key] = draw(sizes)
        return schema
    if kind == "number":
        numeric = st.sampled_from(["number", "integer"])
        schema = {"type": draw(numeric)} if draw(st.booleans()) else {}
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if draw(st.booleans()):
                schema[key] = draw(numbers)
        return schema
    if kind == "enum":
        return {"enum": draw(st.lists(st.sampled_from(["todo", "done", "", "1"]), min_size=1))}
    if kind == "const":
        return {"const": draw(st.sampled_from(["todo", "", "1"]))}
    if kind == "format":
        return {"format": draw(st.sampled_from(["email", "date", "date-time", "uuid", "uri",
                                                "no-such-format"]))}  # fmt: skip
    if kind == "pattern":
        return {"pattern": draw(st.sampled_from(["^a", "^[a-z]+$", "o", r"^[0-9]{1,2}$", "^$"]))}
    if kind == "bool":
        return draw(st.booleans())
    return {}


def container(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    @st.composite
    def build(draw: st.DrawFn) -> Any:
        if draw(st.booleans()):
            schema: dict[str, Any] = {"type": "array"} if draw(st.booleans()) else {}
            schema["items"] = draw(inner)
            for key in ("minItems", "maxItems"):
                if draw(st.booleans()):
                    schema[key] = draw(sizes)
            return schema
        props = draw(st.dictionaries(st.sampled_from(NAMES), inner, max_size=4))
        schema = {"type": "object"} if draw(st.booleans()) else {}
        schema["properties"] = props
        if draw(st.booleans()):
            schema["required"] = draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.booleans() | leaf())
        return schema

    return build()


schemas = st.recursive(leaf(), container, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, values=st.lists(json_values, min_size=1, max_size=6))
def test_the_verdict_is_jsonschemas(schema: Any, values: list[Any]) -> None:
    if not isinstance(schema, dict):
        schema = {"allOf": [schema]}
    compiled = CompiledSchema(schema)
    assert compiled._quick is not None, f"jsonschema-rs takes every generated schema: {schema}"
    validator = REFERENCE(schema, format_checker=FORMATS)
    for value in values:
        valid = validator.is_valid(value)
        # Never a yes where jsonschema says no: a quick yes is returned without asking it.
        assert not compiled._quick.is_valid(value) or valid, (schema, value)
        assert (compiled.problems(value) == []) == valid, (schema, value)


BOARD = {
    "type": "object",
    "required": ["tasks"],
    "properties": {"tasks": {"type": "array", "items": {
        "type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}},
    }}},
}  # fmt: skip


@pytest.mark.parametrize(
    "value, valid",
    [
        ({"tasks": []}, True),
        ({"tasks": [{"id": "t1", "status": "todo"}, {"extra": 1}]}, True),
        ({}, False),
        ({"tasks": [{"id": 1}]}, False),
        ({"tasks": {"id": "t1"}}, False),
        ([], False),
        ({"tasks": [{"id": True}]}, False),
    ],
)
def test_a_board_result(value: Any, valid: bool) -> None:
    assert (CompiledSchema(BOARD).problems(value) == []) is valid


@pytest.mark.parametrize(
    "schema, value, valid",
    [
        ({"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}}, "a", True),
        # $ is the end of the text (ECMA-262's and RE2's), not also before a final newline.
        ({"type": "string", "pattern": "^a$"}, "a\n", False),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, False),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}, {}, True),
        ({"enum": [1, True]}, 1.0, True),
        ({"const": 0}, False, False),
        ({"type": "array", "uniqueItems": True}, [1, True], True),
        ({"type": "string", "format": "uri"}, "not a uri", True),  # jsonschema leaves uri be
    ],
)
def test_schemas_beyond_the_plain_ones_get_jsonschemas_verdict(
    schema: dict[str, Any], value: Any, valid: bool
) -> None:
    assert REFERENCE(schema, format_checker=FORMATS).is_valid(value) is valid
    assert (CompiledSchema(schema).problems(value) == []) is valid


def test_a_remote_ref_is_never_fetched() -> None:
    """A schema naming a remote ``$ref`` makes no connection (the listener counts them)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    accepted: list[str] = []

    def count() -> None:
        try:
            connection, peer = listener.accept()
        except OSError:
            return
        connection.close()  # the fetch fails at once instead of waiting for an answer
        accepted.append(str(peer))

    waiter = threading.Thread(target=count)
    waiter.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/schema.json"
    compiled = CompiledSchema({"type": "object", "properties": {"a": {"$ref": url}}})
    assert compiled._quick is None
    assert compiled.problems({}) == []
    waiter.join()
    listener.close()
    assert accepted == []


def test_a_refused_value_gets_jsonschemas_messages() -> None:
    compiled = CompiledSchema(BOARD)
    assert compiled.problems({"tasks": [{"id": "t1"}]}) == []
    [problem] = compiled.problems({"tasks": [{"id": 7}]})
    assert problem.path == "/tasks/0/id"
    assert problem.message == "7 is not of type 'string'"
    [missing] = compiled.problems({})
    assert missing.path == "/tasks"


def test_formats_are_checked_as_jsonschema_checks_them() -> None:
    compiled = CompiledSchema({"type": "string", "format": "email"})
    assert compiled.problems("a@b.example") == []
    [problem] = compiled.problems("no at sign")
    assert "email" in problem.message


# ---- a designer's catastrophic pattern against a visitor's value ---------------------------

HOSTILE_SCHEMAS = [
    ({"type": "object", "properties": {"code": {"type": "string", "pattern": HOSTILE_PATTERN}}},
     {"code": HOSTILE_TEXT}, "/code"),
    ({"type": "object", "patternProperties": {HOSTILE_PATTERN: {"type": "integer"}},
      "additionalProperties": False}, {HOSTILE_TEXT: 1}, "/"),
    ({"type": "object", "patternProperties": {HOSTILE_PATTERN: {"type": "integer"}},
      "unevaluatedProperties": False}, {HOSTILE_TEXT: 1}, "/"),
    ({"type": "object", "propertyNames": {"pattern": HOSTILE_PATTERN}}, {HOSTILE_TEXT: 1}, "/"),
    ({"type": "object", "patternProperties": {"^a": {"type": "string",
                                                      "pattern": HOSTILE_PATTERN}}},
     {"ab": HOSTILE_TEXT}, "/ab"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "value", "path"), HOSTILE_SCHEMAS)
def test_a_hostile_value_is_matched_in_linear_time(
    schema: dict[str, Any], value: Any, path: str
) -> None:
    compiled = CompiledSchema(schema)
    problems, seconds = timed(lambda: compiled.problems(value))
    assert seconds < FAST_SECONDS, f"the check took {seconds:.2f}s"
    assert [p.path for p in problems] == [path], problems
    # The same patterns still say yes where they match.
    assert compiled.problems(_without_the_bang(value)) == []


def _without_the_bang(value: dict[str, Any]) -> dict[str, Any]:
    return {k.rstrip("!"): v.rstrip("!") if isinstance(v, str) else v for k, v in value.items()}


@pytest.mark.parametrize(
    ("pattern", "value", "valid", "quick"),
    [
        (r"^\d+$", "42", True, False),
        (r"^\d+$", "\u0664\u0662", False, False),  # Arabic-Indic digits: \d is ASCII
        (r"^\w+$", "caf\u00e9", False, False),
        (r"^\p{L}+$", "caf\u00e9", True, True),  # what to write for letters of any script
        (r"^\\d$", "\\d", True, True),  # an escaped backslash, then a plain d
    ],
)
def test_perl_classes_are_ascii_and_get_jsonschemas_verdict_alone(
    pattern: str, value: str, valid: bool, quick: bool
) -> None:
    """The regex crate (jsonschema-rs) reads \\d, \\w, \\s, \\b as Unicode: a schema
    using them gets no quick verdict, which would say yes where RE2 says no."""
    compiled = CompiledSchema({"type": "string", "pattern": pattern})
    assert (compiled._quick is not None) is quick
    assert (compiled.problems(value) == []) is valid


FORMS = {
    "id": "forms",
    "model": {"kind": "scripted", "rules": [{
        "match": "enter (?P<code>.+)", "tool": "enter_code", "arguments": {"code": "{{ code }}"},
        "reply": "ok {{ result.code }}", "error_reply": "error {{ error.code }}",
    }]},
    "tools": [{
        "name": "enter_code",
        "description": "Asks the person for a code.",
        "input_schema": HOSTILE_SCHEMAS[0][0],
        "output_schema": HOSTILE_SCHEMAS[0][0],
    }],
}  # fmt: skip


@pytest.fixture
def forms(tmp_path: Path) -> Iterator[Harness]:
    write_agent(tmp_path / "agents", FORMS)
    h = Harness(tmp_path, tmp_path / "agents")
    yield h
    h.stop()


def test_the_server_answers_while_a_form_answer_is_matched(forms: Harness) -> None:
    conv = forms.conversation("forms")
    forms.say(conv, "enter aaa")
    call = forms.open_call(conv)
    answered, longest = while_answering_healthz(
        forms.http, lambda: forms.answer(call, {"code": HOSTILE_TEXT})
    )
    assert longest < RESPONSIVE_SECONDS, f"/healthz waited {longest:.2f}s"
    assert answered.status_code == 422, answered.text
    error = answered.json()["error"]
    assert error["code"] == "invalid_result"
    assert error["details"]["errors"] == [
        {"path": "/code", "message": f"{HOSTILE_TEXT!r} does not match {HOSTILE_PATTERN!r}"}
    ]
    # Refused, not lost: the call is still open, and a good answer settles it.
    assert forms.answer(call, {"code": "aaaa"}).status_code == 200
    assert forms.finish(conv)["run"]["status"] == "finished"
    assert forms.assistant_texts(conv) == ["ok aaaa"]


def test_the_server_answers_while_a_models_arguments_are_matched(forms: Harness) -> None:
    conv = forms.conversation("forms")

    def send() -> dict[str, Any]:
        forms.say(conv, f"enter {HOSTILE_TEXT}")
        return forms.finish(conv)

    snap, longest = while_answering_healthz(forms.http, send)
    assert longest < RESPONSIVE_SECONDS, f"/healthz waited {longest:.2f}s"
    [call] = snap["calls"]
    assert call["state"] == "failed"
    assert call["outcome"]["error"]["code"] == "invalid_arguments"
    assert forms.assistant_texts(conv) == ["error invalid_arguments"]
