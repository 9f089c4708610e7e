"""Web origins: what an agent's ``allowed_origins`` may hold, and a request's ``Origin``.

An allowed origin is exactly ``scheme://host[:port]`` as a browser serialises it: scheme
``http`` or ``https``, a host in lower case and ASCII (an IDN host in punycode), a port
from 1 to 65535 and never the scheme's default (a browser leaves it out). Anything else
would never equal a browser's ``Origin`` and fails closed, silently; so ``hostcall check``
refuses it with a message saying what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request

from hostcall.errors import Forbidden
from hostcall.protocol.codes import ErrorCode

DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}")
_IPV6 = re.compile(r"\[[0-9a-f:.]+\]")


class BadOrigin(ValueError):
    """``origin`` cannot be an allowed origin; ``reason`` says why, for a person."""

    def __init__(self, origin: object, reason: str) -> None:
        super().__init__(f"{origin!r} is not an origin like 'https://example.com': {reason}")
        self.origin = origin
        self.reason = reason


def normalize_origin(origin: object) -> str:
    """The origin as browsers send it (case and IDN normalised), or ``BadOrigin``."""
    if not isinstance(origin, str):
        raise BadOrigin(origin, "it must be a string")
    if not origin.isprintable() or any(c.isspace() for c in origin):
        raise BadOrigin(origin, "it contains spaces or control characters")
    if "*" in origin:
        raise BadOrigin(origin, "wildcards are not supported; list each origin")
    scheme, sep, rest = origin.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in DEFAULT_PORTS:
        raise BadOrigin(origin, "the scheme must be http:// or https://")
    if any(c in rest for c in "/?#;,\\@"):
        raise BadOrigin(origin, "an origin has no path, query, fragment, user or parameters")
    if rest.startswith("[") and "]" not in rest:
        raise BadOrigin(origin, "the IPv6 address is not valid")
    try:
        port = urlsplit(f"{scheme}://{rest}").port
    except ValueError:
        raise BadOrigin(origin, "the port must be a number from 1 to 65535") from None
    netloc_host = rest.rsplit(":", 1)[0] if port is not None or rest.endswith(":") else rest
    if rest.endswith(":"):
        raise BadOrigin(origin, "the port is empty")
    host = _ascii_host(origin, netloc_host)
    if port is not None and not 1 <= port <= 65535:
        raise BadOrigin(origin, "the port must be a number from 1 to 65535")
    if port is None or port == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def _ascii_host(origin: str, host: str) -> str:
    if host.startswith("["):
        if not _IPV6.fullmatch(host.lower()):
            raise BadOrigin(origin, "the IPv6 address is not valid")
        return host.lower()
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise BadOrigin(origin, "the host is not a valid domain name") from None
    if not _HOST.fullmatch(ascii_host):
        raise BadOrigin(origin, "the host is not a valid domain name")
    return ascii_host


def check_request_origin(
    request: Request, allowed: Iterable[str], *, required: bool = False
) -> None:
    """A browser's ``Origin`` must be the widget's own (Hostcall's) or one of ``allowed``.

    Absent, it is a client outside a browser (which could send any Origin it liked), let
    through unless ``required``: creating a conversation costs money, so a caller has to
    say where it comes from. ``null`` (sandboxed frames, file: pages) is never allowed.
    """
    origin = request.headers.get("origin")
    if origin is None:
        if required:
            raise Forbidden(
                "creating a conversation needs an Origin header naming one of the agent's "
                "allowed origins",
                code=ErrorCode.ORIGIN_NOT_ALLOWED,
            )
        return
    if origin in allowed or origin == _own_origin(request):
        return
    raise Forbidden(
        f"requests from the origin {origin[:100]!r} are not allowed for this agent",
        code=ErrorCode.ORIGIN_NOT_ALLOWED,
    )


def _own_origin(request: Request) -> str:
    # The widget page's own fetches carry Hostcall's origin: scheme and the Host it asked.
    return f"{request.url.scheme}://{request.headers.get('host', '')}"
