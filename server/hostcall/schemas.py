"""JSON Schema checks: schemas when an agent loads, values when they cross a boundary."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import validator_for

from hostcall import patterns
from hostcall.schema_patterns import with_re2

_FORMATS = FormatChecker()
# A schema's own patterns are RE2's, not Python's (``\p{L}``, ``\z``, ``(?<name>...)``):
# ``pattern_problems`` judges them, with a message saying what to write; jsonschema's own
# "regex" format would judge them by Python's ``re``.
_SCHEMA_FORMATS = FormatChecker()
_SCHEMA_FORMATS.checks("regex")(lambda _: True)
# Keywords whose values are subschemas (or maps or lists of them): where a ``pattern`` is
# a keyword, not a property's name.
_SUBSCHEMA = (
    "items", "additionalProperties", "not", "propertyNames", "contains", "if", "then", "else",
    "unevaluatedItems", "unevaluatedProperties", "additionalItems",
)  # fmt: skip
_SUBSCHEMA_MAPS = (
    "properties", "$defs", "definitions", "patternProperties", "dependentSchemas", "dependencies",
)  # fmt: skip
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
# Escapes RE2 reads as ASCII and jsonschema-rs's regex crate as Unicode: a schema holding
# one gets no quick verdict, so the two never disagree.
_PERL_CLASSES = frozenset("dDwWsSbB")


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
        cls.check_schema(schema, format_checker=_SCHEMA_FORMATS)
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
        names = schema.get("patternProperties") or {}
        for name in required:
            if name in properties or any(_names(p, str(name)) for p in names):
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


def pattern_problems(schema: Any, at: str = "") -> list[str]:
    """The schema's ``pattern`` and ``patternProperties`` that RE2 cannot take, anywhere in
    ``schema`` (hostcall/patterns.py): refused when the agent loads."""
    if not isinstance(schema, dict):
        return []
    problems = []
    if "pattern" in schema and (problem := patterns.problem(schema["pattern"])):
        problems.append(f"has a pattern at {at or '/'} that {problem}")
    for name in schema.get("patternProperties") or {}:
        if problem := patterns.problem(name):
            problems.append(f"has a patternProperties name {name!r} at {at or '/'} that {problem}")
    for key, sub in _subschemas(schema):
        problems += pattern_problems(sub, f"{at}/{key}")
    return problems


def remote_refs(schema: Any) -> list[str]:
    """The ``$ref`` and ``$dynamicRef`` values in ``schema`` that point outside it: nothing
    here fetches one (``_no_retrieval``), so a schema holding one could never be checked."""
    if isinstance(schema, list):
        return [r for item in schema for r in remote_refs(item)]
    if not isinstance(schema, dict):
        return []
    found = [
        v for k, v in schema.items()
        if k in ("$ref", "$dynamicRef") and not (isinstance(v, str) and v.startswith("#"))
    ]  # fmt: skip
    return found + [r for v in schema.values() for r in remote_refs(v)]


def schema_depth(value: Any) -> int:
    """How deep ``value``'s JSON containers nest (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max(map(schema_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(schema_depth, value), default=0)
    return 0


def _subschemas(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = [(k, schema[k]) for k in _SUBSCHEMA if k in schema]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            found += [(f"{key}/{name}", sub) for name, sub in schema[key].items()]
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            found += [(f"{key}/{index}", sub) for index, sub in enumerate(schema[key])]
    return found


def _names(pattern: str, name: str) -> bool:
    try:
        return patterns.search(pattern, name)
    except patterns.PatternError:
        return False  # pattern_problems says why


def _diverges(pattern: Any) -> bool:
    """Whether ``pattern`` holds an escape RE2 and jsonschema-rs read differently."""
    if not isinstance(pattern, str):
        return False
    escaped = False
    for char in pattern:
        if escaped and char in _PERL_CLASSES:
            return True
        escaped = not escaped and char == "\\"
    return False


def _all_patterns(schema: Any) -> list[Any]:
    if not isinstance(schema, dict):
        return []
    found = [schema["pattern"]] if "pattern" in schema else []
    found += list(schema.get("patternProperties") or {})
    for _, sub in _subschemas(schema):
        found += _all_patterns(sub)
    return found


class CompiledSchema:
    """A checked schema, ready to validate many values.

    Two validators: jsonschema-rs says quickly that a value is valid (bench/schema_bench.py:
    ~0.5 µs for the demo's board result against jsonschema's ~50 µs, which was the largest
    single cost of answering a call); jsonschema has the last word on anything else, and its
    messages and paths are the ones a form shows. So a value jsonschema-rs refuses but
    jsonschema accepts (it checks some formats and ``$`` more strictly) is still accepted,
    and tests/unit/test_schemas.py holds that jsonschema-rs never accepts a value jsonschema
    refuses, on generated schemas and values.

    Both match patterns in linear time: jsonschema with RE2 (hostcall/schema_patterns.py),
    jsonschema-rs with the regex crate. Where those two read a pattern differently (``\\d``,
    ``\\w``, ``\\s``, ``\\b``: ASCII in RE2, Unicode in the regex crate), jsonschema decides
    alone.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        cls = with_re2(validator_for(schema, default=Draft202012Validator))
        self._validator = cls(schema, format_checker=_FORMATS)
        diverges = any(_diverges(p) for p in _all_patterns(schema))
        self._quick = None if diverges else _quick_validator(schema)

    def problems(self, value: Any) -> list[SchemaProblem]:
        if self._quick is not None and self._quick.is_valid(value):
            return []
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        return [SchemaProblem(_pointer(e), e.message) for e in errors[:20]]


def _quick_validator(schema: dict[str, Any]) -> Any:
    """jsonschema-rs's validator for ``schema``, or None where it cannot take it (jsonschema
    then decides alone)."""
    try:
        return jsonschema_rs.validator_for(
            schema,
            validate_formats=True,
            retriever=_no_retrieval,
            # The regex crate, linear time as RE2 is (the default, fancy-regex, backtracks).
            pattern_options=jsonschema_rs.RegexOptions(),
        )
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
