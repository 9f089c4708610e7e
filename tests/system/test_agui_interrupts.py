"""AG-UI interrupts on ``POST /agui/{agentId}``: a call that waits for a person ends the run
with an interrupt, and the next run's ``resume`` answers it through the ledger.

The happy paths are driven by the official ``@ag-ui/client`` (node), which must print no
warning (it strips fields it does not know with one); the refusals by raw requests, each
checked for its ``RUN_ERROR`` code and for the call left as it was. Both stores.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostcall.agui import thread_conversation_id
from hostcall.settings import Settings
from hostcall.store import open_store
from hostcall.store.records import Call
from tests.agui import check_events, check_shapes, run_node
from tests.support.clock import Clock
from tests.support.databases import store_url
from tests.support.harness import BOARD, SECRET, write_agent
from tests.support.live import Live, live_server

OBJECT = {"type": "object"}
BOARD_SCHEMA = {
    "type": "object",
    "properties": {"tasks": {"type": "array"}},
    "required": ["tasks"],
}
CREATE = {
    "name": "create",
    "description": "Creates a task.",
    "input_schema": {"type": "object", "properties": {"title": {"type": "string"}},
                     "required": ["title"]},
    "output_schema": {"type": "object", "properties": {"id": {"type": "string"}},
                      "required": ["id"]},
    "approval": "always",
}  # fmt: skip
READ_BOARD = {
    "name": "read_board",
    "description": "Reads the page's task board.",
    "input_schema": OBJECT,
    "output_schema": BOARD_SCHEMA,
    "effect": "read",
}
RULE = {"reply": "result {{ result | tojson }}", "error_reply": "error {{ error.code }}"}
DESK = {
    "id": "desk",
    "model": {"kind": "scripted", "fallback": "nothing", "rules": [
        {"match": "next", "tool": "read_board", "arguments": {},
         "reply": "{{ result.tasks | length }} tasks", "error_reply": "error {{ error.code }}"},
        {"match": "two", "calls": [{"tool": "create", "arguments": {"title": "a"}},
                                   {"tool": "create", "arguments": {"title": "b"}}],
         "reply": "{{ results | map(attribute='id', default='-') | join(',') }}",
         "error_reply": "error {{ error.code }}"},
        {"match": "create (?P<t>.+)", "tool": "create", "arguments": {"title": "{{ t }}"},
         **RULE},
    ]},
    "tools": [CREATE, READ_BOARD],
}  # fmt: skip
DECLARED = [{"name": "create", "description": "", "parameters": OBJECT}]


@contextmanager
def served(tmp: Path, store: str, *, clock: Clock | None = None) -> Iterator[Live]:
    with store_url(store) as url:
        with serving(tmp, url, clock=clock) as live:
            yield live


@contextmanager
def serving(tmp: Path, url: str | None, *, clock: Clock | None = None) -> Iterator[Live]:
    agents = tmp / "agents"
    if not agents.exists():
        write_agent(agents, DESK)
    extra: dict[str, Any] = {} if url is None else {"database_url": url}
    settings = Settings(agents_dir=agents, db_path=tmp / "hostcall.db", secret_keys=SECRET,
                        sweep_seconds=0.05, environ={}, **extra)  # fmt: skip
    with live_server(settings, clock) as live:
        yield live


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def drive(live: Live, text: str, **plan: Any) -> dict[str, Any]:
    result: dict[str, Any] = run_node("http_agent.mjs", {
        "url": f"{live.url}/agui/desk", "threadId": plan.pop("thread", f"t-{uuid.uuid4()}"),
        "text": text, "tools": plan.pop("tools", []), "answers": plan.pop("answers", {}),
        **plan,
    })  # fmt: skip
    events = [(f"run {i}", e) for i, run in enumerate(result["runs"]) for e in run["events"]]
    assert check_events(events) == []
    assert result["warnings"] == [], result["warnings"]
    return result


def reply(result: dict[str, Any]) -> str:
    return str(result["messages"][-1]["content"])


def interrupts_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    last = run["events"][-1]
    assert last["type"] == "RUN_FINISHED", last
    assert last["outcome"]["type"] == "interrupt", last
    found: list[dict[str, Any]] = last["outcome"]["interrupts"]
    return found


def _calls_direct(live: Live, cid: str) -> list[Call]:
    """The thread's calls, read with a store of the test's own (the server's belongs to its
    event loop, in another thread)."""
    settings = live.app.state.hostcall.settings

    async def read() -> list[Call]:
        store = open_store(settings.database_url or settings.db_path, serving=False)
        try:
            return await store.list_calls(cid)
        finally:
            await store.close()

    return asyncio.run(read())


# ---- through the official client --------------------------------------------------------------


def test_an_approval_is_an_interrupt_and_its_resume_runs_the_call(
    tmp_path: Path, store: str
) -> None:
    with served(tmp_path, store) as live:
        result = drive(live, "create the notes", tools=DECLARED,
                       answers={"create": {"output": {"id": "t1"}}},
                       resumes=[{"reason": "tool_call", "status": "resolved",
                                 "payload": {"approved": True}, "echoToken": True}])  # fmt: skip
    first = result["runs"][0]
    [interrupt] = interrupts_of(first)
    assert interrupt["id"].startswith("approve:k_") and interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == interrupt["id"].split(":", 1)[1]
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert interrupt["responseSchema"]["properties"]["editedArgs"]["required"] == ["title"]
    assert interrupt["expiresAt"].endswith("Z")
    assert interrupt["metadata"]["hostcall"]["input"] == {"title": "the notes"}
    assert interrupt["metadata"]["hostcall"]["decisionToken"]
    assert reply(result) == 'result {"id": "t1"}'
    assert [r["error"] for r in result["runs"]] == [None, None, None]


def test_an_approval_with_edits_then_a_form_through_interrupts(tmp_path: Path, store: str) -> None:
    """No client runs ``create``: once approved with an edited input, a person answers it
    (the widget's form), an interrupt whose schema is the tool's output schema."""
    thread = f"t-{uuid.uuid4()}"
    with served(tmp_path, store) as live:
        result = drive(live, "create the notes", thread=thread, resumes=[
            {"reason": "tool_call", "status": "resolved",
             "payload": {"approved": True, "editedArgs": {"title": "Edited"}}},
            {"reason": "input_required", "status": "resolved", "payload": {"id": "t2"}},
        ])  # fmt: skip
        [stored] = _calls_direct(live, thread_conversation_id("desk", thread))
    approval, form = (interrupts_of(r)[0] for r in result["runs"][:2])
    assert approval["reason"] == "tool_call" and form["reason"] == "input_required"
    assert form["toolCallId"] == approval["toolCallId"]
    assert form["responseSchema"] == CREATE["output_schema"]
    assert form["metadata"]["hostcall"]["input"] == {"title": "Edited"}
    assert reply(result) == 'result {"id": "t2"}'
    assert stored.state.value == "answered" and stored.input == {"title": "Edited"}
    assert stored.extra["approval"]["edited"] is True


def test_a_form_for_a_client_tool_no_client_runs(tmp_path: Path, store: str) -> None:
    with served(tmp_path, store) as live:
        result = drive(live, "what next?", resumes=[
            {"reason": "input_required", "status": "resolved", "payload": BOARD}])  # fmt: skip
    [form] = interrupts_of(result["runs"][0])
    assert form["id"].startswith("answer:") and form["responseSchema"] == BOARD_SCHEMA
    assert reply(result) == "3 tasks"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"status": "resolved", "payload": {"approved": False, "reason": "not now"}},
         "error approval_rejected"),
        ({"status": "cancelled"}, "error approval_rejected"),
    ],
)  # fmt: skip
def test_a_rejection_or_a_cancel_is_a_tool_result_the_model_reads(
    tmp_path: Path, store: str, answer: dict[str, Any], said: str
) -> None:
    thread = f"t-{uuid.uuid4()}"
    with served(tmp_path, store) as live:
        result = drive(live, "create the notes", thread=thread, tools=DECLARED,
                       resumes=[{"reason": "tool_call", **answer}])  # fmt: skip
        [stored] = _calls_direct(live, thread_conversation_id("desk", thread))
    assert reply(result) == said
    assert stored.state.value == "rejected"
    results = [e for e in result["runs"][1]["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [json.loads(e["content"])["error"]["code"] for e in results] == ["approval_rejected"]
    assert results[0]["metadata"]["hostcall"]["state"] == "rejected"


def test_a_resume_after_a_server_restart(tmp_path: Path, store: str) -> None:
    """The interrupt is the call, not a process's memory: a new server answers it."""
    thread = f"t-{uuid.uuid4()}"
    resumes = [{"reason": "tool_call", "status": "resolved", "payload": {"approved": True}}]
    with store_url(store) as url:
        with serving(tmp_path, url) as live:
            before = drive(live, "create the notes", thread=thread, tools=DECLARED,
                           stopAtInterrupt=True)  # fmt: skip
        [pending] = before["state"]["pendingInterrupts"]
        with serving(tmp_path, url) as live:
            after = drive(live, "", thread=thread, tools=DECLARED, state=before["state"],
                          firstRun=2, resumes=resumes,
                          answers={"create": {"output": {"id": "t3"}}})  # fmt: skip
            [stored] = _calls_direct(live, thread_conversation_id("desk", thread))
    assert after["runs"][0]["resume"][0]["interruptId"] == pending["id"]
    assert reply(after) == 'result {"id": "t3"}'
    assert stored.state.value == "answered"


# ---- refusals, by raw requests ----------------------------------------------------------------


def post(live: Live, body: dict[str, Any]) -> list[dict[str, Any]]:
    r = httpx.post(f"{live.url}/agui/desk", json=body, timeout=30)
    assert r.status_code == 200, r.text
    events = []
    for block in r.text.split("\n\n"):
        data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("".join(data)))
    assert check_events([("raw", e) for e in events]) == []
    return events


