"""JSON Schema checks: schemas when an agent loads, values when they cross a boundary."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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


class CompiledSchema:
    """A checked schema, ready to validate many values."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        cls = validator_for(schema, default=Draft202012Validator)
        self._validator = cls(schema, format_checker=_FORMATS)

    def problems(self, value: Any) -> list[SchemaProblem]:
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        return [SchemaProblem(_pointer(e), e.message) for e in errors[:20]]


def _pointer(error: ValidationError) -> str:
    """Where the error belongs: a missing property's own path, so a form can mark the field."""
    parts = [str(p) for p in error.path]
    if error.validator == "required":
        missing = re.match(r"^'(.+)' is a required property$", error.message)
        if missing:
            parts.append(missing.group(1))
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)
