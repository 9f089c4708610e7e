"""The trace of each way a run ends (finished, failed at its first model call, stopped by the
visitor, handed over to a person), as a collector receives it over OTLP/HTTP: the run's span is
the one root of its trace, every other span reaches it, it lasts as long as the run did, and a
model call is a CLIENT span with the GenAI conventions' attributes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from starlette.applications import Starlette
from starlette.routing import Route

from hostcall.qa.servers import serve_in_thread
from hostcall.tracing import run_ids
from tests.support.harness import Conv, Harness, allow_hosts, write_agent
from tests.support.otlp import Receiver, attributes
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    found = Receiver()
    app = Starlette(routes=[Route("/v1/traces", found.traces, methods=["POST"])])
    with serve_in_thread(app) as port:
        yield found, f"http://127.0.0.1:{port}"


def _talker(tmp_path: Path, provider: FakeProvider, endpoint: str) -> Harness:
    agents = tmp_path / "agents"
    write_agent(agents, {"id": "talker", "name": "Talker", "allowed_origins": ["http://testserver"],
                         "model": {"kind": "openai", "base_url": provider.base_url,
                                   "model": "gpt-4o-mini"}})  # fmt: skip
    allow_hosts(agents, provider.base_url)
    return Harness(tmp_path, agents, environ={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})


def _wait_for(h: Harness, conv: Conv, event: str) -> None:
    deadline = time.monotonic() + 10
    while not any(t == event for t, _ in h.events(conv)):
        assert time.monotonic() < deadline, f"no {event}"
        time.sleep(0.02)


def _trace(found: Receiver, run_id: str) -> tuple[Any, list[Any]]:
    """The run's span and all of its trace's spans, checked to form one tree rooted at it."""
    spans = [span for _, _, span in found.spans()]
    trace_id, span_id = run_ids(run_id)
    assert {s.trace_id for s in spans} == {trace_id.to_bytes(16, "big")}
    roots = [s for s in spans if not s.parent_span_id]
    assert [r.name for r in roots] == ["invoke_agent talker"], [(s.name, s.parent_span_id)
                                                                for s in spans]  # fmt: skip
    [root] = roots
    assert root.span_id == span_id.to_bytes(8, "big")
    by_id = {s.span_id: s for s in spans}
    for span in spans:  # each reaches the root, through spans the collector has: no cycle
        seen, at = set(), span
        while at.parent_span_id:
            assert at.span_id not in seen, f"a cycle through {at.name}"
            seen.add(at.span_id)
            at = by_id[at.parent_span_id]
        assert at is root
    children = [s for s in spans if s is not root]
    assert children, "the run's steps are in its trace"
    # The run lasted from its first step's start, not 0 ms at its end.
    assert root.start_time_unix_nano <= min(s.start_time_unix_nano for s in children)
    assert root.end_time_unix_nano > root.start_time_unix_nano
    return root, spans


def _model_calls(spans: list[Any], provider: FakeProvider) -> list[dict[str, Any]]:
    calls = [s for s in spans if s.name == "chat gpt-4o-mini"]
    assert calls, "the model call is traced"
    port = int(provider.base_url.split(":")[2].split("/")[0])
    for call in calls:
        assert call.kind == Span.SpanKind.SPAN_KIND_CLIENT
        found = attributes(call)
        assert found["gen_ai.agent.name"] == "Talker"
        assert (found["server.address"], found["server.port"]) == ("127.0.0.1", port)
        assert found["gen_ai.request.model"] == "gpt-4o-mini"
    return [attributes(c) for c in calls]


def test_a_finished_run_is_the_root_of_its_trace_and_names_the_reply(
    tmp_path: Path, provider: FakeProvider, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    provider.replies.append(Reply([text("Hi!"), chunk({}, "stop"), DONE]))
    h = _talker(tmp_path, provider, endpoint)
    try:
        conv = h.conversation("talker")
        run_id = h.say(conv, "hello")
        assert h.finish(conv)["run"]["status"] == "finished"
    finally:
        h.stop()  # the last batch is sent as the server stops
    root, spans = _trace(found, run_id)
    assert attributes(root)["hostcall.run.outcome"] == "finished"
    assert attributes(root)["gen_ai.agent.name"] == "Talker"
    assert root.status.code == Status.StatusCode.STATUS_CODE_UNSET
    [call] = _model_calls(spans, provider)
    # The fake provider's chunks name their model and reply.
    assert (call["gen_ai.response.model"], call["gen_ai.response.id"]) == ("fake", "chatcmpl-1")


def test_a_run_failing_at_its_first_model_call_is_still_the_root_of_its_trace(
    tmp_path: Path, provider: FakeProvider, receiver: tuple[Receiver, str]
) -> None:
    """It ends inside its step: its span once became that step's child, 0 ms long."""
    found, endpoint = receiver
    provider.replies.append(Reply([b'{"error": "overloaded"}'], status=503,
                                  media_type="application/json"))  # fmt: skip
    h = _talker(tmp_path, provider, endpoint)
    try:
        conv = h.conversation("talker")
        run_id = h.say(conv, "hello")
        assert h.finish(conv)["run"]["status"] == "failed"
    finally:
        h.stop()
    root, spans = _trace(found, run_id)
    assert attributes(root)["hostcall.run.outcome"] == "failed"
    assert root.status.code == Status.StatusCode.STATUS_CODE_ERROR
    [call] = _model_calls(spans, provider)
    assert call["error.type"] == "model_http_error"
    assert "gen_ai.response.id" not in call  # no reply, no reply's id