def start(live: Live, text: str, thread: str, tools: list[Any] | None = None) -> list[Any]:
    events = post(live, {"threadId": thread, "runId": "r1", "tools": tools or [],
                         "messages": [{"id": "u1", "role": "user", "content": text}]})  # fmt: skip
    interrupts: list[Any] = events[-1]["outcome"]["interrupts"]
    return interrupts


def resume(live: Live, thread: str, *entries: dict[str, Any], tools: Any = ()) -> list[Any]:
    body = {"threadId": thread, "runId": f"r-{uuid.uuid4()}", "tools": list(tools),
            "messages": [{"id": "u1", "role": "user", "content": "x"}], "resume": list(entries),
            "state": {}, "context": [], "forwardedProps": {}}  # fmt: skip
    assert check_shapes([("resume", "RunAgentInputSchema", body)]) == []
    return post(live, body)


def refused(events: list[dict[str, Any]], code: str) -> dict[str, Any]:
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"], events
    error = events[-1]
    assert error["code"] == code, error
    return error


def one_call(live: Live, thread: str) -> Call:
    [call] = _calls_direct(live, thread_conversation_id("desk", thread))
    return call


@pytest.fixture
def live(tmp_path: Path, store: str) -> Iterator[Live]:
    with served(tmp_path, store) as live:
        yield live


