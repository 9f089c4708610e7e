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
    {"match": "^context$", "reply": "page: {{ context | tojson }}"},
]


def build(
    tmp_path: Path, urls: tuple[str, str], *, apps: str | None = APPS, writes: bool = False
) -> Harness:
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
            {"kind": "mcp", "server": "board", "tools": "all",
             **({"apps": {"allow_writes": True}} if writes else {})},
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
    assert app["proxyUrl"] == f"{APPS}/apps/proxy/ops" and app["prefersBorder"] is True
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
    # Framed by the proxy (apps origin), in the widget, in a page allowed to embed it.
    assert "frame-src 'none'" in policy and policy.endswith(
        f"frame-ancestors {APPS} http://localhost:8001"
    )
    framed = h.http.get(url, params={"host": WIDGET}).headers["content-security-policy"]
    assert framed.endswith(f"frame-ancestors {APPS} {WIDGET} http://localhost:8001")
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
    assert policy.endswith(f"frame-ancestors {WIDGET}") and "script-src 'self';" in policy
    # An agent's proxy: the pages allowed to embed its widget are ancestors too.
    r = h.http.get(f"{APPS}/apps/proxy/ops", params={"host": WIDGET})
    policy = r.headers["content-security-policy"]
    assert policy.endswith(f"frame-ancestors {WIDGET} http://localhost:8001")
    assert h.http.get(f"{APPS}/apps/proxy/nobody", params={"host": WIDGET}).status_code == 404
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


# ---- app-only tools and the view's requests back --------------------------------------------


def bridge(h: Harness, conv: Conv, call_id: str, route: str, body: Any) -> Any:
    return h.http.post(f"/api/conversations/{conv.id}/calls/{call_id}/app/{route}",
                       json=body, headers=conv.auth)  # fmt: skip


def viewed(h: Harness) -> tuple[Conv, str]:
    conv, snap = ask(h, "tasks")
    return conv, str(snap["calls"][0]["toolCallId"])


def stored_calls(h: Harness, conv: Conv) -> list[Any]:
    return h.call(h.runtime.store.list_calls, conv.id)


def test_an_app_only_tool_is_never_offered_to_the_model(h: Harness) -> None:
    _conv, snap = ask(h, "details")
    (call,) = snap["calls"]
    assert call["state"] == "failed" and call["outcome"]["error"]["code"] == "unknown_tool"
    assert h.model_error(call)["code"] == "unknown_tool"
    assert "task_details" not in h.model_error(call)["message"].split("Tools:")[1]
    run = h.call(h.runtime.store.get_run, snap["run"]["runId"])
    assert run is not None and any(
        t.get("tool") == "task_details" and t["app_only"] for t in run.agent["tools"]
    )


def test_a_view_calls_a_read_of_its_own_server_through_the_ledger(h: Harness) -> None:
    conv, call_id = viewed(h)
    r = bridge(
        h, conv, call_id, "tools-call", {"name": "task_details", "arguments": {"task_id": "t9"}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["structuredContent"] == {"id": "t9", "title": "details of t9"}
    made = [c for c in stored_calls(h, conv) if c.extra.get("origin") == "app"]
    assert [(c.tool_name, c.state.value, c.extra["viewCall"]) for c in made] == [
        ("task_details", "answered", call_id)
    ]
    # The model was not told: no tool message, and the run stays as it ended.
    assert "details of t9" not in json.dumps(h.snapshot(conv)["messages"])
    assert h.snapshot(conv)["run"]["status"] == "finished"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("lookup", "app_tool_refused"),  # the crm server's: another server's tool
        ("no_such_tool", "app_tool_refused"),  # not a tool the server lists
        ("delete_task", "app_write_refused"),  # a write
    ],
)
def test_a_view_is_refused_other_tools(h: Harness, name: str, code: str) -> None:
    conv, call_id = viewed(h)
    before = stored_calls(h, conv)
    r = bridge(h, conv, call_id, "tools-call", {"name": name, "arguments": {"task_id": "t1"}})
    assert r.status_code == 403 and r.json()["error"]["code"] == code, r.text
    assert stored_calls(h, conv) == before  # nothing ran, nothing recorded