def test_a_stopped_run_is_the_root_of_its_trace_and_no_error(
    tmp_path: Path, provider: FakeProvider, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    provider.replies.append(Reply([text("Let me think"), text(" more"), chunk({}, "stop"), DONE],
                                  stall=3.0))  # fmt: skip
    h = _talker(tmp_path, provider, endpoint)
    try:
        conv = h.conversation("talker")
        run_id = h.say(conv, "plan my week")
        _wait_for(h, conv, "TEXT_MESSAGE_CONTENT")
        stopped = h.http.post(f"/api/conversations/{conv.id}/runs/{run_id}/stop",
                              headers=conv.auth)  # fmt: skip
        assert stopped.status_code == 200, stopped.text
        h.call(h.runtime.engine.drain)  # the cancelled step closes its spans
    finally:
        h.stop()
    root, spans = _trace(found, run_id)
    assert attributes(root)["hostcall.run.outcome"] == "stopped"
    # A Stop is not a failure, in the run's span nor in those of its step and model call.
    assert [s.name for s in spans if s.status.code == Status.StatusCode.STATUS_CODE_ERROR] == []
    [call] = _model_calls(spans, provider)
    assert "error.type" not in call


def test_a_run_handed_over_to_a_person_is_the_root_of_its_trace(
    tmp_path: Path, provider: FakeProvider, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    provider.replies.append(Reply([text("Let me think"), text(" more"), chunk({}, "stop"), DONE],
                                  stall=3.0))  # fmt: skip
    h = _talker(tmp_path, provider, endpoint)
    try:
        conv = h.conversation("talker")
        run_id = h.say(conv, "I want a person")
        _wait_for(h, conv, "TEXT_MESSAGE_CONTENT")
        olga = ConsoleClient(h.app, h.runtime, "olga", "operator")
        taken = olga.post(f"/console/api/conversations/{conv.id}/take-over", {})
        assert taken.status_code == 200, taken.text
        h.call(h.runtime.engine.drain)
        assert h.snapshot(conv)["run"]["error"]["code"] == "operator_cancelled"
    finally:
        h.stop()
    root, spans = _trace(found, run_id)
    assert attributes(root)["hostcall.run.outcome"] == "failed"
    assert attributes(root)["error.type"] == "operator_cancelled"
    _model_calls(spans, provider)
