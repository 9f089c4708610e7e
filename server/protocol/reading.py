"""Reading request bodies: the one place a request's bytes become JSON."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from server.errors import BadRequest, PayloadTooLarge


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request body as a JSON object, refusing more than ``max_bytes`` before parsing."""
    declared = request.headers.get("content-length")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body is {declared} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}", code="malformed_json") from None
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object", code="malformed_json")
    return value


def field_str(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"field {name!r} must be a string", field=name)
    return value


def field_object(
    body: dict[str, Any], name: str, *, required: bool = True
) -> dict[str, Any] | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"field {name!r} must be a JSON object", field=name)
    return value