def test_an_unknown_interrupt_is_refused_and_the_call_still_waits(live: Live) -> None:
    thread = f"t-{uuid.uuid4()}"
    [interrupt] = start(live, "create x", thread)
    for bad in ("approve:k_nothing", "k_nothing", f"answer:{interrupt['toolCallId']}x"):
        events = resume(live, thread, {"interruptId": bad, "status": "resolved",
                                       "payload": {"approved": True}})  # fmt: skip
        assert bad in refused(events, "unknown_interrupt")["message"]
    # Another thread's interrupt is unknown here.
    other = f"t-{uuid.uuid4()}"
    events = resume(live, other, {"interruptId": interrupt["id"], "status": "cancelled"})
    refused(events, "unknown_interrupt")
    assert one_call(live, thread).state.value == "awaiting_confirmation"


def test_a_payload_that_breaks_the_response_schema_is_refused_and_nothing_moves(
    live: Live,
) -> None:
    thread = f"t-{uuid.uuid4()}"
    [approval] = start(live, "create x", thread)
    bad = {"interruptId": approval["id"], "status": "resolved"}
    refused(resume(live, thread, {**bad, "payload": {"approved": "yes"}}), "bad_request")
    refused(resume(live, thread, {**bad, "payload": {"approved": True, "editedArgs": {}}}),
            "invalid_input")  # fmt: skip
    assert one_call(live, thread).state.value == "awaiting_confirmation"
    # Approved as proposed, no client runs it: now a form, and a wrong output is refused.
    events = resume(live, thread, {**bad, "payload": {"approved": True}})
    [form] = events[-1]["outcome"]["interrupts"]
    wrong = {"interruptId": form["id"], "status": "resolved", "payload": {"rows": []}}
    error = refused(resume(live, thread, wrong), "invalid_result")
    assert error["metadata"]["hostcall"]["details"]["errors"]
    assert one_call(live, thread).state.value == "dispatched"
    events = resume(live, thread, {**wrong, "payload": {"id": "t9"}})
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    assert one_call(live, thread).outcome == {"output": {"id": "t9"}}


