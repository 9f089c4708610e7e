"""hostcall/fastschema.py: its quick verdict is jsonschema's own, on generated schemas and values,
and it steps aside for every keyword it does not check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from hostcall.fastschema import compile_check
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
                                 "format", "bool", "empty"]))  # fmt: skip
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
        return {"format": draw(st.sampled_from(["email", "date", "uuid", "no-such-format"]))}
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
def test_the_quick_verdict_is_jsonschemas(schema: Any, values: list[Any]) -> None:
    check = compile_check(schema, FORMATS)
    assert check is not None, f"every generated keyword is covered: {schema}"
    validator = Draft202012Validator(schema, format_checker=FORMATS)
    for value in values:
        assert check(value) == validator.is_valid(value), (schema, value)


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
    check = compile_check(BOARD, FORMATS)
    assert check is not None
    assert check(value) is valid


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
        {"type": "string", "pattern": "^a"},
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"enum": [1, True]},  # 1 and True: jsonschema's own equality
        {"const": 0},
        {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"type": "object", "propertyNames": {}}}},
        {"type": "no-such-type"},
        {"type": "string", "minLength": 1.5},
        {"type": "object", "properties": {"a": {"$schema": "x"}}},
        {"type": "array", "uniqueItems": True},
    ],
)
def test_other_keywords_are_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema, FORMATS) is None


def test_a_refused_value_gets_jsonschemas_messages() -> None:
    compiled = CompiledSchema(BOARD)
    assert compiled.problems({"tasks": [{"id": "t1"}]}) == []
    [problem] = compiled.problems({"tasks": [{"id": 7}]})
    assert problem.path == "/tasks/0/id"
    assert problem.message == "7 is not of type 'string'"
    [missing] = compiled.problems({})
    assert missing.path == "/tasks"


def test_formats_are_checked_as_jsonschema_checks_them() -> None:
    check = compile_check({"type": "string", "format": "email"}, FORMATS)
    assert check is not None
    assert check("a@b.example") and not check("no at sign")
    # Without a format checker jsonschema does not check formats; neither does this.
    unchecked = compile_check({"type": "string", "format": "email"}, None)
    assert unchecked is not None and unchecked("no at sign")
