"""An HTTP request the server sends for an agent's tool call (issue #4, section 2).

A spec is parsed once from the agent file; each call renders it with the model's arguments
and executes it against an allow-list of ``host:port`` targets. Arguments are inserted as
values in one pass and never evaluated; the scheme, host and port come from the spec alone.
Errors and AI parameters are the ones every block shares (``hostcall.blocks``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import ssl
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import httpx

from hostcall import strictjson
from hostcall.blocks import (
    USER_PREFIX,
    AiParam,
    AiRef,
    BlockError,
    BlockFailed,
    InvalidValue,
    NotAuthorized,
    ai_params_schema,
    fill_refs,
    parse_ai_params,
    redact,
    ref_text,
    render_value,
    split_template,
    value_templates,
)

__all__ = [
    "AiParam", "BlockError", "BlockFailed", "HttpRequestSpec", "HttpResult", "InvalidValue",
    "NotAuthorized", "RenderedRequest", "ai_params_schema", "execute", "host_port",
    "parse_ai_params", "parse_allowed_hosts", "parse_request_spec", "render_request",
    "spec_target", "user_keys",
]  # fmt: skip

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
_ORIGIN = re.compile(r"(https?)://([^/?#]*)(.*)\Z", re.S | re.I)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_NOT_HEADER_TEXT = re.compile(r"[^\t\x20-\x7e]")
_SERVER_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_CREDENTIALS = frozenset({"authorization", "proxy-authorization", "cookie"})
_PORTS = {"http": 80, "https": 443}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


# ---- the spec --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpRequestSpec:
    method: str
    url: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: Any = None


def parse_request_spec(raw: Any, params: Sequence[AiParam]) -> HttpRequestSpec:
    if not isinstance(raw, dict):
        raise ValueError("request: expected an object")
    if unknown := set(raw) - {"method", "url", "query", "headers", "body"}:
        raise ValueError(f"request: unknown field {min(unknown)!r}")
    method, url = raw.get("method", "GET"), raw.get("url")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValueError(f"method: {method!r} is not one of {', '.join(METHODS)}")
    if not isinstance(url, str) or (m := _ORIGIN.match(url)) is None:
        raise ValueError(f"url: {url!r} must be an absolute http:// or https:// URL")
    if "{{" in m.group(2) or "}}" in m.group(2):
        raise ValueError(
            "url: the scheme, host and port are fixed; AI parameters may only "
            "appear in the path and query"
        )
    if "@" in m.group(2):
        raise ValueError("url: credentials in the URL are not allowed; use a connection")
    try:
        if not httpx.URL(f"http://{m.group(2)}/").host:
            raise ValueError(f"url: {url!r} has no host")
    except httpx.InvalidURL as exc:
        raise ValueError(f"url: {url!r} is not a valid URL ({exc})") from None
    if "#" in m.group(3):
        raise ValueError("url: a fragment (#...) is never sent; remove it")
    spec = HttpRequestSpec(
        method.upper(),
        url,
        _texts(raw.get("query", {}), "query"),
        _texts(raw.get("headers", {}), "headers"),
        raw.get("body"),
    )
    keys = {p.key for p in params}
    for where, text, is_name in _templates(spec):
        if is_name and ("{{" in text or "}}" in text):
            raise ValueError(f"{where}: names are fixed; {text!r} holds a placeholder")
        split_template(text, where, keys)
    for name, value in spec.headers.items():
        if not _TOKEN.match(name):
            raise ValueError(f"headers: {name!r} is not a valid header name")
        if name.lower() in _SERVER_HEADERS:
            raise ValueError(f"headers.{name}: set by the server, not by the tool")
        if _NOT_HEADER_TEXT.search(value):
            raise ValueError(f"headers.{name}: control or non-ASCII characters")
    if len({name.lower() for name in spec.headers}) != len(spec.headers):
        raise ValueError("headers: the same header is given twice")
    try:
        json.dumps(spec.body, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"body: not a JSON value ({exc})") from None
    return spec


def _texts(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object of text values")
    for name, value in raw.items():
        if not isinstance(value, str):
            raise ValueError(f"{where}.{name}: expected text")
    return dict(raw)


def _templates(spec: HttpRequestSpec) -> Iterator[tuple[str, str, bool]]:
    """Every text of the spec that could hold a placeholder: ``(where, text, is_a_name)``."""
    yield "url", spec.url, False
    for field, texts in (("query", spec.query), ("headers", spec.headers)):
        for name, value in texts.items():
            yield field, name, True
            yield f"{field}.{name}", value, False
    yield from value_templates(spec.body, "body")


def user_keys(spec: HttpRequestSpec) -> frozenset[str]:
    """The ``$user.…`` values the spec's templates name (hostcall/blocks/__init__.py)."""
    return frozenset(
        part.key
        for where, text, is_name in _templates(spec)
        if not is_name
        for part in split_template(text, where)
        if isinstance(part, AiRef) and part.key.startswith(USER_PREFIX)
    )


