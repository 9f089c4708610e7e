"""``/metrics``: who may read it, and what the server counts (hostcall/metrics.py).

The metrics are the process's, shared by every app a test builds: each test reads what
changed across what it did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hostcall import metrics
from hostcall.settings import DEMO_AGENTS
from tests.support.harness import ORIGIN, Harness

TOKEN = "scrape-me-0123456789"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls)


def scrape_from(h: Harness, host: str, **headers: str) -> httpx.Response:
    """A request to /metrics from the peer address ``host`` (a TestClient's is not an IP)."""

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=h.app, client=(host, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://hostcall") as c:
            return await c.get("/metrics", headers=headers)

    return h.call(get)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, DEMO_AGENTS, environ={"HOSTCALL_METRICS_TOKEN": TOKEN})
    yield h
    h.stop()


def test_with_a_token_only_its_bearer_may_scrape(guarded: Harness) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                    {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
        refused = scrape_from(guarded, "127.0.0.1", **headers)
        assert refused.status_code == 401, headers
        assert refused.json()["error"]["code"] == "bad_token"
        assert "HOSTCALL_METRICS_TOKEN" in refused.json()["error"]["message"]
        assert TOKEN not in refused.text
    ok = scrape_from(guarded, "203.0.113.9", Authorization=f"Bearer {TOKEN}")
    assert ok.status_code == 200
    assert ok.headers["content-type"].startswith("text/plain; version=")
    assert ("hostcall_open_streams", frozenset()) in parse(ok.text)


@pytest.mark.parametrize(
    ("host", "headers"),
    [
        ("203.0.113.9", {}),
        ("10.0.0.2", {}),
        ("testclient", {}),
        ("127.0.0.1", {"X-Forwarded-For": "203.0.113.9"}),
        ("::1", {"Forwarded": "for=203.0.113.9"}),
    ],
)
def test_without_a_token_only_this_machine_may_scrape(
    harness: Harness, host: str, headers: dict[str, str]
) -> None:
    refused = scrape_from(harness, host, **headers)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "wrong_token"
    assert scrape_from(harness, "127.0.0.1").status_code == 200
    assert scrape_from(harness, "::1").status_code == 200


def test_runs_calls_tokens_requests_and_refusals_are_counted(harness: Harness) -> None:
    h = harness
    before = parse(scrape_from(h, "127.0.0.1").text)
    conv = h.conversation()
    h.say(conv, "hello")
    h.finish(conv)
    h.say(conv, "What should I work on next?")  # the planner asks the page for its tasks
    call = h.open_call(conv, "dispatched")
    assert h.answer(call, {"tasks": []}).status_code == 200
    h.finish(conv)
    refused = h.http.post(f"/api/conversations/{conv.id}/messages", json={"text": "x" * 10**6},
                          headers=conv.auth)  # fmt: skip
    assert refused.status_code == 413
    after = parse(scrape_from(h, "127.0.0.1").text)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("hostcall_runs_total", agent="planner", outcome="started") == 2
    assert grew("hostcall_runs_total", agent="planner", outcome="finished") == 2
    assert grew("hostcall_tool_calls_total", outcome="answered", route="form") == 1
    assert grew("hostcall_tool_call_seconds_count", route="form") == 1
    assert grew("hostcall_model_step_seconds_count", model="scripted", outcome="ok") == 3
    assert grew("hostcall_model_tokens_total", model="scripted", source="estimate") > 0
    assert grew("hostcall_model_tokens_total", source="provider") == 0
    assert (
        grew(
            "hostcall_http_request_seconds_count",
            method="POST",
            route="/api/conversations/{conversation_id}/messages",
            status="2xx",
        )
        == 2
    )
    assert (
        grew(
            "hostcall_http_request_seconds_count",
            method="POST",
            route="/api/conversations/{conversation_id}/messages",
            status="4xx",
        )
        == 1
    )
    # Labels name routes, never a conversation.
    assert not any(conv.id in dict(labels).get("route", "") for _, labels in after)


def test_a_rate_limit_refusal_is_counted_by_its_code(tmp_path: Path) -> None:
    from tests.support.harness import planner_definition, write_agent

    agents = tmp_path / "agents"
    write_agent(agents, {**planner_definition(),
                         "limits": {"conversations_per_minute_per_client": 1}})  # fmt: skip
    h = Harness(tmp_path, agents)
    try:
        before = parse(scrape_from(h, "127.0.0.1").text)
        h.conversation()
        r = h.http.post("/api/agents/planner/conversations", headers=ORIGIN)
        assert r.status_code == 429
        after = parse(scrape_from(h, "127.0.0.1").text)
        name, code = "hostcall_rate_limit_refusals_total", "rate_limited"
        assert value(after, name, code=code) - value(before, name, code=code) == 1
    finally:
        h.stop()


def test_who_answered_a_call_is_its_route_operator_and_block_included(
    harness: Harness, tmp_path: Path
) -> None:
    from tests.support.loopback import live_server
    from tests.unit.console_client import ConsoleClient
    from tests.unit.test_server_tools import build, fetch_tool, finished

    before = parse(scrape_from(harness, "127.0.0.1").text)
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    call = harness.open_call(conv, "dispatched")
    operator = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    answered = operator.post(f"/console/api/calls/{call['toolCallId']}/answer",
                             {"output": {"tasks": []}})  # fmt: skip
    assert answered.status_code == 200, answered.text
    harness.finish(conv)
    after = parse(scrape_from(harness, "127.0.0.1").text)
    name = "hostcall_tool_calls_total"
    assert value(after, name, route="operator") - value(before, name, route="operator") == 1
    assert value(after, name, route="form") == value(before, name, route="form")

    with live_server() as target:
        h = build(tmp_path / "blocks", target,
                  fetch_tool(f"{target.base}/echo/{{{{ $fromAI.what }}}}"))  # fmt: skip
        try:
            before = parse(scrape_from(h, "127.0.0.1").text)
            conv = h.conversation("ops")
            h.say(conv, "fetch x")
            assert finished(h, conv)["calls"][0]["state"] == "answered"
            after = parse(scrape_from(h, "127.0.0.1").text)
        finally:
            h.stop()
    grew = value(after, name, outcome="answered", route="block") - value(
        before, name, outcome="answered", route="block"
    )
    assert grew == 1


def test_requests_the_database_fails_are_counted_as_store_errors(tmp_path: Path) -> None:
    from tests.support.databases import fresh_schema
    from tests.support.live import live_server, settings_for
    from tests.support.proxy import proxied

    with fresh_schema() as url, proxied(url) as (proxy, through):
        with live_server(settings_for(tmp_path, database_url=through)) as server:
            conv = server.conversation()
            before = parse(server.client.get("/metrics").text)
            proxy.cut()
            for _ in range(2):
                sent = server.client.post(f"/api/conversations/{conv.id}/messages",
                                          json={"text": "hello"}, headers=conv.auth)  # fmt: skip
                assert sent.status_code == 503
            after = parse(server.client.get("/metrics").text)
            proxy.restore()
    grown = {
        dict(labels)["error"]: v - before.get((name, labels), 0.0)
        for (name, labels), v in after.items()
        if name == "hostcall_store_errors_total"
    }
    assert sum(grown.values()) == 2, grown
    assert all(error[0].isupper() and " " not in error for error in grown)  # a type's name


def _series(found: Samples, name: str) -> set[frozenset[tuple[str, str]]]:
    """The label sets of one metric's series (a histogram's buckets are one series)."""
    return {
        frozenset((k, v) for k, v in labels if k != "le")
        for (sample, labels), _ in found.items()
        if sample.startswith(name)
    }


def test_what_a_request_makes_up_never_becomes_a_label(harness: Harness) -> None:
    h = harness
    conv = h.conversation()
    h.say(conv, "hello")
    reply = next(m for m in h.settle(conv)["messages"] if m["role"] == "assistant")
    before = parse(scrape_from(h, "127.0.0.1").text)
    for i in range(60):
        # A made-up method on a real route and off every route, random paths, unknown
        # agents, conversations and messages: each answered, none a series of its own.
        assert h.http.request(f"MADEUP{i}", f"/api/conversations/{conv.id}").status_code == 405
        assert h.http.request(f"X{i}", f"/no/such/{i}/path").status_code == 404
        assert h.http.post(f"/api/agents/ghost-{i}/conversations", json={}).status_code == 404
        assert h.http.get(f"/random-{i}").status_code == 404
        rated = h.http.post(f"/api/conversations/{conv.id}/messages/m-{i}/feedback",
                            json={"rating": f"meh-{i}"}, headers=conv.auth)  # fmt: skip
        assert rated.status_code == 400
    rated = h.http.post(f"/api/conversations/{conv.id}/messages/{reply['id']}/feedback",
                        json={"rating": "up"}, headers=conv.auth)  # fmt: skip
    assert rated.status_code == 200
    after = parse(scrape_from(h, "127.0.0.1").text)

    name = "hostcall_http_request_seconds"
    new = _series(after, name) - _series(before, name)
    # At most one new series for each (closed) method, route and status class touched.
    assert len(new) <= 8, sorted(map(sorted, new))
    labels = [dict(ls) for ls in _series(after, name)]
    assert {ls["method"] for ls in labels} <= {*metrics.HTTP_METHODS, "other"}
    assert {"method": "other", "route": "unmatched", "status": "4xx"} in labels
    assert {"method": "other", "route": "/api/conversations/{conversation_id}",
            "status": "4xx"} in labels  # fmt: skip
    assert not any("ghost" in v or "random" in v or "such" in v
                   for ls in labels for v in ls.values())  # fmt: skip
    assert {dict(ls)["rating"] for ls in _series(after, "hostcall_feedback")} <= {"up", "down"}


def test_an_agent_or_model_no_longer_loaded_is_counted_as_other(
    tmp_path: Path, agents_dir: Path
) -> None:
    from tests.support.harness import planner_definition, write_agent

    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation()
        h.say(conv, "hello")
        reply = next(m for m in h.settle(conv)["messages"] if m["role"] == "assistant")
        assert (metrics.agent_label("planner"), metrics.model_label("scripted")) == (
            "planner",
            "scripted",
        )
        # The designer replaces the agent with another: its conversations' label leaves.
        write_agent(agents_dir, {**planner_definition(), "id": "helper"})
        (agents_dir / "planner.json").unlink()
        h.runtime.reload_agents()
        before = parse(scrape_from(h, "127.0.0.1").text)
        rated = h.http.post(f"/api/conversations/{conv.id}/messages/{reply['id']}/feedback",
                            json={"rating": "down"}, headers=conv.auth)  # fmt: skip
        assert rated.status_code == 200, rated.text
        after = parse(scrape_from(h, "127.0.0.1").text)
        name = "hostcall_feedback_total"
        assert (
            value(after, name, agent="other", rating="down")
            - value(before, name, agent="other", rating="down")
            == 1
        )
        assert metrics.agent_label("planner") == metrics.agent_label("ghost") == "other"
        assert metrics.agent_label("helper") == "helper"
        assert metrics.model_label("gpt-made-up") == "other"
    finally:
        h.stop()


def test_a_store_error_is_labelled_by_the_driver_s_own_types_only() -> None:
    import sqlite3

    import psycopg

    class Surprise(sqlite3.OperationalError):
        """A subclass nobody named: counted as the driver's type it is."""

    assert metrics.store_error_label(sqlite3.OperationalError("x")) == "OperationalError"
    assert metrics.store_error_label(Surprise("x")) == "OperationalError"
    assert metrics.store_error_label(psycopg.errors.AdminShutdown()) == "AdminShutdown"
    assert metrics.store_error_label(RuntimeError("x")) == "other"
    assert metrics.status_label(200) == "2xx" and metrics.status_label(999) == "other"


def test_an_answer_whose_unit_rolls_back_is_not_counted(harness: Harness) -> None:
    """A settled call is counted once its unit has committed: an answer whose write fails
    (a trigger stands in for a full disk at its event's INSERT, after the call's row was
    settled in the same unit) changed nothing, and the count says so; the page's retry
    settles it and is counted once."""
    h = harness
    conv = h.conversation()
    h.say(conv, "What should I work on next?")
    call = h.open_call(conv, "dispatched")
    db = h.runtime.store._db  # the server's own connection
    db.execute(
        "CREATE TEMP TRIGGER full_disk BEFORE INSERT ON events "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    before = parse(scrape_from(h, "127.0.0.1").text)
    try:
        failed = h.answer(call, {"tasks": []})
    finally:
        db.execute("DROP TRIGGER full_disk")
    assert failed.status_code == 503, failed.text
    middle = parse(scrape_from(h, "127.0.0.1").text)
    assert value(middle, "hostcall_tool_calls_total", outcome="answered") == value(
        before, "hostcall_tool_calls_total", outcome="answered"
    )
    assert h.answer(call, {"tasks": []}).status_code == 200
    after = parse(scrape_from(h, "127.0.0.1").text)
    grew = value(after, "hostcall_tool_calls_total", outcome="answered") - value(
        before, "hostcall_tool_calls_total", outcome="answered"
    )
    assert grew == 1
