"""Reading request bodies: the one place a request's bytes become JSON.

The size is checked before parsing, from ``Content-Length`` and again while reading (a
chunked body declares none).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from hostcall import strictjson
from hostcall.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from hostcall.protocol.codes import ErrorCode


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request body as a strict JSON object, refusing more than ``max_bytes`` before
    parsing, and any body not declared ``application/json`` (a cross-origin ``text/plain``
    POST is a "simple request" a foreign page can send without a CORS preflight)."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type and media_type != "application/json":
        raise UnsupportedMediaType(
            f"request body must be application/json, not {media_type[:60]!r}"
        )
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
    if not media_type:
        raise UnsupportedMediaType("a request body needs Content-Type: application/json")
    try:
        value = strictjson.loads(body)
    except strictjson.StrictJSONError as exc:
        raise BadRequest(
            f"request body is not valid JSON: {exc.message}",
            code=ErrorCode.MALFORMED_JSON,
            reason=exc.reason,
        ) from None
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object", code=ErrorCode.MALFORMED_JSON)
    return value