# ---- rendering -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RenderedRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None


def render_request(spec: HttpRequestSpec, values: Mapping[str, Any]) -> RenderedRequest:
    m = _ORIGIN.match(spec.url)
    assert m is not None, "spec.url was not checked by parse_request_spec"
    origin = f"{m.group(1).lower()}://{m.group(2)}"
    path: list[str] = []
    query: list[str] = []
    into = path
    for part in split_template(m.group(3), "url"):
        if isinstance(part, AiRef):
            # Do not "fix" the dots: an encoded "." keeps ".." from becoming a dot-segment.
            into.append(_encode(ref_text(values, part), dots=into is path))
            continue
        if into is path and "?" in part:
            before, part = part.split("?", 1)
            path.append(before)
            into = query
        into.append(quote(part, safe="/?&=%:@!$'()*+,;~[]"))
    for name, template in spec.query.items():
        value = fill_refs(split_template(template, f"query.{name}"), values)
        query.append(f"&{_encode(name)}={_encode(value)}")
    query_text = "".join(query).lstrip("&")
    url = origin + ("".join(path) or "/") + (f"?{query_text}" if query_text else "")
    if _target(httpx.URL(url)) != _target(httpx.URL(origin)):
        raise InvalidValue("The arguments would change the request's target.")
    headers: dict[str, str] = {}
    for name, template in spec.headers.items():
        parts = split_template(template, f"headers.{name}")
        for p in parts:
            if isinstance(p, AiRef) and _NOT_HEADER_TEXT.search(ref_text(values, p)):
                raise InvalidValue(
                    f"The argument {p.key!r} cannot go in the {name} header: "
                    "it holds a line break, control or non-ASCII character."
                )
        headers[name] = fill_refs(parts, values)
    body = None
    if spec.body is not None:
        try:
            text = json.dumps(render_value(spec.body, values), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            raise InvalidValue("The arguments must be JSON values (finite numbers).") from None
        body = text.encode()
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
    return RenderedRequest(spec.method, url, headers, body)


def _encode(text: str, *, dots: bool = False) -> str:
    encoded = quote(text, safe="")
    return encoded.replace(".", "%2E") if dots else encoded


# ---- execution -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int
    body: Any

    def to_output(self) -> dict[str, Any]:
        return {"status": self.status, "body": self.body}


def _target(url: httpx.URL) -> str:
    """``host:port`` as written in allowed_hosts (IPv6 in brackets, IDN as punycode)."""
    host = url.raw_host.decode("ascii").lower()
    if url.scheme not in _PORTS:
        raise NotAuthorized(f"{url.scheme}://{host}")
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{url.port or _PORTS[url.scheme]}"


def host_port(url: str) -> str:
    """``host:port`` of an absolute http(s) URL, as written in allowed_hosts; ValueError if
    it is not one."""
    try:
        return _target(httpx.URL(url))
    except (httpx.InvalidURL, NotAuthorized):
        raise ValueError(f"{url!r} is not an http(s) URL") from None


def spec_target(spec: HttpRequestSpec) -> str:
    """The ``host:port`` a spec's requests go to (fixed: placeholders never reach it)."""
    m = _ORIGIN.match(spec.url)
    assert m is not None, "spec.url was not checked by parse_request_spec"
    return host_port(f"{m.group(1).lower()}://{m.group(2)}/")


def parse_allowed_hosts(entries: Collection[str]) -> frozenset[str]:
    """``host:port`` entries, lowercased; ValueError for a wildcard or a missing port."""
    allowed = frozenset(entry.strip().lower() for entry in entries)
    for entry in allowed:
        if not re.fullmatch(r"[^\s*/@:\[\]]+:\d+|\[[0-9a-f:.]+\]:\d+", entry):
            raise ValueError(f"allowed_hosts: {entry!r} is not host:port ('*' is not supported)")
    return allowed


async def execute(
    request: RenderedRequest,
    *,
    allowed_hosts: Collection[str],
    extra_headers: Mapping[str, str] = _NO_HEADERS,
    credential_hosts: Collection[str] = (),
    timeout: float,
    max_response_bytes: int,
    max_redirects: int = 3,
    client: httpx.AsyncClient | None = None,
) -> HttpResult:
    allowed = parse_allowed_hosts(allowed_hosts)
    # A connection's credentials go only to the hosts it is declared with.
    bound = parse_allowed_hosts(credential_hosts)
    url, method, body = httpx.URL(request.url), request.method, request.body
    headers, origin = dict(request.headers), (url.scheme, _target(url))
    secrets = sorted(
        {s for v in extra_headers.values() for s in (v, *v.split()[1:]) if len(s) >= 4},
        key=len,
        reverse=True,
    )
    try:
        async with asyncio.timeout(timeout), _client(client, timeout) as http:
            for hop in range(max_redirects + 1):
                if (target := _target(url)) not in allowed:
                    raise NotAuthorized(target)  # before any connection to it
                if hop == 0 and extra_headers and target not in bound:
                    # Refused, not sent without them: the tool was built to use them.
                    raise NotAuthorized(target)
                same_origin = (url.scheme, target) == origin
                # A connection's credentials never follow a redirect to another origin.
                drop = {k.lower() for k in extra_headers} if same_origin else _CREDENTIALS
                sent = {k: v for k, v in headers.items() if k.lower() not in drop}
                sent |= extra_headers if same_origin else {}
                req = http.build_request(method, url, headers=sent, content=body)
                response = await http.send(req, stream=True, follow_redirects=False)
                try:
                    location = response.headers.get("location")
                    if response.status_code not in _REDIRECTS or not location:
                        return await _result(response, max_response_bytes, secrets)
                finally:
                    await response.aclose()
                if hop == max_redirects:
                    raise BlockFailed(f"more than {max_redirects} redirects")
                url = url.join(location)
                if response.status_code == 303 or (
                    response.status_code in (301, 302) and method == "POST"
                ):
                    method = "HEAD" if method == "HEAD" else "GET"
                    body = None
                    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    except (TimeoutError, httpx.TimeoutException):
        raise BlockFailed(f"timeout after {timeout:g} s") from None
    except httpx.ConnectError:
        raise BlockFailed(f"could not connect to {_target(url)}") from None
    except httpx.InvalidURL:
        raise BlockFailed("the target answered with an invalid redirect") from None
    except httpx.HTTPError as exc:
        # Only the type: an exception's text may quote a header, and so a credential.
        raise BlockFailed(f"network error ({type(exc).__name__})") from None
    raise AssertionError("unreachable")


def _client(
    client: httpx.AsyncClient | None, timeout: float
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    if client is not None:
        return nullcontext(client)  # the caller's: used, not closed
    # trust_env=False: no proxy from the environment may sit between us and the target.
    return httpx.AsyncClient(trust_env=False, timeout=timeout, verify=_tls())


@functools.cache
def _tls() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=False)  # once: loading the CAs takes ~35 ms


async def _result(response: httpx.Response, limit: int, secrets: Sequence[str]) -> HttpResult:
    failed = response.status_code >= 400
    declared = response.headers.get("content-length", "")
    head = response.request.method == "HEAD"
    if not failed and not head and declared.isdigit() and int(declared) > limit:
        raise BlockFailed(f"response too large (over {limit} bytes)")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if failed and size >= 1024:
            break  # enough for a reason; the rest is never read
        if not failed and size > limit:
            raise BlockFailed(f"response too large (over {limit} bytes)")
    try:
        text = b"".join(chunks).decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:
        text = b"".join(chunks).decode("utf-8", errors="replace")
    if failed:
        reason = " ".join(redact(text, secrets).split())[:200]
        for secret in secrets:  # nor the start of one cut where reading stopped
            cut = next((k for k in range(len(secret), 3, -1) if reason.endswith(secret[:k])), 0)
            reason = reason[: len(reason) - cut]
        reason = reason or response.reason_phrase
        raise BlockFailed(reason, status=response.status_code)
    body: Any = text
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        try:
            body = strictjson.loads(text)
        except strictjson.StrictJSONError as exc:
            # Malformed text is kept as text (the model can still read it); well-formed JSON
            # with NaN, 1e999 or absurd nesting would poison the conversation: refuse it.
            if exc.reason != exc.SYNTAX:
                raise BlockFailed(f"the response is not strict JSON: {exc.message}") from None
    return HttpResult(response.status_code, redact(body, secrets))
