"""Blocks the server runs itself when an agent calls them as tools. Every kind has one shape
(``kind``: a ``BlockKind`` and its ``Block``), one file each in ``kinds/`` (the HTTP request,
an MCP server's tool, the person tool, an installed node), listed in ``registry``; what they
run lives beside them (``http_request``, ``mcp/``, ``installed``, and ``node``, what a
package's author subclasses).

What every block shares lives here: the errors the model receives, the AI-provided
parameters a tool declares, and the ``{{ $fromAI.key }}`` references that place them.

    BlockError            .code, .message (written for the model)
     ├── InvalidValue     invalid_arguments
     ├── NotAuthorized    not_authorized     .host
     ├── MissingUser      not_authorized     (a $user value the run does not have)
     └── BlockFailed      block_failed       .status, .reason
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hostcall.errors import ToolErrorCode
from hostcall.visitors.visitor import Visitor

PARAM_TYPES = ("string", "number", "integer", "boolean")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_EXPR = re.compile(r"\{\{(.*?)\}\}", re.S)
_REF = re.compile(r"\s*\$fromAI\.([A-Za-z_][A-Za-z0-9_]*)\s*\Z")
# The signed-in visitor the run acts for (docs/identity.md): fixed by the server, never the
# model's. Its values are found under these keys, which no AI parameter can have (a key is
# letters, digits and _), so the model's arguments can neither supply nor change them.
_USER_REF = re.compile(r"\s*(\$user\.(?:sub|claims\.[A-Za-z_][A-Za-z0-9_]*))\s*\Z")
USER_PREFIX = "$user."


# ---- errors the model receives ---------------------------------------------------------------


class BlockError(Exception):
    code: ToolErrorCode = ToolErrorCode.BLOCK_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidValue(BlockError):
    code = ToolErrorCode.INVALID_ARGUMENTS


class NotAuthorized(BlockError):
    code = ToolErrorCode.NOT_AUTHORIZED

    def __init__(self, host: str) -> None:
        super().__init__(f"This tool may not send requests to {host}.")
        self.host = host


class MissingUser(BlockError):
    """A ``$user`` value the tool needs is not there: nobody signed in, or a claim missing."""

    code = ToolErrorCode.NOT_AUTHORIZED


class BlockFailed(BlockError):
    code = ToolErrorCode.BLOCK_FAILED

    def __init__(
        self, reason: str, *, status: int | None = None, subject: str = "The request"
    ) -> None:
        where = "" if status is None else f" with status {status}"
        super().__init__(f"{subject} failed{where}: {reason}")
        self.status = status
        self.reason = reason


# ---- AI-provided parameters ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AiParam:
    key: str
    type: str
    description: str = ""
    required: bool = False


def parse_ai_params(raw: Any) -> tuple[AiParam, ...]:
    """Read the seed's ``aiParams`` list (an entry's ``id`` is accepted and ignored)."""
    if not isinstance(raw, list | None):
        raise ValueError("aiParams: expected a list of parameters")
    params: list[AiParam] = []
    for i, item in enumerate(raw or ()):
        where = f"aiParams[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object")
        if unknown := set(item) - {"id", "key", "type", "description", "required"}:
            raise ValueError(f"{where}: unknown field {min(unknown)!r}")
        p = AiParam(
            item.get("key", ""),
            item.get("type", "string"),
            item.get("description", ""),
            item.get("required", False),
        )
        if not isinstance(p.key, str) or not _KEY.match(p.key):
            raise ValueError(
                f"{where}.key: {p.key!r} must be letters, digits and _, not starting with a digit"
            )
        if any(q.key == p.key for q in params):
            raise ValueError(f"{where}.key: duplicate key {p.key!r}")
        if p.type not in PARAM_TYPES:
            raise ValueError(f"{where}.type: {p.type!r} is not one of {', '.join(PARAM_TYPES)}")
        if not isinstance(p.description, str):
            raise ValueError(f"{where}.description: expected text")
        if not isinstance(p.required, bool):
            raise ValueError(f"{where}.required: expected true or false")
        params.append(p)
    return tuple(params)


def ai_params_schema(params: Sequence[AiParam]) -> dict[str, Any]:
    properties = {
        p.key: {"type": p.type} | ({"description": p.description} if p.description else {})
        for p in params
    }
    return {
        "type": "object",
        "properties": properties,
        "required": [p.key for p in params if p.required],
        "additionalProperties": False,
    }


# ---- {{ $fromAI.key }}, {{ $user.sub }}, {{ $user.claims.NAME }} ---------------------------------


@dataclass(frozen=True, slots=True)
class AiRef:
    # An AI parameter's key, or ``$user.sub`` / ``$user.claims.NAME`` (``user_values``).
    key: str


def uses_user(parts: Sequence[str | AiRef]) -> bool:
    return any(isinstance(p, AiRef) and p.key.startswith(USER_PREFIX) for p in parts)


def user_values(visitor: Visitor | None, keys: Collection[str]) -> dict[str, Any]:
    """The ``$user`` values the templates name (``keys``), from the signed-in visitor the run
    acts for. ``NotAuthorized``-like refusal is the caller's: this raises ``MissingUser`` when
    nobody is signed in, or their token lacks a named claim."""
    wanted = [k for k in keys if k.startswith(USER_PREFIX)]
    if not wanted:
        return {}
    if visitor is None:
        raise MissingUser("This tool acts for a signed-in person, and nobody is signed in.")
    view = visitor.view()
    claims = view["claims"]
    values: dict[str, Any] = {}
    for key in wanted:
        name = key[len(USER_PREFIX) :]
        if name == "sub":
            values[key] = view["sub"]
        elif (claim := name.removeprefix("claims.")) in claims:
            values[key] = claims[claim]
        else:
            raise MissingUser(f"The signed-in person's token has no {claim!r} claim.")
    return values


def split_template(text: str, where: str, keys: Collection[str] | None = None) -> list[str | AiRef]:
    """``text`` as literal parts and ``$fromAI`` references; any other ``{{ }}`` is refused."""
    parts: list[str | AiRef] = []
    pos = 0
    for m in _EXPR.finditer(text):
        if (user := _USER_REF.match(m.group(1))) is not None:
            parts += [text[pos : m.start()], AiRef(user.group(1))]
            pos = m.end()
            continue
        if (ref := _REF.match(m.group(1))) is None:
            raise ValueError(
                f"{where}: {m.group(0)!r} is not allowed; only {{{{ $fromAI.<key> }}}}, "
                "{{ $user.sub }} and {{ $user.claims.<name> }} are (expressions are never "
                "evaluated)"
            )
        if keys is not None and ref.group(1) not in keys:
            raise ValueError(f"{where}: $fromAI.{ref.group(1)} is not a declared AI parameter")
        parts += [text[pos : m.start()], AiRef(ref.group(1))]
        pos = m.end()
    parts.append(text[pos:])
    if any(isinstance(p, str) and "{{" in p for p in parts):
        raise ValueError(f"{where}: '{{{{' without a matching '}}}}'")
    return [p for p in parts if p != ""]


# ---- secrets ---------------------------------------------------------------------------------


def redact(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` with every secret (longest first) replaced, in keys and values alike."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "[redacted]")
        return value
    if isinstance(value, list):
        return [redact(item, secrets) for item in value]
    if isinstance(value, dict):
        return {redact(k, secrets): redact(v, secrets) for k, v in value.items()}
    return value


def ref_text(values: Mapping[str, Any], ref: AiRef) -> str:
    """An argument placed inside a text: as text, whatever its JSON type."""
    value = values.get(ref.key)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is not None and not isinstance(value, str | int | float):
        raise InvalidValue(f"The argument {ref.key!r} must be text, a number or a boolean.")
    return "" if value is None else str(value)


def fill_refs(parts: list[str | AiRef], values: Mapping[str, Any]) -> str:
    return "".join(p if isinstance(p, str) else ref_text(values, p) for p in parts)


def whole_ref(value: Any) -> AiRef | None:
    """The reference a text is made of alone (``"{{ $fromAI.n }}"``), else None."""
    if not isinstance(value, str) or "{{" not in value:
        return None
    try:
        parts = split_template(value, "")
    except ValueError:
        return None
    return parts[0] if len(parts) == 1 and isinstance(parts[0], AiRef) else None


def render_value(value: Any, values: Mapping[str, Any]) -> Any:
    """A JSON value with its references replaced by the arguments, in one pass: a text that
    is a reference alone becomes the argument itself (its JSON type kept), a reference inside
    a text becomes text. Nothing is evaluated, and an argument is never read for more."""
    if isinstance(value, str):
        parts = split_template(value, "value")
        if len(parts) == 1 and isinstance(parts[0], AiRef):
            return values.get(parts[0].key)
        return fill_refs(parts, values)
    if isinstance(value, list):
        return [render_value(item, values) for item in value]
    if isinstance(value, dict):
        return {name: render_value(item, values) for name, item in value.items()}
    return value


def value_templates(value: Any, where: str) -> Iterator[tuple[str, str, bool]]:
    """Every text of a JSON value that could hold a reference: ``(where, text, is_a_name)``."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            yield at, item, False
        elif isinstance(item, list):
            stack += [(f"{at}[{i}]", v) for i, v in enumerate(item)]
        elif isinstance(item, dict):
            for name, v in item.items():
                yield at, str(name), True
                stack.append((f"{at}.{name}", v))
