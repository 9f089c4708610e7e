"""MCP Apps on the server: a tool's view read from its server after the call, kept with the
call, offered on TOOL_CALL_RESULT and in the snapshot, served on the apps origin only under
a policy of its declared domains; and a view's requests back (a tool of its own server, its
model context) held to every rule. Against the SDK's own server over streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.harness import Conv, Harness, write_agent
from tests.support.mcp_apps_server import VIEW_HTML
from tests.support.mcp_apps_server import http_server as apps_server
from tests.support.mcp_server import http_server as crm_server

APPS = "http://apps.testserver"
WIDGET = "http://testserver"


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    with apps_server() as board, crm_server() as crm:
        yield board, crm


def rule(text: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"match": f"^{text}$", "tool": tool, "arguments": arguments or {},
            "reply": "done", "error_reply": "error {{ error.code }}"}  # fmt: skip


RULES = [
    rule("tasks", "show_tasks"),
    rule("flat", "flat_tasks"),
    rule("plain", "plain_view"),
    rule("huge", "huge_view"),
    rule("missing", "missing_view"),
    rule("web", "web_view"),
    rule("details", "task_details", {"task_id": "t1"}),
    {"match": "^context$", "reply": "page: {{ page | tojson }}"},
]


def build(tmp_path: Path, urls: tuple[str, str], *, apps: str | None = APPS) -> Harness:
    board, crm = urls
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {"dev": {"mcp_servers": ["board", "crm"]}},
        "mcp_servers": {"board": {"url": board}, "crm": {"url": crm}},
    }, name="_platform.json")  # fmt: skip
    write_agent(directory, {
        "id": "ops",
        "environment": "dev",
        "allowed_origins": ["http://localhost:8001"],
        "page_context": {},
        "model": {"kind": "scripted", "rules": RULES},
        "tools": [
            {"kind": "mcp", "server": "board", "tools": "all"},
            {"kind": "mcp", "server": "crm", "tools": ["lookup"]},
        ],
    })  # fmt: skip
    extra = {"apps_origin": apps} if apps else {}
    return Harness(tmp_path, directory, **extra)


@pytest.fixture
def h(tmp_path: Path, urls: tuple[str, str]) -> Iterator[Harness]:
    harness = build(tmp_path, urls)
    yield harness
    harness.stop()


def ask(h: Harness, text: str, conv: Conv | None = None) -> tuple[Conv, dict[str, Any]]:
    conv = conv or h.conversation("ops")
    h.say(conv, text)
    return conv, h.finish(conv, timeout=15)


def result_events(h: Harness, conv: Conv) -> list[dict[str, Any]]:
    return [e for name, e in h.events(conv) if name == "TOOL_CALL_RESULT"]


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_a_tools_view_is_offered_on_the_result_and_in_the_snapshot(h: Harness) -> None:
    conv, snap = ask(h, "tasks")
    (call,) = snap["calls"]
    app = call["app"]
    assert app["server"] == "board" and app["resourceUri"] == "ui://board/tasks.html"
    assert app["viewUrl"].startswith(f"{APPS}/apps/view/")
    assert app["proxyUrl"] == f"{APPS}/apps/proxy" and app["prefersBorder"] is True
    (event,) = result_events(h, conv)
    assert event["app"]["resourceUri"] == "ui://board/tasks.html"
    # The model reads the tool's result, and nothing of a view.
    assert "ui://" not in json.dumps(h.snapshot(conv)["messages"])
    assert h.assistant_texts(conv) == ["done"]
    # Each snapshot mints its own view URL.
    h.clock.advance(2)
    assert h.snapshot(conv)["calls"][0]["app"]["viewUrl"] != app["viewUrl"]


def test_the_view_is_served_on_the_apps_origin_under_its_declared_domains(h: Harness) -> None:
    _, snap = ask(h, "tasks")
    url = snap["calls"][0]["app"]["viewUrl"]
    r = h.http.get(url)
    assert r.status_code == 200, r.text
    assert r.text == VIEW_HTML
    policy = r.headers["content-security-policy"]
    assert "connect-src https://api.example.com;" in policy
    assert "https://cdn.example.com" in policy and "http://127.0.0.1:9" in policy
    # Undeclared, non-https or wildcard domains are never in the policy.
    for never in ("tracker.example.net", " * ", "'unsafe-eval'", "*;"):
        assert never not in policy
    assert "frame-src 'none'" in policy and f"frame-ancestors {APPS}" in policy
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_the_older_flat_key_declares_a_view_too(h: Harness) -> None:
    _, snap = ask(h, "flat")
    assert snap["calls"][0]["app"]["resourceUri"] == "ui://board/tasks.html"


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        ("plain", "resource_wrong_mime"),
        ("huge", "resource_too_large"),
        ("missing", "resource_not_found"),
    ],
)
def test_a_view_that_cannot_be_read_fails_alone(h: Harness, text: str, failed: str) -> None:
    conv, snap = ask(h, text)
    (call,) = snap["calls"]
    assert call["state"] == "answered" and call["outcome"]["output"]["content"]
    assert call["app"] == {"failed": failed}
    assert result_events(h, conv)[0]["app"] == {"failed": failed}
    # The model got its result, and no word of the view.
    assert h.assistant_texts(conv) == ["done"]
    stored = h.call(h.runtime.store.get_call_app, call["toolCallId"])
    assert stored is not None and stored.html is None and stored.failed == failed


def test_a_view_that_is_not_a_ui_resource_is_no_view(h: Harness) -> None:
    _, snap = ask(h, "web")
    assert "app" not in snap["calls"][0]


def test_without_an_apps_origin_the_view_is_unavailable(
    tmp_path: Path, urls: tuple[str, str]
) -> None:
    h = build(tmp_path, urls, apps=None)
    try:
        conv, snap = ask(h, "tasks")
        (call,) = snap["calls"]
        assert call["state"] == "answered"
        assert call["app"] == {"unavailable": "apps_origin_unset"}
        assert result_events(h, conv)[0]["app"] == {"unavailable": "apps_origin_unset"}
        assert h.call(h.runtime.store.get_call_app, call["toolCallId"]) is None
        # /apps/ exists nowhere then.
        assert h.http.get(f"{APPS}/apps/proxy?host={WIDGET}").status_code == 404
        assert h.http.get("/apps/proxy", params={"host": WIDGET}).status_code == 404
    finally:
        h.stop()


# ---- the apps origin's routes ------------------------------------------------------------


def view_url(h: Harness, conv: Conv | None = None) -> tuple[Conv, str]:
    conv, snap = ask(h, "tasks", conv)
    return conv, str(snap["calls"][-1]["app"]["viewUrl"])


def test_an_expired_view_token_is_not_found(h: Harness) -> None:
    _, url = view_url(h)
    h.clock.advance(601)
    r = h.http.get(url)
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_app"
    assert VIEW_HTML not in r.text


@pytest.mark.parametrize("token", ["nonsense", "a" * 300, "eyJjIjoiY29udiJ9.AAAA.BBBB"])
def test_a_bad_view_token_is_not_found(h: Harness, token: str) -> None:
    r = h.http.get(f"{APPS}/apps/view/{token}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_app"


def test_a_token_of_another_purpose_opens_no_view(h: Harness) -> None:
    conv, _ = view_url(h)
    r = h.http.get(f"{APPS}/apps/view/{conv.session}")
    assert r.status_code == 404


def test_a_view_token_for_another_resource_or_conversation_opens_nothing(h: Harness) -> None:
    from hostcall.tokens import Claims, Purpose

    conv, snap = ask(h, "tasks")
    call_id = snap["calls"][0]["toolCallId"]
    other = h.conversation("ops")
    for claims in (
        Claims(conv.id, call_id, tool="ui://board/other.html"),
        Claims(other.id, call_id, tool="ui://board/tasks.html"),
    ):
        token = h.runtime.tokens.sign(Purpose.APP_VIEW, claims)
        assert h.http.get(f"{APPS}/apps/view/{token}").status_code == 404
    # The same claims, rightly bound, do open it: the refusals above were the binding's.
    token = h.runtime.tokens.sign(
        Purpose.APP_VIEW, Claims(conv.id, call_id, tool="ui://board/tasks.html")
    )
    assert h.http.get(f"{APPS}/apps/view/{token}").status_code == 200


def test_the_proxy_is_framed_by_the_widget_only_and_runs_its_own_script(h: Harness) -> None:
    r = h.http.get(f"{APPS}/apps/proxy", params={"host": WIDGET})
    assert r.status_code == 200
    policy = r.headers["content-security-policy"]
    assert f"frame-ancestors {WIDGET}" in policy and "script-src 'self';" in policy
    assert '<script src="/apps/proxy.js"' in r.text and "srcdoc" not in r.text
    js = h.http.get(f"{APPS}/apps/proxy.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "sandbox-proxy-ready" in js.text and "srcdoc" not in js.text.split("\n", 6)[-1]


@pytest.mark.parametrize("host", ["", "javascript:alert(1)", "https://*.example.com", APPS])
def test_the_proxy_refuses_a_parent_that_is_no_widget_origin(h: Harness, host: str) -> None:
    r = h.http.get(f"{APPS}/apps/proxy", params={"host": host})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "host"


def test_apps_routes_exist_on_the_apps_origin_only(h: Harness) -> None:
    conv, url = view_url(h)
    # On the widget's origin, /apps/ is not found: neither the proxy nor a view.
    assert h.http.get("/apps/proxy", params={"host": WIDGET}).status_code == 404
    assert h.http.get(path_of(url)).status_code == 404
    assert h.http.get("/apps/proxy.js").status_code == 404
    # On the apps origin, the widget's pages and API are not found.
    for path in ("/widget/ops", "/embed.js", "/healthz", f"/api/conversations/{conv.id}"):
        r = h.http.get(f"{APPS}{path}", headers=conv.auth)
        assert r.status_code == 404, path
    r = h.http.post(f"{APPS}/api/conversations/{conv.id}/messages", json={"text": "tasks"},
                    headers=conv.auth)  # fmt: skip
    assert r.status_code == 404
    # Nothing was sent by the refused message.
    assert len(h.snapshot(conv)["calls"]) == 1
