"""A quick "valid" for the plain JSON Schemas tools usually declare (issue 9: round trip).

jsonschema's validator took about 0.3 ms to accept a two-task ``read_board_tasks`` result on
the bench's VM: the largest single cost of answering a call. ``compile_check`` turns a schema
that uses only the keywords below into a plain Python predicate, built once per schema.

The predicate can only say yes. When it says no, or raises, or the schema uses any other
keyword (``$ref``, ``pattern``, ``oneOf``...), ``server.schemas.CompiledSchema`` asks
jsonschema, whose verdict and messages are the ones returned. So a check here must never
accept a value jsonschema rejects; each one repeats jsonschema 4's own test for its keyword
(Draft 2020-12, the default of ``validator_for``), and tests/unit/test_fastschema.py compares
the two verdicts on generated schemas and values.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

from jsonschema import FormatChecker

Check = Callable[[Any], bool]

DIALECTS = frozenset({
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
})  # fmt: skip
# Keywords that never change a verdict.
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "readOnly", "writeOnly",
    "deprecated",
})  # fmt: skip


class _Unsupported(Exception):
    """The schema uses something this module does not check: jsonschema decides alone."""


def _is_integer(value: Any) -> bool:
    # Draft 6 and later: 1.0 is an integer; a bool never is (jsonschema's type checker).
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


TYPES: dict[str, Check] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": _is_integer,
    "null": lambda v: v is None,
    "number": _is_number,
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}


def compile_check(schema: Any, formats: FormatChecker | None = None) -> Check | None:
    """A predicate that is True only for values ``schema`` accepts, or None if ``schema``
    uses a keyword this module leaves to jsonschema. ``formats``: the format checker the
    jsonschema validator uses (None: ``format`` is not checked, as jsonschema does)."""
    if isinstance(schema, dict) and "$schema" in schema and schema["$schema"] not in DIALECTS:
        return None  # another draft: other rules
    try:
        return _compile(schema, formats, root=True)
    except _Unsupported:
        return None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Unsupported
    return value


def _bound(value: Any) -> float | int:
    if not _is_number(value):
        raise _Unsupported
    return value


def _compile(schema: Any, formats: FormatChecker | None, *, root: bool = False) -> Check:
    if schema is True:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if not isinstance(schema, dict):
        raise _Unsupported
    checks: list[Check] = []
    for key, arg in schema.items():
        if key in ANNOTATIONS or (root and key == "$schema"):
            continue
        checks.append(_keyword(key, arg, schema, formats))
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)

    def all_of(v: Any) -> bool:
        for check in every:
            if not check(v):
                return False
        return True

    return all_of


def _keyword(key: str, arg: Any, schema: dict[str, Any], formats: FormatChecker | None) -> Check:
    """The check of one keyword, as jsonschema 4 makes it (jsonschema/_keywords.py)."""
    if key == "type":
        names = [arg] if isinstance(arg, str) else arg
        if not isinstance(names, list) or not names or any(n not in TYPES for n in names):
            raise _Unsupported
        if len(names) == 1:
            return TYPES[names[0]]
        tests = tuple(TYPES[n] for n in names)
        return lambda v: any(test(v) for test in tests)
    if key in ("enum", "const"):
        # Strings only: jsonschema's equality is ==; other values (1 vs True, 1 vs 1.0,
        # nested lists) have rules of their own, left to it.
        allowed = arg if key == "enum" else [arg]
        if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
            raise _Unsupported
        choices = frozenset(allowed)
        return lambda v: isinstance(v, str) and v in choices
    if key == "minLength":
        n = _int(arg)
        return lambda v: not isinstance(v, str) or len(v) >= n
    if key == "maxLength":
        n = _int(arg)
        return lambda v: not isinstance(v, str) or len(v) <= n
    if key == "minItems":
        n = _int(arg)
        return lambda v: not isinstance(v, list) or len(v) >= n
    if key == "maxItems":
        n = _int(arg)
        return lambda v: not isinstance(v, list) or len(v) <= n
    if key == "minimum":
        low = _bound(arg)
        return lambda v: not _is_number(v) or not v < low
    if key == "exclusiveMinimum":
        low = _bound(arg)
        return lambda v: not _is_number(v) or not v <= low
    if key == "maximum":
        high = _bound(arg)
        return lambda v: not _is_number(v) or not v > high
    if key == "exclusiveMaximum":
        high = _bound(arg)
        return lambda v: not _is_number(v) or not v >= high
    if key == "format":
        if not isinstance(arg, str):
            raise _Unsupported
        if formats is None:
            return lambda v: True
        checker = formats
        return lambda v: checker.conforms(v, arg)
    if key == "required":
        if not isinstance(arg, list) or not all(isinstance(n, str) for n in arg):
            raise _Unsupported
        names = frozenset(arg)
        return lambda v: not isinstance(v, dict) or names.issubset(v.keys())
    if key == "properties":
        if not isinstance(arg, dict):
            raise _Unsupported
        subs = tuple((name, _compile(sub, formats)) for name, sub in arg.items())

        def properties(v: Any) -> bool:
            if isinstance(v, dict):
                for name, check in subs:
                    if name in v and not check(v[name]):
                        return False
            return True

        return properties
    if key == "additionalProperties":
        known = schema.get("properties", {})
        if not isinstance(known, dict):
            raise _Unsupported
        # (patternProperties is not supported, so "additional" is "not in properties".)
        extra = _compile(arg, formats)

        def additional(v: Any) -> bool:
            if isinstance(v, dict):
                for k, x in v.items():
                    if k not in known and not extra(x):
                        return False
            return True

        return additional
    if key == "items":
        if "prefixItems" in schema:
            raise _Unsupported
        each = _compile(arg, formats)

        def items(v: Any) -> bool:
            if isinstance(v, list):
                for x in v:
                    if not each(x):
                        return False
            return True

        return items
    raise _Unsupported
