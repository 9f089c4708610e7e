"""Traces of runs, steps, model calls and tool calls (hostcall/tracing.py): checked with the
SDK's in-memory exporter, and sent over OTLP/HTTP to a receiver on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from starlette.applications import Starlette
from starlette.routing import Route

from hostcall.qa.servers import serve_in_thread
from hostcall.settings import DEMO_AGENTS
from hostcall.tracing import CAPTURE_CONTENT, Tracing, run_ids
from tests.support.harness import Harness, allow_hosts, write_agent
from tests.support.otlp import Receiver
from tests.support.provider import DONE, FakeProvider, Reply, chunk, sse, text

QUESTION = "What should I work on next?"
BOARD = {"tasks": [{"id": "t1", "title": "Secret launch plan", "status": "todo",
                    "priority": 1}]}  # fmt: skip


def traced(tmp_path: Path, agents: Path = DEMO_AGENTS, **environ: str) -> tuple[Harness, Any]:
    exporter = InMemorySpanExporter()
    return Harness(tmp_path, agents, span_exporter=exporter, environ=environ), exporter


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def attribute_values(spans: tuple[ReadableSpan, ...]) -> str:
    return json.dumps([dict(s.attributes or {}) for s in spans], default=list)


def run_a_board_read(h: Harness) -> tuple[str, str]:
    conv = h.conversation()
    run_id = h.say(conv, QUESTION)
    call = h.open_call(conv, "dispatched")
    assert h.answer(call, BOARD).status_code == 200
    assert h.finish(conv)["run"]["status"] == "finished"
    return conv.id, run_id


def test_a_run_is_one_trace_of_its_steps_model_calls_and_tool_call(tmp_path: Path) -> None:
    h, exporter = traced(tmp_path)
    try:
        cid, run_id = run_a_board_read(h)
    finally:
        h.stop()
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    [run] = named["invoke_agent planner"]
    steps = named["hostcall.step"]
    chats = named["chat scripted"]
    [tool] = named["execute_tool read_board_tasks"]
    assert len(steps) == 2 and len(chats) == 2
    trace_id, span_id = run_ids(run_id)
    assert {s.context.trace_id for s in spans} == {trace_id}
    assert (run.context.span_id, run.parent) == (span_id, None)
    assert all(s.parent is not None and s.parent.span_id == span_id for s in [*steps, tool])
    step_ids = {s.context.span_id for s in steps}
    assert {c.parent.span_id for c in chats if c.parent} == step_ids
    assert all((s.attributes or {})["gen_ai.conversation.id"] == cid for s in spans)
    assert run.start_time is not None and run.end_time is not None
    assert run.start_time <= min(s.start_time or 0 for s in steps)
    run_attributes = dict(run.attributes or {})
    tokens = (run_attributes.pop("gen_ai.usage.input_tokens"),
              run_attributes.pop("gen_ai.usage.output_tokens"))  # fmt: skip
    assert run_attributes == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "planner",
        "gen_ai.agent.name": "Project planner",
        "gen_ai.conversation.id": cid, "hostcall.run.id": run_id,
        "hostcall.run.outcome": "finished", "hostcall.steps": 2,
    }  # fmt: skip
    # The run's tokens are its steps' (the model calls'), added up.
    assert tokens == tuple(
        sum(int((c.attributes or {})[f"gen_ai.usage.{k}_tokens"]) for c in chats)  # type: ignore[arg-type]
        for k in ("input", "output")
    )
    chat = dict(chats[0].attributes or {})
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "scripted"
    assert chat["hostcall.usage.source"] == "estimate"
    assert isinstance(chat["gen_ai.usage.input_tokens"], int)
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_board_tasks",
        "gen_ai.tool.call.id": tool.attributes["gen_ai.tool.call.id"],  # type: ignore[index]
        "gen_ai.tool.type": "function", "gen_ai.conversation.id": cid,
        "hostcall.tool_call.outcome": "answered", "hostcall.tool_call.answered_by": "form",
    }  # fmt: skip
    assert tool.status.status_code is StatusCode.UNSET
    # Nothing the visitor wrote or the page returned: the operator did not opt in.
    assert QUESTION not in attribute_values(spans)
    assert "Secret launch plan" not in attribute_values(spans)


def test_tool_arguments_and_results_are_traced_only_when_the_operator_opts_in(
    tmp_path: Path,
) -> None:
    h, exporter = traced(tmp_path, **{CAPTURE_CONTENT: "true"})
    try:
        run_a_board_read(h)
    finally:
        h.stop()
    [tool] = by_name(exporter.get_finished_spans())["execute_tool read_board_tasks"]
    attributes = dict(tool.attributes or {})
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"boardId": "main"}
    assert json.loads(str(attributes["gen_ai.tool.call.result"])) == BOARD


def talker(agents: Path, provider: FakeProvider) -> Path:
    write_agent(agents, {"id": "talker", "allowed_origins": ["http://testserver"],
                         "model": {"kind": "openai", "base_url": provider.base_url,
                                   "model": "gpt-4o-mini"}})  # fmt: skip
    allow_hosts(agents, provider.base_url)
    return agents


def test_a_model_call_carries_the_providers_tokens_and_finish_reason(
    tmp_path: Path, provider: FakeProvider
) -> None:
    usage = sse({"id": "x", "choices": [], "usage": {"prompt_tokens": 42,
                 "completion_tokens": 7, "total_tokens": 49}})  # fmt: skip
    provider.replies.append(Reply([text("Hi!"), chunk({}, "stop"), usage, DONE]))
    h, exporter = traced(tmp_path, talker(tmp_path / "agents", provider))
    try:
        conv = h.conversation("talker")
        h.say(conv, "hello")
        h.finish(conv)
    finally:
        h.stop()
    named = by_name(exporter.get_finished_spans())
    [chat] = named["chat gpt-4o-mini"]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.provider.name"] == "openai"
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)  # type: ignore[arg-type]
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"],
            attributes["hostcall.usage.source"]) == (42, 7, "provider")  # fmt: skip
    [run] = named["invoke_agent talker"]
    assert (run.attributes or {})["gen_ai.usage.input_tokens"] == 42


def test_a_failed_model_call_marks_its_span_and_the_runs_as_errors(
    tmp_path: Path, provider: FakeProvider
) -> None:
    provider.replies.append(Reply([b'{"error": "overloaded"}'], status=503,
                                  media_type="application/json"))  # fmt: skip
    h, exporter = traced(tmp_path, talker(tmp_path / "agents", provider))
    try:
        conv = h.conversation("talker")
        h.say(conv, "hello")
        assert h.finish(conv)["run"]["status"] == "failed"
    finally:
        h.stop()
    named = by_name(exporter.get_finished_spans())
    for span in (*named["chat gpt-4o-mini"], *named["invoke_agent talker"]):
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == "model_http_error"
    assert (named["invoke_agent talker"][0].attributes or {})["hostcall.run.outcome"] == "failed"


# ---- OTLP/HTTP to a receiver on loopback ------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    found = Receiver()
    app = Starlette(routes=[Route("/v1/traces", found.traces, methods=["POST"])])
    with serve_in_thread(app) as port:
        yield found, f"http://127.0.0.1:{port}"


def test_spans_are_exported_over_otlp_http_when_an_endpoint_is_set(
    tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    found, url = receiver
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SERVICE_NAME": "planner-site"}
    h = Harness(tmp_path, DEMO_AGENTS, environ=environ)
    try:
        assert h.runtime.tracing.on
        _, run_id = run_a_board_read(h)
    finally:
        h.stop()  # the last batch is sent as the server stops
    spans = found.spans()
    names = sorted(name for _, name, _ in spans)
    assert names == ["chat scripted", "chat scripted", "execute_tool read_board_tasks",
                     "hostcall.step", "hostcall.step", "invoke_agent planner"]  # fmt: skip
    assert {service for service, _, _ in spans} == {"planner-site"}
    trace_id, _ = run_ids(run_id)
    assert {span.trace_id for _, _, span in spans} == {trace_id.to_bytes(16, "big")}
    assert set(found.content_types) == {"application/x-protobuf"}


@pytest.mark.parametrize(
    "environ",
    [{}, {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "URL"}],
)
def test_without_an_endpoint_or_when_disabled_nothing_is_traced_or_sent(
    tmp_path: Path, receiver: tuple[Receiver, str], environ: dict[str, str]
) -> None:
    found, url = receiver
    environ = {k: v.replace("URL", url) for k, v in environ.items()}
    h = Harness(tmp_path, DEMO_AGENTS, environ=environ)
    try:
        assert not h.runtime.tracing.on
        run_a_board_read(h)
    finally:
        h.stop()
    assert found.requests == []
    off = Tracing.off()
    assert off.span("x", {}) is off.span("y", {})  # one shared empty context, nothing made


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:4318", "127.0.0.1:4318", "http://"])
def test_serve_refuses_an_otlp_endpoint_that_is_not_an_http_url(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from hostcall.cli import main

    assert main(["serve", "--otlp-endpoint", url]) == 2
    assert f"--otlp-endpoint must be an http(s) URL, not {url!r}" in capsys.readouterr().err


def test_a_run_the_operator_cancels_ends_its_trace_as_operator_cancelled(tmp_path: Path) -> None:
    from tests.unit.console_client import ConsoleClient

    h, exporter = traced(tmp_path)
    try:
        conv = h.conversation()
        run_id = h.say(conv, QUESTION)
        call = h.open_call(conv, "dispatched")
        operator = ConsoleClient(h.app, h.runtime, "olga", "operator")
        assert operator.post(f"/console/api/runs/{run_id}/cancel").status_code == 200
        assert h.finish(conv)["run"]["error"]["code"] == "operator_cancelled"
    finally:
        h.stop()
    named = by_name(exporter.get_finished_spans())
    [run] = named["invoke_agent planner"]
    assert run.status.status_code is StatusCode.ERROR
    assert (run.attributes or {})["error.type"] == "operator_cancelled"
    [tool] = named["execute_tool read_board_tasks"]
    attributes = dict(tool.attributes or {})
    assert attributes["gen_ai.tool.call.id"] == call["toolCallId"]
    # Cancelled with its run, not expired: the call fails (operator_cancelled).
    assert attributes["hostcall.tool_call.outcome"] == "failed"
    assert attributes["hostcall.tool_call.answered_by"] == "none"
