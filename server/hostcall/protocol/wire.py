"""Typed objects to wire JSON: the only code that turns snake_case into camelCase.

Every wire object is a frozen dataclass. ``to_wire`` writes its fields under their camelCase
names, leaving out fields that are ``None`` (AG-UI's optional fields are absent, not null),
except fields marked ``ALWAYS``, which the documented shape carries even when null. A field
holds plain JSON, another wire object, or a tuple of them (``protocol.schema`` describes
the same rules as JSON Schema).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hostcall import strictjson

ALWAYS = {"wire": "always"}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_KEYS: dict[type, tuple[tuple[str, str, bool], ...]] = {}


def _keys(cls: type) -> tuple[tuple[str, str, bool], ...]:
    keys = _KEYS.get(cls)
    if keys is None:
        fields = dataclasses.fields(cls)
        keys = _KEYS[cls] = tuple(
            (f.name, camel(f.name), f.metadata.get("wire") == "always") for f in fields
        )
    return keys


# Whether a value of each type met is a wire object: one lookup per field, not the three
# calls of ``dataclasses.is_dataclass`` (every event written goes through here).
_IS_WIRE: dict[type, bool] = {}


def to_wire(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, key, always in _keys(type(obj)):
        value = getattr(obj, attr)
        if value is None and not always:
            continue
        kind = type(value)
        wire = _IS_WIRE.get(kind)
        if wire is None:
            wire = _IS_WIRE[kind] = dataclasses.is_dataclass(kind)
        if wire:
            value = to_wire(value)
        elif type(value) is tuple and value and dataclasses.is_dataclass(value[0]):
            value = [to_wire(item) for item in value]  # a tuple of wire objects
        out[key] = value
    return out


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept as is (the size limits count UTF-8 bytes).

    Strict: a non-finite number raises here, before it is stored, rather than
    reaching every stream as the non-JSON ``NaN``."""
    return strictjson.dumps(value)
