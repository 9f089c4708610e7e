"""The OpenAPI description (/openapi.json): it covers every API route; the real app's real
responses validate against the schemas it derives from the response types (and a body
missing a field does not); and schemathesis, signed in, finds no server error and no response
outside it, against the real app under uvicorn."""

from __future__ import annotations

import copy
import dataclasses
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from starlette.routing import Route

from hostcall.openapi import ENUMS, document
from hostcall.protocol.console import ConsoleBody
from hostcall.protocol.responses import ResponseBody
from tests.support.harness import BOARD, ORIGIN, Conv, Harness, planner_definition, write_agent
from tests.support.live import Live, live_server, settings_for
from tests.unit.console_client import ConsoleClient, fast_passwords

API_PREFIXES = ("/api/", "/agui/", "/healthz", "/embed/check", "/console/api/")
NEW_TASK = {"id": "t9", "title": "Write the notes", "status": "todo"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(settings_for(tmp_path_factory.mktemp("openapi"))) as server:
        yield server


def _spec_path(route_path: str) -> str:
    names = {"agent_id": "agentId", "conversation_id": "conversationId", "call_id": "callId",
             "surface_id": "surfaceId", "run_id": "runId", "other_id": "otherId",
             "message_id": "messageId", "attachment_id": "attachmentId"}  # fmt: skip
    for snake, camel in names.items():
        route_path = route_path.replace("{" + snake + "}", "{" + camel + "}")
    return route_path


def test_every_api_route_and_method_is_described(live: Live) -> None:
    described = document()["paths"]
    routes = [r for r in live.app.routes if isinstance(r, Route)]
    api = [r for r in routes if r.path.startswith(API_PREFIXES)]
    assert api
    for route in api:
        path = _spec_path(route.path)
        assert path in described, path
        methods = (route.methods or set()) - {"HEAD"}
        assert {m.lower() for m in methods} <= set(described[path]), (path, methods)
    assert live.client.get("/openapi.json").json() == document()


# ---- real responses, held to their schemas ---------------------------------------------------


class Described:
    """/openapi.json as the app serves it, and the check every real response goes through."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def validator(self, path: str, method: str, status: int) -> jsonschema.Draft202012Validator:
        responses = self.spec["paths"][path][method]["responses"]
        assert str(status) in responses, f"{method.upper()} {path} does not describe {status}"
        schema = responses[str(status)]["content"]["application/json"]["schema"]
        # The response's schema at the root of a document that holds the components, so
        # its "#/components/schemas/..." references resolve.
        root = {"allOf": [schema], "components": self.spec["components"]}
        return jsonschema.Draft202012Validator(root)

    def check(self, body: Any, path: str, method: str, status: int) -> None:
        """Raises ``jsonschema.ValidationError`` when ``body`` is not as described."""
        self.validator(path, method, status).validate(body)

    def held(self, r: Any, path: str, method: str = "post", status: int | None = None) -> Any:
        """The body of the real response ``r``, after checking it is as described."""
        if status is not None:
            assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/json"), r.headers
        body = r.json()
        self.check(body, path, method, r.status_code)
        return body


@pytest.fixture
def described(harness: Harness) -> Described:
    return Described(harness.http.get("/openapi.json").json())


def _session_cookie(r: Any) -> str:
    return str(r.headers["set-cookie"].split(";")[0])


def test_the_visitor_api_answers_as_described(harness: Harness, described: Described) -> None:
    http, d = harness.http, described
    create = "/api/agents/{agentId}/conversations"
    key = "k" * 43  # the page's resume key: the cookie is set bound to it
    r = http.post(
        "/api/agents/planner/conversations", json={"locale": "fr", "resumeKey": key}, headers=ORIGIN
    )
    opened = d.held(r, create, status=201)
    conv = Conv(opened["conversationId"], opened["sessionToken"], opened["streamToken"])
    resume = "/api/agents/{agentId}/session"
    r = http.post("/api/agents/planner/session", json={"parentOrigin": "", "resumeKey": key},
                  headers={**ORIGIN, "Cookie": _session_cookie(r)})  # fmt: skip
    d.held(r, resume, status=200)
    conv = Conv(conv.id, r.json()["sessionToken"], conv.stream)
    # A first visit, nothing to resume: described, and no error.
    nothing = http.post("/api/agents/planner/session", json={}, headers=ORIGIN)
    assert nothing.status_code == 204 and nothing.content == b"", nothing.text
    assert "204" in d.spec["paths"][resume]["post"]["responses"]
    caps = {"surfaceId": "surface-one", "tools": ["read_board_tasks", "create_task"]}
    r = http.post(f"/api/conversations/{conv.id}/capabilities", json=caps, headers=conv.auth)
    d.held(r, "/api/conversations/{conversationId}/capabilities", status=200)
    r = http.post(f"/api/conversations/{conv.id}/stream-token", headers=conv.auth)
    d.held(r, "/api/conversations/{conversationId}/stream-token", status=200)

    messages = "/api/conversations/{conversationId}/messages"
    text = {"text": "What should I work on next?"}
    d.held(http.post(f"/api/conversations/{conv.id}/messages", json=text, headers=conv.auth),
           messages, status=202)  # fmt: skip
    call = harness.open_call(conv)
    snapshot = "/api/conversations/{conversationId}"
    d.held(http.get(f"/api/conversations/{conv.id}", headers=conv.auth), snapshot, "get", 200)
    d.held(http.post(f"/api/conversations/{conv.id}/messages", json=text, headers=conv.auth),
           messages, status=409)  # fmt: skip
    delivered = f"/api/calls/{call['toolCallId']}/delivered"
    d.held(http.post(delivered, json={"token": call["resultToken"]}),
           "/api/calls/{callId}/delivered", status=200)  # fmt: skip
    result = "/api/calls/{callId}/result"
    d.held(harness.answer(call, {"tasks": "not a list"}), result, status=422)
    d.held(harness.answer(call, BOARD), result, status=200)
    d.held(harness.answer(call, BOARD), result, status=409)
    harness.finish(conv)

    harness.say(conv, "Add a task to write the notes")
    call = harness.open_call(conv, "awaiting_confirmation")
    decision = "/api/calls/{callId}/decision"
    d.held(harness.decide(call, "approve", surfaceId="surface-one"), decision, status=200)
    d.held(harness.decide(call, "reject"), decision, status=409)
    call = harness.open_call(conv)
    d.held(harness.answer(call, NEW_TASK), result, status=200)
    harness.settle(conv)
    d.held(http.get(f"/api/conversations/{conv.id}", headers=conv.auth), snapshot, "get", 200)

    # Stop, then Retry over the stopped run; a second Stop, a Retry with nothing to retry.
    retry, stop = (
        "/api/conversations/{conversationId}/retry",
        ("/api/conversations/{conversationId}/runs/{runId}/stop"),
    )
    run_id = harness.say(conv, "What should I work on next?")
    harness.open_call(conv)
    stopping = f"/api/conversations/{conv.id}/runs/{run_id}/stop"
    d.held(http.post(stopping, headers=conv.auth), stop, status=200)
    d.held(http.post(stopping, headers=conv.auth), stop, status=409)
    again = http.post(f"/api/conversations/{conv.id}/retry", json={}, headers=conv.auth)
    d.held(again, retry, status=202)
    harness.finish(conv)
    d.held(http.post(f"/api/conversations/{conv.id}/retry", headers=conv.auth), retry,
           status=409)  # fmt: skip

    # Errors: each in the one shape, under a status the operation describes.
    d.held(http.get(f"/api/conversations/{conv.id}"), snapshot, "get", 401)
    other = harness.conversation()
    d.held(http.get(f"/api/conversations/{conv.id}", headers=other.auth), snapshot, "get", 403)
    r = http.post(f"/api/conversations/{conv.id}/messages", content=b'{"text": ',
                  headers={**conv.auth, "Content-Type": "application/json"})  # fmt: skip
    d.held(r, messages, status=400)
    d.held(http.post("/api/agents/nobody/conversations", headers=ORIGIN), create, status=404)
    d.held(http.post("/api/calls/k_nothing/result", json={"token": "x", "output": {}}), result,
           status=401)  # fmt: skip

    d.held(http.get("/healthz"), "/healthz", "get", 200)
    d.held(http.get("/embed/check?agent=planner&origin=http://testserver"), "/embed/check",
           "get", 200)  # fmt: skip
    d.held(http.get("/embed/check?agent=nobody"), "/embed/check", "get", 200)


def test_a_rate_limited_request_answers_as_described(tmp_path: Path) -> None:
    directory = tmp_path / "limited"
    data = planner_definition()
    data["limits"] = {"conversations_per_minute_per_client": 1}
    write_agent(directory, data, name="planner.json")
    h = Harness(tmp_path, directory)
    try:
        d = Described(h.http.get("/openapi.json").json())
        create = "/api/agents/{agentId}/conversations"
        d.held(h.http.post("/api/agents/planner/conversations", headers=ORIGIN), create,
               status=201)  # fmt: skip
        r = h.http.post("/api/agents/planner/conversations", headers=ORIGIN)
        assert d.held(r, create, status=429)["error"]["details"]["retryAfter"] >= 1
        described = d.spec["paths"][create]["post"]["responses"]["429"]["headers"]
        assert int(r.headers["retry-after"]) >= described["Retry-After"]["schema"]["minimum"]
    finally:
        h.stop()


@pytest.mark.usefixtures(fast_passwords.__name__)
def test_the_console_s_json_answers_as_described(harness: Harness, described: Described) -> None:
    d = described
    admin = ConsoleClient(harness.app, harness.runtime, "ada", "admin")
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    call = harness.open_call(conv)
    listing = "/console/api/conversations"
    d.held(admin.http.get(listing), listing, "get", 200)
    d.held(admin.http.get(f"{listing}?status=bogus"), listing, "get", 400)
    detail = "/console/api/conversations/{conversationId}"
    d.held(admin.http.get(f"{listing}/{conv.id}"), detail, "get", 200)
    d.held(admin.http.get(f"{listing}/c_nothing"), detail, "get", 404)
    answer = "/console/api/calls/{callId}/answer"
    d.held(admin.post(f"/console/api/calls/{call['toolCallId']}/answer", {"output": {"x": 1}}),
           answer, status=422)  # fmt: skip
    d.held(admin.post(f"/console/api/calls/{call['toolCallId']}/answer", {"output": BOARD}),
           answer, status=200)  # fmt: skip
    harness.finish(conv)

    harness.say(conv, "Add a task to write the notes")
    call = harness.open_call(conv, "awaiting_confirmation")
    decision = "/console/api/calls/{callId}/decision"
    d.held(admin.post(f"/console/api/calls/{call['toolCallId']}/decision",
                      {"decision": "approve"}), decision, status=200)  # fmt: skip
    call = harness.open_call(conv)
    expire = "/console/api/calls/{callId}/expire"
    d.held(admin.post(f"/console/api/calls/{call['toolCallId']}/expire"), expire, status=200)
    d.held(admin.post(f"/console/api/calls/{call['toolCallId']}/expire"), expire, status=409)
    harness.finish(conv)

    harness.say(conv, "What should I work on next?")
    run = harness.settle(conv)["run"]["runId"]
    cancel = "/console/api/runs/{runId}/cancel"
    d.held(admin.post(f"/console/api/runs/{run}/cancel"), cancel, status=200)
    d.held(admin.post(f"/console/api/runs/{run}/cancel"), cancel, status=409)
    failed = harness.http.get(f"/api/conversations/{conv.id}", headers=conv.auth)
    assert d.held(failed, "/api/conversations/{conversationId}", "get", 200)["run"]["error"]
    d.held(admin.http.get(f"{listing}/{conv.id}"), detail, "get", 200)

    agent = planner_definition()
    check = "/console/api/agents/{agentId}/check"
    d.held(admin.post("/console/api/agents/planner/check", {"agent": agent}), check, status=200)
    save = "/console/api/agents/{agentId}"
    d.held(admin.post("/console/api/agents/planner", {"agent": agent}), save, status=200)
    d.held(admin.post("/console/api/agents/planner", {"agent": {"id": "other"}}), save,
           status=422)  # fmt: skip
    mcp = "/console/api/mcp/{server}/tools"
    refused = d.held(admin.http.get("/console/api/mcp/crm/tools"), mcp, "get", 200)
    assert refused["tools"] == [] and "not allowed" in refused["problem"]
    stranger = harness.http.get(listing)  # no console session
    d.held(stranger, listing, "get", 401)


def test_a_body_missing_a_required_field_or_with_an_unknown_one_is_refused(
    harness: Harness, described: Described
) -> None:
    """The check the tests above rely on can fail: the same code refuses bodies that drift."""
    conv = harness.conversation()
    harness.say(conv, "What should I work on next?")
    harness.open_call(conv)
    snap = harness.snapshot(conv)
    path = "/api/conversations/{conversationId}"
    described.check(snap, path, "get", 200)

    def refused(change: Any) -> None:
        body = copy.deepcopy(snap)
        change(body)
        with pytest.raises(jsonschema.ValidationError):
            described.check(body, path, "get", 200)

    refused(lambda b: b.pop("lastEventId"))
    refused(lambda b: b["calls"][0].pop("state"))
    refused(lambda b: b["run"].pop("error"))
    refused(lambda b: b.update(handledTools=["read_board_tasks"]))
    refused(lambda b: b["calls"][0].update(state="settled"))
    refused(lambda b: b["messages"][0].update(runId=None))
    error = harness.http.get(f"/api/conversations/{conv.id}").json()
    described.check(error, path, "get", 401)
    del error["error"]["details"]
    with pytest.raises(jsonschema.ValidationError):
        described.check(error, path, "get", 401)


def test_every_response_type_is_a_described_valid_schema() -> None:
    components = document()["components"]["schemas"]
    for body in (*typing.get_args(ResponseBody), *typing.get_args(ConsoleBody)):
        assert body.__name__ in components, body
    for schema in components.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    for cls, name in ENUMS:
        assert name in {f.name for f in dataclasses.fields(cls)}, (cls, name)


# ---- schemathesis, signed in -----------------------------------------------------------------

# What schemathesis may not exercise: the AG-UI endpoint streams a whole run for a valid input
# (one waiting for a person's approval keeps its stream open; test_agui_endpoint.py drives
# it), and the console's routes need a signed-in operator and a CSRF token
# (test_the_console_s_json_answers_as_described holds them to the description).
# Logout ends the session every other case is signed in with (tests/unit/test_known_visitors.py
# sends it).
NOT_FUZZED = ("/agui/", "/console/", "/api/conversations/{conversationId}/logout")
BUDGET_SECONDS = 240
# Left out: "schema-valid data is accepted". What is valid depends on more than a schema says:
# a parentOrigin must be one of the agent's allowed origins, capabilities must name the
# agent's tools, a scope one the call offers, an output fit the tool's output schema, and a
# signed-in case meets the conversation's state (a run in progress, a settled call).
EXCLUDED = [schemathesis.checks.positive_data_acceptance]


class _Credentials:
    """A real conversation and a real open call on the live server: schemathesis' cases get
    its session token, its conversation id and the call's id and result token, so they reach
    the handlers behind the 401 and the 403."""

    def __init__(self, live: Live) -> None:
        self.conv = live.conversation()
        live.say(self.conv, "What should I work on next?")
        call = live.settle(self.conv)["calls"][-1]
        self.call_id = call["toolCallId"]
        self.result_token = call["resultToken"]

    def apply(self, case: schemathesis.Case) -> None:
        params = case.path_parameters if case.path_parameters is not None else {}
        if "conversationId" in params:
            params["conversationId"] = self.conv.id
        if "callId" in params:
            params["callId"] = self.call_id
            if isinstance(case.body, dict) and "token" in case.body:
                case.body["token"] = self.result_token
        if "agentId" in params:
            params["agentId"] = "planner"


def _exercise(operation: Any, credentials: _Credentials, headers: dict[str, str]) -> set[int]:
    """Run a bounded number of generated cases of one operation; the statuses they got."""
    seen: set[int] = set()

    @given(case=operation.as_strategy())
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck),
              database=None, phases=[Phase.explicit, Phase.generate])  # fmt: skip
    def exercise(case: schemathesis.Case) -> None:
        credentials.apply(case)
        response = case.call_and_validate(headers=headers, excluded_checks=EXCLUDED, timeout=10)
        seen.add(response.status_code)

    exercise()
    return seen


def test_the_api_answers_as_described_and_never_with_a_server_error(live: Live) -> None:
    """schemathesis' checks (no 5xx, status codes, content types and bodies as described) on
    cases it generates for each operation, a bounded number each, with a real session."""
    api = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    credentials = _Credentials(live)
    headers = {"Authorization": f"Bearer {credentials.conv.session}", "Origin": live.url}
    statuses: dict[str, set[int]] = {}
    started = time.monotonic()
    for result in api.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith(NOT_FUZZED):
            key = f"{operation.method.upper()} {operation.path}"
            statuses[key] = _exercise(operation, credentials, headers)
    assert time.monotonic() - started < BUDGET_SECONDS
    fuzzed = [p for p in document()["paths"] if not p.startswith(NOT_FUZZED)]
    assert len({key.split(" ", 1)[1] for key in statuses}) == len(fuzzed)
    # Signed in, the cases get past the token checks. Only the stream stays behind its
    # ticket: a ticket opens one stream, and a stream it opens never ends by itself.
    # (A case the text guard refuses, 400, never reaches the token check either.)
    stopped = [key for key, codes in statuses.items() if 401 in codes and codes <= {400, 401}]
    assert stopped == ["GET /api/conversations/{conversationId}/events"], statuses
