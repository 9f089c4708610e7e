"""JSON Schema of the wire types, derived from the fields ``to_wire`` writes.

A field is required unless ``to_wire`` may leave it out (its type allows ``None`` and it is
not marked ``ALWAYS``); a field marked ``ALWAYS`` that allows ``None`` may be ``null``. A
nested wire type is a ``$ref`` to its own component, named after its class. Objects allow
no property the type does not declare, so a body that grows a field outside its type fails
tests/unit/test_openapi.py.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from hostcall.protocol.wire import camel

#: The values some ``str`` fields hold, by (type, field): enums this package cannot import
#: (they live beside the store, which imports this package).
Enums = Mapping[tuple[type, str], Iterable[str]]

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
}


class Schemas:
    """Collects the components of the types it is asked about."""

    def __init__(self, enums: Enums | None = None) -> None:
        self.components: dict[str, dict[str, Any]] = {}
        self._enums = dict(enums or {})

    def of(self, tp: Any) -> dict[str, Any]:
        """The schema of a value of type ``tp`` (``None`` in a union allows ``null``)."""
        schema, nullable = self._of(tp)
        return _or_null(schema) if nullable else schema

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.components:
            self.components[name] = {}  # a type that refers to itself stops here
            self.components[name] = self._object(cls)
        return {"$ref": f"#/components/schemas/{name}"}

    def _object(self, cls: type) -> dict[str, Any]:
        hints = get_type_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            schema, nullable = self._of(hints[f.name])
            enum = self._enums.get((cls, f.name))
            if enum is not None:
                schema = {"enum": [str(value) for value in enum]}
            always = f.metadata.get("wire") == "always"
            key = camel(f.name)
            properties[key] = _or_null(schema) if nullable and always else schema
            if always or not nullable:
                required.append(key)
        return {
            "type": "object",
            "required": required,
            "properties": properties,
            "additionalProperties": False,
        }

    def _of(self, tp: Any) -> tuple[dict[str, Any], bool]:
        origin = get_origin(tp)
        if origin is Union or origin is types.UnionType:
            args = get_args(tp)
            rest = [a for a in args if a is not type(None)]
            nullable = len(rest) < len(args)
            if len(rest) == 1:
                return self._of(rest[0])[0], nullable
            return {"oneOf": [self.of(a) for a in rest]}, nullable
        if origin is Literal:
            return {"enum": list(get_args(tp))}, False
        if origin in (list, tuple):
            item = [a for a in get_args(tp) if a is not Ellipsis]
            items = self.of(item[0]) if item else {}
            return {"type": "array", "items": items}, False
        if origin is dict:
            value = get_args(tp)[1]
            if value is Any:
                return {"type": "object"}, False
            return {"type": "object", "additionalProperties": self.of(value)}, False
        if tp is Any:
            return {}, False
        if isinstance(tp, type) and issubclass(tp, Enum):
            return {"enum": [member.value for member in tp]}, False
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.ref(tp), False
        if tp in _SCALARS:
            return dict(_SCALARS[tp]), False
        raise TypeError(f"no JSON Schema for {tp!r}")


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "items", "additionalProperties"}:
        return {**schema, "type": [kind, "null"]}
    if set(schema) == {"enum"}:
        return {"enum": [*schema["enum"], None]}
    if not schema:
        return schema
    return {"oneOf": [{"type": "null"}, schema]}