def test_a_view_call_with_bad_arguments_is_refused(h: Harness) -> None:
    conv, call_id = viewed(h)
    r = bridge(h, conv, call_id, "tools-call", {"name": "task_details", "arguments": {}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_input"
    r = bridge(h, conv, call_id, "tools-call", {"name": "task_details", "arguments": [1]})
    assert r.status_code == 400
    assert len(stored_calls(h, conv)) == 1


def test_a_view_speaks_only_for_its_own_conversation_and_call(h: Harness) -> None:
    conv, call_id = viewed(h)
    other, other_call = viewed(h)
    body = {"name": "task_details", "arguments": {"task_id": "t1"}}
    # Another conversation's call, with this conversation's session.
    r = bridge(h, conv, other_call, "tools-call", body)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_call"
    # This conversation's path with the other's session token.
    r = h.http.post(f"/api/conversations/{conv.id}/calls/{call_id}/app/tools-call",
                    json=body, headers=other.auth)  # fmt: skip
    assert r.status_code == 403
    # No session at all.
    r = h.http.post(f"/api/conversations/{conv.id}/calls/{call_id}/app/tools-call", json=body)
    assert r.status_code == 401
    assert len(stored_calls(h, conv)) == 1 and len(stored_calls(h, other)) == 1


def test_a_call_without_a_view_has_no_bridge(h: Harness) -> None:
    conv, snap = ask(h, "plain")  # its view failed to read
    call_id = snap["calls"][0]["toolCallId"]
    body = {"name": "task_details", "arguments": {"task_id": "t1"}}
    r = bridge(h, conv, call_id, "tools-call", body)
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_app"
    r = bridge(h, conv, call_id, "context", {"structuredContent": {"x": 1}})
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_app"


def test_a_views_context_reaches_the_models_next_turn(h: Harness) -> None:
    conv, call_id = viewed(h)
    value = {"content": [{"type": "text", "text": "selected t1"}],
             "structuredContent": {"selected": "t1"}}  # fmt: skip
    r = bridge(h, conv, call_id, "context", value)
    assert r.status_code == 200 and r.json() == {"key": "app:board"}
    stored = h.call(h.runtime.store.get_call_app, call_id)
    assert stored is not None and stored.context == value
    _, _snap = ask(h, "context", conv)
    assert '"app:board"' in h.assistant_texts(conv)[-1]
    assert "selected t1" in h.assistant_texts(conv)[-1]


def test_a_views_context_is_held_to_the_agents_caps(h: Harness) -> None:
    conv, call_id = viewed(h)
    r = bridge(h, conv, call_id, "context", {"structuredContent": {"x": "y" * 5000}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "page_context_refused"
    r = bridge(h, conv, call_id, "context", {"structuredContent": 2**60})
    assert r.status_code == 422
    r = bridge(h, conv, call_id, "context", {"content": "not a list"})
    assert r.status_code == 400
    stored = h.call(h.runtime.store.get_call_app, call_id)
    assert stored is not None and stored.context is None


def test_a_views_call_is_marked_in_the_snapshot_and_the_export_keeps_metadata_only(
    h: Harness,
) -> None:
    conv, call_id = viewed(h)
    r = bridge(
        h, conv, call_id, "tools-call", {"name": "task_details", "arguments": {"task_id": "t2"}}
    )
    assert r.status_code == 200
    bridge(h, conv, call_id, "context", {"structuredContent": {"selected": "t2"}})
    calls = h.snapshot(conv)["calls"]
    assert [(c.get("origin"), c.get("viewCall")) for c in calls] == [(None, None), ("app", call_id)]
    from hostcall.visitors.personal_data import export

    done = h.call(export, h.runtime.store, [conv.id], subject="test")
    (exported,) = done["conversations"]
    app = exported["calls"][0]["app"]
    assert app == {"server": "board", "resourceUri": "ui://board/tasks.html", "failed": None,
                   "context": {"structuredContent": {"selected": "t2"}}}  # fmt: skip
    assert VIEW_HTML not in json.dumps(exported)
    # Erased with its conversation.
    h.call(h.runtime.store.erase_conversation, conv.id)
    assert h.call(h.runtime.store.get_call_app, call_id) is None


def test_a_views_write_runs_only_once_the_visitor_confirms_it_where_the_file_allows(
    tmp_path: Path, urls: tuple[str, str]
) -> None:
    h = build(tmp_path, urls, writes=True)
    try:
        conv, call_id = viewed(h)
        body = {"name": "delete_task", "arguments": {"task_id": "t1"}}
        r = bridge(h, conv, call_id, "tools-call", body)
        assert r.status_code == 409 and r.json()["error"]["code"] == "approval_required"
        assert len(stored_calls(h, conv)) == 1  # nothing ran
        r = bridge(h, conv, call_id, "tools-call", {**body, "confirmed": "yes"})
        assert r.status_code == 400 and len(stored_calls(h, conv)) == 1
        r = bridge(h, conv, call_id, "tools-call", {**body, "confirmed": True})
        assert r.status_code == 200, r.text
        assert r.json()["content"][0]["text"] == "deleted t1"
        made = stored_calls(h, conv)[-1]
        assert made.tool_name == "delete_task" and made.state.value == "answered"
        assert made.extra["approval"] == {"reason": "app", "decision": "approved",
                                          "by": "visitor"}  # fmt: skip
        # Another server's tool stays refused, confirmed or not.
        r = bridge(h, conv, call_id, "tools-call", {"name": "lookup", "confirmed": True,
                                                     "arguments": {"name": "Ana"}})  # fmt: skip
        assert r.status_code == 403 and r.json()["error"]["code"] == "app_tool_refused"
    finally:
        h.stop()


def test_apps_setting_of_a_binding_is_checked(tmp_path: Path, urls: tuple[str, str]) -> None:
    from hostcall.blocks.mcp.binding import parse_binding

    raw = {"kind": "mcp", "server": "board", "tools": "all"}
    for bad in ({"allow_writes": "yes"}, {"allow": True}, []):
        binding, problems = parse_binding({**raw, "apps": bad}, "agent.json: tools[0]")
        assert binding is None and any("'apps' must be" in p for p in problems), problems
    binding, problems = parse_binding({**raw, "apps": {"allow_writes": True}}, "a: t")
    assert binding is not None and binding.app_writes and not problems