def test_a_second_resume_of_one_interrupt_is_refused(live: Live) -> None:
    thread = f"t-{uuid.uuid4()}"
    [approval] = start(live, "create x", thread, DECLARED)
    no = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": False}}
    first = resume(live, thread, no, tools=DECLARED)
    assert first[-1]["outcome"] == {"type": "success"}
    again = resume(live, thread, {**no, "payload": {"approved": True}}, tools=DECLARED)
    error = refused(again, "call_not_awaiting_decision")
    assert error["metadata"]["hostcall"]["details"]["state"] == "rejected"
    assert one_call(live, thread).state.value == "rejected"


def test_a_token_of_another_call_is_refused(live: Live) -> None:
    one, two = f"t-{uuid.uuid4()}", f"t-{uuid.uuid4()}"
    [first] = start(live, "create x", one)
    [second] = start(live, "create y", two)
    token = second["metadata"]["hostcall"]["decisionToken"]
    entry = {"interruptId": first["id"], "status": "resolved", "payload": {"approved": True},
             "metadata": {"hostcall": {"decisionToken": token}}}  # fmt: skip
    refused(resume(live, one, entry), "wrong_token")
    entry["metadata"] = {"hostcall": {"decisionToken": 7}}
    refused(resume(live, one, entry), "bad_request")
    entry["metadata"] = {"hostcall": {"decisionToken": token[:-3] + "abc"}}
    refused(resume(live, one, entry), "bad_token")
    assert one_call(live, one).state.value == "awaiting_confirmation"


def test_a_new_message_while_interrupts_wait_is_refused_and_a_reload_gets_them_again(
    live: Live,
) -> None:
    thread = f"t-{uuid.uuid4()}"
    [approval] = start(live, "create x", thread)
    error = refused(resume(live, thread), "interrupts_pending")
    assert error["metadata"]["hostcall"]["details"]["interrupts"] == [approval["id"]]
    history = [{"id": "u1", "role": "user", "content": "create x"},
               {"id": "a1", "role": "assistant", "content": ""}]  # fmt: skip
    again = post(live, {"threadId": thread, "runId": "r9", "messages": history})
    assert [e["type"] for e in again] == ["RUN_STARTED", "RUN_FINISHED"]
    [offered] = again[-1]["outcome"]["interrupts"]
    del offered["metadata"]["hostcall"]["decisionToken"]  # signed anew, at another time
    del approval["metadata"]["hostcall"]["decisionToken"]
    assert offered == approval


def test_several_interrupts_resolve_together(live: Live) -> None:
    thread = f"t-{uuid.uuid4()}"
    a, b = start(live, "two", thread)
    events = resume(live, thread,
                    {"interruptId": a["id"], "status": "resolved", "payload": {"approved": True}},
                    {"interruptId": b["id"], "status": "cancelled"})  # fmt: skip
    [form] = events[-1]["outcome"]["interrupts"]
    assert form["toolCallId"] == a["toolCallId"] and form["reason"] == "input_required"
    events = resume(live, thread, {"interruptId": form["id"], "status": "resolved",
                                   "payload": {"id": "A"}})  # fmt: skip
    assert events[-1]["outcome"] == {"type": "success"}
    texts = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert sorted(texts.split(",")) == ["-", "A"]  # the model read both, in settling order


def test_a_resume_after_expires_at_is_refused_and_the_model_reads_the_expiry(
    tmp_path: Path, store: str
) -> None:
    clock = Clock()
    thread = f"t-{uuid.uuid4()}"
    with served(tmp_path, store, clock=clock) as live:
        [approval] = start(live, "create x", thread)
        clock.advance(24 * 3600)
        events = resume(live, thread, {"interruptId": approval["id"], "status": "resolved",
                                       "payload": {"approved": True}})  # fmt: skip
        refused(events, "call_expired")
        call = one_call(live, thread)
    assert call.state.value == "expired"
    assert call.outcome is not None and call.outcome["error"]["code"] == "approval_expired"


def test_the_agent_advertises_interrupts_with_edits_and_client_tools(live: Live) -> None:
    r = httpx.get(f"{live.url}/agui/desk/capabilities")
    assert r.status_code == 200, r.text
    capabilities = r.json()
    assert check_shapes([("capabilities", "AgentCapabilitiesSchema", capabilities)]) == []
    loop = capabilities["humanInTheLoop"]
    assert loop["interrupts"] is loop["approveWithEdits"] is loop["approvals"] is True
    assert capabilities["tools"]["clientProvided"] is True
    assert [t["name"] for t in capabilities["tools"]["items"]] == ["create", "read_board"]
    assert httpx.get(f"{live.url}/agui/nobody/capabilities").json()["error"]["code"] == (
        "unknown_agent"
    )
