"""The HTTP request block against real servers on loopback (issue #4, sections 2 and 4).

``target`` and ``other`` are Starlette apps under uvicorn that record every request they get;
``trap`` is a bare TCP listener that counts every *connection*, so a refused target proves
that nothing was even dialled.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote

import httpx
import pytest

from hostcall.blocks.http_request import (
    AiParam,
    BlockFailed,
    HttpRequestSpec,
    InvalidValue,
    NotAuthorized,
    ai_params_schema,
    execute,
    parse_ai_params,
    parse_allowed_hosts,
    parse_request_spec,
    render_request,
)
from tests.support.loopback import HUGE_CHUNK, HUGE_CHUNKS, Live, Seen, Trap, live_server

SECRET = "Bearer s3cr3t-connection-token"


@pytest.fixture(scope="module")
def target() -> Iterator[Live]:
    with live_server() as live:
        yield live


@pytest.fixture(scope="module")
def other() -> Iterator[Live]:
    with live_server() as live:
        yield live


@pytest.fixture(scope="module")
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()


@pytest.fixture(autouse=True)
def fresh_counts(target: Live, other: Live, trap: Trap) -> None:
    target.rec.clear()
    other.rec.clear()
    trap.connections = 0


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port bound on loopback but not listening: connecting to it is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield sock.getsockname()[1]
    sock.close()


async def run(spec: HttpRequestSpec, values: dict[str, Any], *allowed: str, **options: Any) -> Any:
    request = render_request(spec, values)
    options = {"timeout": 5.0, "max_response_bytes": 1_000_000, **options}
    if "extra_headers" in options:
        # The connection's own host: the first allowed one, where these tests' requests go.
        options.setdefault("credential_hosts", allowed[:1])
    return await execute(request, allowed_hosts=allowed, **options)


def spec_for(live: Live, url: str, *, params: tuple[AiParam, ...] = (), **raw: Any) -> Any:
    return parse_request_spec({"url": live.base + url, **raw}, params)


# ---- AI parameters ---------------------------------------------------------------------------

PARAMS = parse_ai_params(
    [
        {"key": "v", "type": "string", "description": "anything"},
        {"key": "other", "type": "string"},
    ]
)


def test_seed_ai_params_become_the_tool_input_schema() -> None:
    params = parse_ai_params(
        [
            {
                "id": "p1",
                "key": "ville",
                "type": "string",
                "description": "Ville",
                "required": True,
            },
            {"key": "jours", "type": "integer"},
            {"key": "seuil", "type": "number", "required": False},
            {"key": "detail", "type": "boolean"},
        ]
    )
    assert params[0] == AiParam("ville", "string", "Ville", required=True)
    assert ai_params_schema(params) == {
        "type": "object",
        "properties": {
            "ville": {"type": "string", "description": "Ville"},
            "jours": {"type": "integer"},
            "seuil": {"type": "number"},
            "detail": {"type": "boolean"},
        },
        "required": ["ville"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"key": "1city", "type": "string"}], "aiParams[0].key"),
        ([{"key": "ci-ty", "type": "string"}], "aiParams[0].key"),
        ([{"key": "", "type": "string"}], "aiParams[0].key"),
        ([{"type": "string"}], "aiParams[0].key"),
        ([{"key": "city", "type": "object"}], "aiParams[0].type"),
        ([{"key": "city", "type": "string"}, {"key": "city", "type": "number"}], "duplicate key"),
        ([{"key": "city", "type": "string", "default": "Paris"}], "unknown field 'default'"),
        ([{"key": "city", "type": "string", "required": "yes"}], "aiParams[0].required"),
        ({"key": "city"}, "expected a list"),
    ],
)
def test_bad_ai_params_are_refused_with_the_field_named(raw: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_ai_params(raw)
    assert message in str(info.value)


# ---- parsing the request spec ----------------------------------------------------------------

BASE = "http://127.0.0.1:8002"


@pytest.mark.parametrize(
    ("raw", "field_named"),
    [
        ({"url": BASE + "/x", "timeout": 3}, "'timeout'"),
        ({"method": "TRACE", "url": BASE}, "method"),
        ({"method": 1, "url": BASE}, "method"),
        ({"url": "ftp://127.0.0.1/x"}, "url"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "/relative/path"}, "url"),
        ({"url": "{{ $fromAI.v }}://127.0.0.1/x"}, "url"),
        ({"url": "http://{{ $fromAI.v }}/x"}, "url"),
        ({"url": "http://127.0.0.1{{ $fromAI.v }}/x"}, "url"),
        ({"url": "http://127.0.0.1:{{ $fromAI.v }}/x"}, "url"),
        ({"url": "http://{{ $fromAI.v }}.example/x"}, "url"),
        ({"url": "http://user:pw@127.0.0.1/x"}, "url"),
        ({"url": BASE + "/x#{{ $fromAI.v }}"}, "url"),
        ({"url": BASE, "headers": {"X-{{ $fromAI.v }}": "1"}}, "headers"),
        ({"url": BASE, "headers": {"X-A\r\nX-B": "1"}}, "headers"),
        ({"url": BASE, "headers": {"Host": "evil.example"}}, "headers.Host"),
        ({"url": BASE, "headers": {"X-A": "1", "x-a": "2"}}, "headers"),
        ({"url": BASE, "headers": {"X-A": 1}}, "headers.X-A"),
        ({"url": BASE, "query": {"{{ $fromAI.v }}": "1"}}, "query"),
        ({"url": BASE, "body": {"{{ $fromAI.v }}": 1}}, "body"),
        ({"url": BASE + "/{{ $fromAI.nope }}"}, "$fromAI.nope"),
        ({"url": BASE, "query": {"q": "{{ $fromAI.nope }}"}}, "query.q"),
        ({"url": BASE, "headers": {"X-A": "{{ $fromAI.nope }}"}}, "headers.X-A"),
        ({"url": BASE, "body": {"a": ["{{ $fromAI.nope }}"]}}, "body.a[0]"),
        ({"url": BASE + "/{{ $fromAI.v + 1 }}"}, "url"),
        ({"url": BASE, "query": {"q": "{{ 1 + 1 }}"}}, "query.q"),
        ({"url": BASE, "headers": {"X-A": "{{ $json.token }}"}}, "headers.X-A"),
        ({"url": BASE, "body": "{{ $fromAI['v'] }}"}, "body"),
        ({"url": BASE, "body": {"a": "{{ {{ $fromAI.v }} }}"}}, "body.a"),
        ({"url": BASE, "body": {"a": "{{ $fromAI.v"}}, "body.a"),
        ({"url": BASE, "body": {"a": float("nan")}}, "body"),
    ],
)
def test_bad_spec_is_refused_with_the_field_named(raw: dict[str, Any], field_named: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_request_spec(raw, PARAMS)
    assert field_named in str(info.value)


def test_spec_accepts_placeholders_in_path_query_header_values_and_body() -> None:
    spec = parse_request_spec(
        {
            "method": "post",
            "url": BASE + "/cities/{{$fromAI.v}}/weather?unit=c&day={{ $fromAI.other }}",
            "query": {"lang": "{{ $fromAI.v }}"},
            "headers": {"X-City": "{{ $fromAI.v }}"},
            "body": {"city": "{{ $fromAI.v }}", "note": "fixed"},
        },
        PARAMS,
    )
    assert spec.method == "POST"
    assert spec.headers == {"X-City": "{{ $fromAI.v }}"}


# ---- rendering: values are values ------------------------------------------------------------

INJECTIONS = [
    pytest.param("{{ $fromAI.other }}", id="template"),
    pytest.param("../../admin", id="dot-dot"),
    pytest.param("..", id="bare-dot-dot"),
    pytest.param("//evil.example", id="authority"),
    pytest.param("@evil.example", id="userinfo"),
    pytest.param("http://evil.example/", id="absolute-url"),
    pytest.param("?x=1#frag", id="query-and-fragment"),
    pytest.param("a&admin=1", id="extra-param"),
    pytest.param("a\r\nX-Injected: 1", id="crlf"),
    pytest.param("%2e%2e/", id="pre-encoded"),
    pytest.param("ünï cødé ☃ 日本+", id="unicode"),
]
VALUES_BESIDE = {"other": "EVALUATED"}  # would show up if a value were evaluated


def positions(live: Live) -> dict[str, dict[str, Any]]:
    here = live.base
    return {
        "path": {"url": here + "/echo/items/{{ $fromAI.v }}/details"},
        "url-query": {"url": here + "/echo/search?fixed=1&q={{ $fromAI.v }}"},
        "query": {"url": here + "/echo/search?fixed=1", "query": {"q": "{{ $fromAI.v }}"}},
        "header": {"url": here + "/echo/h", "headers": {"X-Value": "{{ $fromAI.v }}"}},
        "body-text": {"url": here + "/echo/b", "body": {"text": "say {{ $fromAI.v }}!"}},
        "body-value": {"url": here + "/echo/b", "body": {"value": "{{ $fromAI.v }}"}},
    }


def received(position: str, seen: Seen) -> Any:
    """The value the target received for ``position``, decoded as the target would."""
    if position == "path":
        segments = seen.raw_path.split("/")
        assert segments[:3] == ["", "echo", "items"] and segments[4:] == ["details"], segments
        return unquote(segments[3])
    if position in ("url-query", "query"):
        assert seen.raw_path == "/echo/search"
        pairs = parse_qsl(seen.query, keep_blank_values=True, strict_parsing=True)
        assert [name for name, _ in pairs] == ["fixed", "q"], pairs
        return pairs[1][1]
    if position == "header":
        assert seen.raw_path == "/echo/h"
        return seen.headers["x-value"]
    body = json.loads(seen.body)
    return body["text"][4:-1] if position == "body-text" else body["value"]


def header_safe(text: str) -> bool:
    return all(32 <= ord(c) < 127 for c in text)


# Every position with every payload, except what a header refuses before sending (see
# test_header_value_with_line_break_control_or_non_ascii_is_refused).
INJECTION_CASES = [
    pytest.param(position, p.values[0], id=f"{position}-{p.id}")
    for position in ("path", "url-query", "query", "header", "body-text", "body-value")
    for p in INJECTIONS
    if position != "header" or header_safe(str(p.values[0]))
]


@pytest.mark.parametrize(("position", "payload"), INJECTION_CASES)
async def test_injected_value_reaches_target_literally_and_changes_no_shape(
    target: Live, trap: Trap, position: str, payload: str
) -> None:
    spec = parse_request_spec({"method": "POST", **positions(target)[position]}, PARAMS)
    rendered = render_request(spec, {"v": payload, **VALUES_BESIDE})
    assert httpx.URL(rendered.url).netloc.decode() == target.host

    result = await execute(
        rendered, allowed_hosts=[target.host], timeout=5, max_response_bytes=100_000
    )

    assert result.status == 200
    assert target.rec.hits == {"echo": 1} and trap.connections == 0
    seen = target.rec.last
    assert seen.method == "POST" and seen.headers["host"] == target.host
    assert "x-injected" not in seen.headers
    assert received(position, seen) == payload


@pytest.mark.parametrize("payload", ["a\r\nX-Injected: 1", "a\nb", "a\x00b", "a\x7fb", "café"])
def test_header_value_with_line_break_control_or_non_ascii_is_refused(payload: str) -> None:
    spec = parse_request_spec({"url": BASE, "headers": {"X-Value": "v={{ $fromAI.v }}"}}, PARAMS)
    with pytest.raises(InvalidValue) as info:
        render_request(spec, {"v": payload})
    assert info.value.code == "invalid_arguments"
    assert "'v'" in info.value.message and "X-Value" in info.value.message


def test_whole_value_placeholder_keeps_its_type_and_text_gets_interpolated() -> None:
    params = parse_ai_params(
        [
            {"key": "n", "type": "integer"},
            {"key": "x", "type": "number"},
            {"key": "b", "type": "boolean"},
            {"key": "missing", "type": "string"},
        ]
    )
    spec = parse_request_spec(
        {
            "method": "PUT",
            "url": BASE + "/items/{{ $fromAI.n }}/{{ $fromAI.missing }}",
            "query": {"flag": "{{ $fromAI.b }}", "opt": "{{ $fromAI.missing }}"},
            "body": {
                "n": "{{ $fromAI.n }}",
                "x": ["{{ $fromAI.x }}"],
                "b": "{{ $fromAI.b }}",
                "missing": "{{ $fromAI.missing }}",
                "label": "n={{ $fromAI.n }} b={{ $fromAI.b }} m=[{{ $fromAI.missing }}]",
                "fixed": 7,
            },
        },
        params,
    )
    rendered = render_request(spec, {"n": 3, "x": 2.5, "b": True})
    assert rendered.method == "PUT"
    assert rendered.url == BASE + "/items/3/?flag=true&opt="
    assert rendered.headers == {"Content-Type": "application/json"}
    assert rendered.body is not None
    assert json.loads(rendered.body) == {
        "n": 3,
        "x": [2.5],
        "b": True,
        "missing": None,
        "label": "n=3 b=true m=[]",
        "fixed": 7,
    }


def test_value_that_is_not_a_scalar_is_refused_in_text() -> None:
    spec = parse_request_spec({"url": BASE + "/items/{{ $fromAI.v }}"}, PARAMS)
    with pytest.raises(InvalidValue):
        render_request(spec, {"v": {"nested": "object"}})


# ---- execution -------------------------------------------------------------------------------


async def test_allowed_host_gets_the_request(target: Live) -> None:
    result = await run(spec_for(target, "/echo/ok"), {}, target.host)
    assert result.to_output()["status"] == 200
    assert result.body["method"] == "GET" and result.body["path"] == "/echo/ok"
    assert target.rec.hits == {"echo": 1}


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
async def test_host_not_on_the_list_is_refused_before_any_connection(
    target: Live, trap: Trap, host: str
) -> None:
    spec = parse_request_spec({"url": f"http://{host}:{trap.port}/"}, ())
    with pytest.raises(NotAuthorized) as info:
        await run(spec, {}, target.host, f"127.0.0.1:{trap.port + 1}")
    assert info.value.code == "not_authorized"
    assert info.value.host == f"{host}:{trap.port}"
    assert trap.connections == 0


async def test_redirect_to_an_allowed_path_is_followed(target: Live) -> None:
    result = await run(spec_for(target, "/redirect?to=/echo/after"), {}, target.host)
    assert result.status == 200 and result.body["path"] == "/echo/after"
    assert target.rec.hits == {"redirect": 1, "echo": 1}


@pytest.mark.parametrize(
    "where",
    [
        "http://127.0.0.1:{trap}/",
        "http://localhost:{trap}/stolen",
        "//127.0.0.1:{trap}/",
        "http://127.0.0.1:{target}@127.0.0.1:{trap}/",
    ],
)
async def test_redirect_to_a_host_not_on_the_list_is_refused_before_any_connection(
    target: Live, trap: Trap, where: str
) -> None:
    location = where.format(trap=trap.port, target=target.port)
    spec = spec_for(target, "/redirect", query={"to": location})
    with pytest.raises(NotAuthorized) as info:
        await run(spec, {}, target.host, extra_headers={"Authorization": SECRET})
    assert info.value.host.endswith(f":{trap.port}")
    assert trap.connections == 0 and target.rec.hits == {"redirect": 1}


async def test_credentials_go_to_the_target_and_never_into_the_result(target: Live) -> None:
    result = await run(
        spec_for(target, "/echo/me"), {}, target.host, extra_headers={"Authorization": SECRET}
    )
    assert target.rec.last.headers["authorization"] == SECRET
    output = json.dumps(result.to_output())
    assert "s3cr3t" not in output and "[redacted]" in output


async def test_connection_credentials_replace_a_header_of_the_same_name(target: Live) -> None:
    spec = spec_for(
        target, "/echo/me", params=PARAMS, headers={"authorization": "Bearer {{ $fromAI.v }}"}
    )
    await run(spec, {"v": "model-chosen"}, target.host, extra_headers={"Authorization": SECRET})
    assert target.rec.last.headers["authorization"] == SECRET
    assert "model-chosen" not in str(target.rec.last.headers)


async def test_credentials_do_not_follow_a_redirect_to_another_allowed_origin(
    target: Live, other: Live
) -> None:
    spec = spec_for(target, "/redirect", query={"to": other.base + "/echo/there"})
    result = await run(
        spec,
        {},
        target.host,
        other.host,
        extra_headers={"Authorization": SECRET, "X-Api-Key": "key-123456"},
    )
    assert result.status == 200
    assert target.rec.last.headers["x-api-key"] == "key-123456"
    assert other.rec.hits == {"echo": 1}
    assert "authorization" not in other.rec.last.headers
    assert "x-api-key" not in other.rec.last.headers


async def test_credentials_are_refused_for_a_host_their_connection_is_not_bound_to(
    target: Live, trap: Trap
) -> None:
    # Both hosts are allowed to the environment; the connection is bound to the target only.
    spec = parse_request_spec({"url": f"http://127.0.0.1:{trap.port}/steal"}, ())
    trap_host = f"127.0.0.1:{trap.port}"
    with pytest.raises(NotAuthorized) as info:
        await run(spec, {}, target.host, trap_host, extra_headers={"Authorization": SECRET},
                  credential_hosts=[target.host])  # fmt: skip
    assert info.value.host == trap_host
    assert trap.connections == 0
    # Without the connection the same request is allowed: the refusal is the credentials'.
    result = await run(spec, {}, target.host, trap_host)
    assert result.status == 200 and trap.connections == 1


async def test_303_after_post_is_followed_with_a_get_without_body(target: Live) -> None:
    spec = spec_for(
        target,
        "/redirect",
        method="POST",
        body={"a": 1},
        query={"to": "/echo/done", "status": "303"},
    )
    result = await run(spec, {}, target.host)
    assert result.body["method"] == "GET" and result.body["body"] == ""
    assert target.rec.requests[0].body == b'{"a": 1}'


async def test_redirect_loop_fails_after_max_redirects(target: Live) -> None:
    with pytest.raises(BlockFailed) as info:
        await run(spec_for(target, "/loop"), {}, target.host, max_redirects=2)
    assert "redirects" in info.value.reason and info.value.status is None
    assert target.rec.hits == {"loop": 3}


@pytest.mark.parametrize("status", [404, 500])
async def test_error_status_fails_with_status_and_short_reason_without_credentials(
    target: Live, status: int
) -> None:
    with pytest.raises(BlockFailed) as info:
        await run(
            spec_for(target, f"/status/{status}"),
            {},
            target.host,
            extra_headers={"Authorization": SECRET},
        )
    error = info.value
    assert error.code == "block_failed" and error.status == status
    assert error.reason.startswith("target says no") and len(error.reason) <= 200
    assert target.rec.last.headers["authorization"] == SECRET  # the target did echo it
    for text in (error.message, error.reason, str(error), repr(error)):
        assert "s3cr3t" not in text


@pytest.mark.parametrize("split", [4, 9, 12, 20])
async def test_credential_cut_where_reading_stopped_does_not_show_either(
    target: Live, split: int
) -> None:
    with pytest.raises(BlockFailed) as info:
        await run(
            spec_for(target, "/status/500", query={"split": str(split)}),
            {},
            target.host,
            extra_headers={"Authorization": SECRET},
        )
    assert "Bear" not in info.value.message and "s3c" not in info.value.message


async def test_connection_refused_fails(refused_port: int) -> None:
    spec = parse_request_spec({"url": f"http://127.0.0.1:{refused_port}/"}, ())
    with pytest.raises(BlockFailed) as info:
        await run(spec, {}, f"127.0.0.1:{refused_port}", extra_headers={"Authorization": SECRET})
    assert "could not connect" in info.value.reason and info.value.status is None
    assert "s3cr3t" not in info.value.message


async def test_slow_target_fails_with_timeout_on_time(target: Live) -> None:
    started = time.monotonic()
    with pytest.raises(BlockFailed) as info:
        await run(spec_for(target, "/slow"), {}, target.host, timeout=0.3)
    assert info.value.reason.startswith("timeout")
    assert time.monotonic() - started < 1.0
    assert target.rec.hits == {"slow": 1}


async def test_huge_response_fails_without_reading_it_all(target: Live) -> None:
    started = time.monotonic()
    with pytest.raises(BlockFailed) as info:
        await run(spec_for(target, "/huge"), {}, target.host, max_response_bytes=1_000_000)
    elapsed = time.monotonic() - started
    assert info.value.reason.startswith("response too large")
    assert not target.rec.huge_finished, "the client waited for the whole body"
    assert target.rec.huge_sent < HUGE_CHUNKS * len(HUGE_CHUNK)
    assert elapsed < 1.0


@pytest.mark.parametrize("entry", ["*", "*:80", "127.0.0.1", "http://127.0.0.1:80", "::1:80"])
async def test_allowed_hosts_entries_must_be_host_and_port(entry: str) -> None:
    spec = parse_request_spec({"url": BASE}, ())
    with pytest.raises(ValueError):
        await run(spec, {}, entry)


def test_allowed_hosts_are_normalised() -> None:
    assert parse_allowed_hosts([" LocalHost:8002 ", "[::1]:80"]) == {"localhost:8002", "[::1]:80"}
