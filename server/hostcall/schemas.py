"""JSON Schema checks: schemas when an agent loads, values when they cross a boundary."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import validator_for

_FORMATS = FormatChecker()


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's input or output schema, or ``None`` if it can."""
    if not isinstance(schema, dict):
        return "must be a JSON Schema object"
    if schema.get("type") != "object":
        return 'must have "type": "object" at its root'
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"is not valid JSON Schema at {where}: {exc.message}"
    return None


def required_problems(schema: Any, at: str = "") -> list[str]:
    """``required`` names that ``properties`` does not declare, anywhere in ``schema``.

    Valid JSON Schema, but a form built from the schema has no field for such a name, so it
    could never be submitted: refused when the agent loads.
    """
    if not isinstance(schema, dict):
        return []
    problems = []
    properties, required = schema.get("properties"), schema.get("required")
    if isinstance(properties, dict) and isinstance(required, list):
        patterns = schema.get("patternProperties") or {}
        for name in required:
            if name in properties or any(re.search(p, str(name)) for p in patterns):
                continue
            known = ", ".join(sorted(properties)) or "none"
            problems.append(
                f"requires {name!r} at {at or '/'}, which is not among its properties "
                f"({known}); a form could never be submitted"
            )
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        for name, sub in (
            (schema.get(key) or {}).items() if isinstance(schema.get(key), dict) else ()
        ):
            problems += required_problems(sub, f"{at}/{key}/{name}")
    for key in ("items", "additionalProperties", "not"):
        problems += required_problems(schema.get(key), f"{at}/{key}")
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        for index, sub in (
            enumerate(schema.get(key) or []) if isinstance(schema.get(key), list) else ()
        ):
            problems += required_problems(sub, f"{at}/{key}/{index}")
    return problems


class CompiledSchema:
    """A checked schema, ready to validate many values.

    Two validators: jsonschema-rs says quickly that a value is valid (bench/schema_bench.py:
    ~0.5 µs for the demo's board result against jsonschema's ~50 µs, which was the largest
    single cost of answering a call); jsonschema has the last word on anything else, and its
    messages and paths are the ones a form shows. So a value jsonschema-rs refuses but
    jsonschema accepts (it checks some formats and ``$`` more strictly) is still accepted,
    and tests/unit/test_schemas.py holds that jsonschema-rs never accepts a value jsonschema
    refuses, on generated schemas and values.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        cls = validator_for(schema, default=Draft202012Validator)
        self._validator = cls(schema, format_checker=_FORMATS)
        self._quick = _quick_validator(schema)

    def problems(self, value: Any) -> list[SchemaProblem]:
        if self._quick is not None and self._quick.is_valid(value):
            return []
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        return [SchemaProblem(_pointer(e), e.message) for e in errors[:20]]


def _quick_validator(schema: dict[str, Any]) -> Any:
    """jsonschema-rs's validator for ``schema``, or None where it cannot take it (jsonschema
    then decides alone)."""
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=True, retriever=_no_retrieval)
    except ValueError:  # jsonschema_rs.ValidationError is one: a schema it cannot compile
        return None


def _no_retrieval(uri: str) -> Any:
    # Do not "fix" this by allowing it: jsonschema-rs would fetch a remote ``$ref`` over the
    # network by default, so an agent file could make the server connect anywhere. jsonschema
    # never retrieves either; such a schema gets jsonschema alone.
    raise ValueError(f"remote $ref not retrieved: {uri}")


def _pointer(error: ValidationError) -> str:
    """Where the error belongs: a missing property's own path, so a form can mark the field."""
    parts = [str(p) for p in error.path]
    if error.validator == "required":
        missing = re.match(r"^'(.+)' is a required property$", error.message)
        if missing:
            parts.append(missing.group(1))
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)
