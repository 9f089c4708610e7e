"""Identity reaches tools, never from the model: a server-side tool's ``$user`` values come
from the verified identity the run acts for, a guardrail may test its claims, and nothing the
model writes supplies or changes them. ``/agui`` takes the same token as its bearer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcall.agui import thread_conversation_id
from hostcall.errors import AgentConfigError
from tests.support.harness import ORIGIN, Conv, Harness, write_agent
from tests.support.identity import SECRET, SECRET_ENV, hs_token
from tests.support.loopback import Live, live_server
from tests.unit.test_bad_input import assert_error

IDENTITY = {"issuer": "https://shop.example", "audience": "hostcall", "secret_env": SECRET_ENV}


@pytest.fixture(scope="module")
def target() -> Iterator[Live]:
    with live_server() as live:
        yield live


def whoami(target: Live) -> dict[str, Any]:
    return {
        "name": "whoami", "kind": "http", "description": "Reads the person's orders.",
        "effect": "read", "deadline_seconds": 2,
        "ai_params": [{"key": "what", "type": "string", "required": True}],
        "request": {
            "method": "GET",
            "url": f"{target.base}/echo/orders?customer={{{{ $user.sub }}}}"
            "&q={{ $fromAI.what }}",
            "headers": {"X-Plan": "{{ $user.claims.plan }}"},
        },
    }  # fmt: skip


GUARDED = {
    "name": "refund", "description": "Refunds an order.",
    "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}},
    "output_schema": {"type": "object"},
    "guardrails": [{"name": "pro only", "on": "input", "action": "block",
                    "when": {"path": "$user/claims/plan", "op": "not_equals", "value": "pro"}}],
}  # fmt: skip

RULES = [
    {"match": "orders (?P<what>.+)", "tool": "whoami", "arguments": {"what": "{{ what }}"},
     "reply": "got {{ result.body.path }}", "error_reply": "error {{ error.code }}"},
    # The model tries to name the person itself.
    {"match": "impersonate", "tool": "whoami",
     "arguments": {"what": "x", "$user.sub": "mallory"},
     "reply": "got {{ result.body.path }}", "error_reply": "error {{ error.code }}"},
    {"match": "refund (?P<order>.+)", "tool": "refund", "arguments": {"order": "{{ order }}"},
     "reply": "refunded", "error_reply": "error {{ error.code }}"},
]  # fmt: skip


def agent(target: Live, **extra: Any) -> dict[str, Any]:
    return {
        "id": "shop", "environment": "dev", "allowed_origins": ["http://localhost:8001"],
        "model": {"kind": "scripted", "rules": RULES},
        "tools": [whoami(target), GUARDED], "identity": IDENTITY,
    } | extra  # fmt: skip


@pytest.fixture
def h(tmp_path: Path, target: Live) -> Iterator[Harness]:
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {"dev": {"allowed_hosts": [target.host]}},
        "allowed_env": [SECRET_ENV],
    }, name="_platform.json")  # fmt: skip
    write_agent(directory, agent(target))
    harness = Harness(tmp_path, directory, environ={SECRET_ENV: SECRET})
    target.rec.clear()
    yield harness
    harness.stop()


def start(h: Harness, sub: str | None, **claims: Any) -> tuple[Conv, dict[str, str]]:
    who = {"Hostcall-Identity": hs_token(sub, **claims)} if sub else {}
    r = h.http.post("/api/agents/shop/conversations", json={}, headers=ORIGIN | who)
    assert r.status_code == 201, r.text
    body = r.json()
    return Conv(body["conversationId"], body["sessionToken"], body["streamToken"]), who


def ask(
    h: Harness, conv: Conv, who: dict[str, str], text: str, *, ends: bool = True
) -> dict[str, Any]:
    """The snapshot once the run has ended; ``ends=False``: once it waits (for a page).
    A run also waits while a server tool's request is out: only its end says the call
    settled."""
    r = h.http.post(
        f"/api/conversations/{conv.id}/messages", json={"text": text}, headers=conv.auth | who
    )
    assert r.status_code == 202, r.text
    return h.finish(conv) if ends else h.settle(conv)


def outcome(snap: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = snap["calls"][-1]["outcome"]
    return result


def test_a_server_tool_gets_the_person_from_the_verified_token(h: Harness, target: Live) -> None:
    conv, who = start(h, "ann", plan="pro")
    snap = ask(h, conv, who, "orders shoes")
    assert snap["calls"][-1]["state"] == "answered", snap["calls"][-1]
    seen = target.rec.last
    assert seen.query == "customer=ann&q=shoes"
    assert seen.headers["x-plan"] == "pro"
    run = h.call(h.runtime.store.latest_run, conv.id)
    assert run is not None and run.visitor is not None
    assert (run.visitor.sub, run.visitor.claims["plan"]) == ("ann", "pro")


def test_the_model_cannot_supply_the_person(h: Harness, target: Live) -> None:
    conv, who = start(h, "ann", plan="pro")
    snap = ask(h, conv, who, "impersonate")
    assert outcome(snap)["error"]["code"] == "invalid_arguments"
    assert target.rec.requests == []


def test_a_tool_that_acts_for_a_person_refuses_an_anonymous_run(h: Harness, target: Live) -> None:
    conv, who = start(h, None)
    snap = ask(h, conv, who, "orders shoes")
    assert outcome(snap)["error"]["code"] == "not_authorized"
    assert "signed-in person" in h.model_error(snap["calls"][-1])["message"]
    assert target.rec.requests == []  # refused before any connection


def test_a_missing_claim_refuses_the_call(h: Harness, target: Live) -> None:
    conv, who = start(h, "ann")  # no plan claim
    snap = ask(h, conv, who, "orders shoes")
    assert outcome(snap)["error"]["code"] == "not_authorized"
    assert "'plan'" in h.model_error(snap["calls"][-1])["message"]
    assert target.rec.requests == []


def test_a_guardrail_tests_the_person_s_claims(h: Harness) -> None:
    free, who = start(h, "ann", plan="free")
    snap = ask(h, free, who, "refund o-1")
    assert outcome(snap)["error"]["code"] == "blocked_by_guardrail"
    anonymous, nobody = start(h, None)
    snap = ask(h, anonymous, nobody, "refund o-1")
    assert outcome(snap)["error"]["code"] == "blocked_by_guardrail"
    pro, who = start(h, "bob", plan="pro")
    snap = ask(h, pro, who, "refund o-1", ends=False)
    assert snap["calls"][-1]["outcome"] is None  # on its way to the page, not blocked


def test_user_values_need_an_identity_block(tmp_path: Path, target: Live) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, {"environments": {"dev": {"allowed_hosts": [target.host]}}},
                name="_platform.json")  # fmt: skip
    data = agent(target)
    del data["identity"]
    write_agent(directory, data)
    with pytest.raises(AgentConfigError) as caught:
        Harness(tmp_path, directory)
    text = "\n".join(caught.value.problems)
    assert "tool 'whoami' uses $user" in text and "tool 'refund' uses $user" in text


def test_only_the_known_user_values_are_templates(tmp_path: Path, target: Live) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, {"environments": {"dev": {"allowed_hosts": [target.host]}},
                            "allowed_env": [SECRET_ENV]}, name="_platform.json")  # fmt: skip
    tool = whoami(target)
    tool["request"]["headers"] = {"X-Token": "{{ $user.token }}"}
    write_agent(directory, agent(target, tools=[tool]))
    with pytest.raises(AgentConfigError) as caught:
        Harness(tmp_path, directory, environ={SECRET_ENV: SECRET})
    assert "$user.token" in "\n".join(caught.value.problems)


# ---- /agui ---------------------------------------------------------------------------------


def agui(h: Harness, thread: str, token: str | None) -> Any:
    body = {"threadId": thread, "runId": "r1", "messages": [
        {"id": "m1", "role": "user", "content": "orders hats"}], "tools": []}  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with h.http.stream("POST", "/agui/shop", json=body, headers=headers) as r:
        r.read()
        return r


def test_agui_takes_the_identity_token_as_its_bearer(h: Harness, target: Live) -> None:
    r = agui(h, "thread-1", hs_token("ann", plan="pro"))
    assert r.status_code == 200
    cid = thread_conversation_id("shop", "thread-1", "ann")
    found = h.call(h.runtime.store.get_conversation, cid)
    assert found is not None and found.person == "ann"
    run = h.call(h.runtime.store.latest_run, cid)
    assert run is not None and run.visitor is not None and run.visitor.sub == "ann"
    # The same thread id from someone else is not Ann's conversation.
    assert thread_conversation_id("shop", "thread-1", "bob") != cid
    assert thread_conversation_id("shop", "thread-1") != cid


def test_agui_refuses_a_bad_identity_and_stores_nothing(h: Harness) -> None:
    for token in (hs_token("ann", aud="elsewhere"), "not-a-jwt"):
        r = h.http.post(
            "/agui/shop",
            json={
                "threadId": "t",
                "runId": "r",
                "messages": [{"id": "m1", "role": "user", "content": "hi"}],
            },
            headers={"Authorization": f"Bearer {token}"},
        )
        assert_error(r, 401, "bad_identity")
    for person in (None, "ann"):
        cid = thread_conversation_id("shop", "t", person)
        assert h.call(h.runtime.store.get_conversation, cid) is None


# The ``runs.identity`` column's text as every release so far has written it.
STORED_VISITOR = '{"sub":"ann","claims":{"sub":"ann","plan":"gold"}}'


def test_a_run_stored_with_the_old_visitor_json_resumes_with_the_same_user(
    tmp_path: Path, target: Live
) -> None:
    directory = tmp_path / "agents"
    write_agent(directory, {
        "environments": {"dev": {"allowed_hosts": [target.host]}},
        "allowed_env": [SECRET_ENV],
    }, name="_platform.json")  # fmt: skip
    write_agent(directory, agent(target, tools=[whoami(target) | {"approval": "always"}, GUARDED]))
    h = Harness(tmp_path, directory, environ={SECRET_ENV: SECRET})
    target.rec.clear()
    try:
        conv, who = start(h, "ann", plan="pro")
        r = h.http.post(
            f"/api/conversations/{conv.id}/messages",
            json={"text": "orders shoes"},
            headers=conv.auth | who,
        )
        assert r.status_code == 202, r.text
        call = h.open_call(conv, "awaiting_confirmation")
        run = h.call(h.runtime.store.latest_run, conv.id)
        assert run is not None

        # The waiting run's row as an earlier release stored it, with another claim, so
        # what the tool sends can only have come from that text.
        async def store_old_shape() -> None:
            h.runtime.store._db.execute(  # type: ignore[attr-defined]
                "UPDATE runs SET identity = ? WHERE id = ?", (STORED_VISITOR, run.id)
            )

        h.call(store_old_shape)
        h.restart()
        assert h.decide(call, "approve").status_code == 200
        snap = h.finish(conv)
        assert snap["calls"][-1]["state"] == "answered", snap["calls"][-1]
        seen = target.rec.last
        assert seen.query == "customer=ann&q=shoes"
        assert seen.headers["x-plan"] == "gold"
    finally:
        h.stop()
