"""Reading request bodies: the one place a request's bytes become JSON.

The size is checked before parsing, from ``Content-Length`` and again while reading (a
chunked body declares none). Text no store can hold (a NUL, a lone surrogate) is refused
here, before any route sees it, with ``400 invalid_text``; ``refuse_unstorable`` is the
same refusal for the other doors (the path, the query string and headers:
hostcall/middleware.py; the console's forms).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from hostcall import strictjson
from hostcall.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from hostcall.protocol.codes import ErrorCode

# The reason of an ``invalid_text`` refusal for percent-encoded bytes that are not UTF-8 (a
# query string, a path, a form): what would decode them to a lone surrogate, or to U+FFFD.
NOT_UTF8 = "not_utf8"


async def read_json(request: Request, max_bytes: int, *, check_text: bool = True) -> dict[str, Any]:
    """The request body as a strict JSON object, refusing more than ``max_bytes`` before
    parsing, and any body not declared ``application/json`` (a cross-origin ``text/plain``
    POST is a "simple request" a foreign page can send without a CORS preflight).
    ``check_text=False``: the caller refuses unstorable text itself (``refuse_unstorable``)."""
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
    # Only an escape can put a NUL or a lone surrogate in parsed JSON: a raw NUL is not JSON
    # and a raw surrogate is not UTF-8. A body with no escape is not walked.
    if check_text and b"\\u" in body:
        refuse_unstorable(value, "request body")
    return value


def refuse_unstorable(value: Any, what: str, where: str = "") -> None:
    """``400 invalid_text`` if a string in ``value`` (or a key) cannot be stored; ``what``
    names the part of the request for the message, ``where`` the path of ``value`` in it."""
    found = strictjson.unstorable(value, where)
    if found is not None:
        field, reason = found
        raise unstorable_text(what, reason, field)


def unstorable_what(reason: str, field: str = "") -> str:
    """What a refusal of ``reason`` found, and where: "a NUL character (in text)"."""
    said = {
        strictjson.NUL: "a NUL character",
        strictjson.LONE_SURROGATE: "a lone UTF-16 surrogate",
    }.get(reason, "bytes that are not UTF-8")
    return said + (f" (in {field[:200]})" if field else "")


def unstorable_text(what: str, reason: str, field: str = "") -> BadRequest:
    """The refusal of text no store can hold (``reason``: ``strictjson.NUL``,
    ``strictjson.LONE_SURROGATE`` or ``NOT_UTF8``)."""
    details = {"reason": reason, **({"field": field[:200]} if field else {})}
    return BadRequest(
        f"{what} holds {unstorable_what(reason, field)}, which cannot be stored; remove it",
        code=ErrorCode.INVALID_TEXT,
        **details,
    )


async def read_bytes(request: Request, max_bytes: int) -> bytes | None:
    """The request's raw body, or None if it is over ``max_bytes``: from its declared
    ``Content-Length`` before anything is read, else as soon as what arrived is over it
    (nothing past the limit is read, nor kept)."""
    declared = request.headers.get("content-length")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
