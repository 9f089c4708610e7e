"""JSON Schema's regular expressions, matched by RE2 (hostcall/patterns.py).

jsonschema matches ``pattern`` and ``patternProperties`` with Python's backtracking ``re``,
in four places: the two keywords, and the search for properties no other keyword took
(``additionalProperties``, ``unevaluatedProperties``). Each is replaced here by the same
function over RE2, written after jsonschema's own (4.x), so its messages stay the same.

Where RE2 and jsonschema's ``re`` read a pattern differently (docs/agents.md): ``$`` is the
end of the text only, not also before a final newline (as ECMA-262, JSON Schema's dialect,
reads it), and ``\\d``, ``\\w``, ``\\s``, ``\\b`` are ASCII.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend

from hostcall import patterns


def _matches(pattern: str, text: str) -> bool:
    return patterns.search(pattern, text)


def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def pattern_properties(
    validator: Any, pattern_properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _matches(patrn, key):
                yield from validator.descend(value, subschema, path=key, schema_path=patrn)


def additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            names = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {names}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _extras_msg(sorted(extras, key=str)))


def unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    refused = []
    for key in instance:
        if key not in evaluated:
            for _ in validator.descend(instance[key], unevaluated, path=key, schema_path=key):
                refused.append(key)
    if refused:
        if unevaluated is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _extras_msg(sorted(refused, key=str)))
        else:
            error = (
                "Unevaluated properties are not valid under "
                "the given schema (%s %s unevaluated and invalid)"
            )
            yield ValidationError(error % _extras_msg(refused))


KEYWORDS = {
    "pattern": pattern,
    "patternProperties": pattern_properties,
    "additionalProperties": additional_properties,
    "unevaluatedProperties": unevaluated_properties,
}


@functools.cache
def with_re2(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) with every keyword that matches a pattern
    matching it with RE2; keywords its draft lacks stay absent."""
    replaced = {k: f for k, f in KEYWORDS.items() if k in cls.VALIDATORS}
    return extend(cls, replaced)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    names = list(schema.get("patternProperties", {}))
    for key in instance:
        if key not in properties and not any(_matches(p, key) for p in names):
            yield key


def _extras_msg(extras: list[Any]) -> tuple[str, str]:
    verb = "was" if len(extras) == 1 else "were"
    return ", ".join(repr(extra) for extra in extras), verb


def _is_valid(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> list[str]:
    """The keys some keyword of ``schema`` evaluated (jsonschema's
    ``find_evaluated_property_keys_by_schema``, draft 2020-12's reading, which this also
    gives draft 2019-09's ``unevaluatedProperties``)."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[str] = []
    for ref_keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(ref_keyword)
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            keys += _evaluated_keys(
                validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                instance,
                resolved.contents,
            )
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is None:
            continue
        keys += (k for k, v in instance.items() if _is_valid(validator.descend(v, subschema)))
    if "patternProperties" in schema:
        for key in instance:
            if any(_matches(p, key) for p in schema["patternProperties"]):
                keys.append(key)
    for key, subschema in (schema.get("dependentSchemas") or {}).items():
        if key in instance:
            keys += _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _is_valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"])
    return keys
