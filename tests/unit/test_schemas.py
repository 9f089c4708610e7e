"""hostcall/schemas.py: the quick verdict (jsonschema-rs) never accepts a value jsonschema
refuses, on generated schemas and values; jsonschema has the last word and the words."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from hostcall.schemas import CompiledSchema

FORMATS = FormatChecker()
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
        return {"pattern": draw(st.sampled_from(["^a", "^[a-z]+$", "o", r"^\d{1,2}$", "^$"]))}
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
    validator = Draft202012Validator(schema, format_checker=FORMATS)
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
        ({"type": "string", "pattern": "^a$"}, "a\n", True),  # Python's $ (jsonschema's say)
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
    assert Draft202012Validator(schema, format_checker=FORMATS).is_valid(value) is valid
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
