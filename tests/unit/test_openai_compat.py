"""OpenAICompatModel against a fake provider on loopback that speaks the real wire format."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from hostcall.errors import AgentConfigError
from hostcall.models.base import (
    Message,
    ModelError,
    ModelEvent,
    StepEnd,
    TextDelta,
    ToolCallRequest,
    ToolDescriptor,
)
from hostcall.models.names import ToolNameMap
from hostcall.models.openai_compat import OpenAICompatModel
from tests.support.harness import Harness, allow_hosts, write_agent
from tests.support.loopback import Trap

# ---------------------------------------------------------------------------------------------
# The fake provider


@dataclass
class Reply:
    """What the fake provider sends back: raw body pieces, each written separately."""

    pieces: list[bytes] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    media_type: str = "text/event-stream"


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]
    query: dict[str, str] = field(default_factory=dict)


class FakeProvider:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        self.replies.clear()
        self.received.clear()

    async def chat_completions(self, request: Request) -> Response:
        received = Received(dict(request.headers), await request.json(), dict(request.query_params))
        self.received.append(received)
        reply = self.replies.pop(0)
        if reply.delay:
            await asyncio.sleep(reply.delay)

        async def body() -> AsyncIterator[bytes]:
            for piece in reply.pieces:
                yield piece
                await asyncio.sleep(0.001)  # separate writes, so the client reads piece by piece

        return StreamingResponse(body(), status_code=reply.status, media_type=reply.media_type)


def sse(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
    )


def text(content: str) -> bytes:
    return chunk({"content": content})


def call_part(
    index: int, *, call_id: str | None = None, name: str | None = None, arguments: str = ""
) -> bytes:
    part: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        part["id"] = call_id
        part["type"] = "function"
    if name is not None:
        part["function"]["name"] = name
    return chunk({"tool_calls": [part]})


DONE = b"data: [DONE]\n\n"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    app = Starlette(routes=[Route("/v1/chat/completions", fake.chat_completions, methods=["POST"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    fake.port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):
        if uv.started:
            break
        threading.Event().wait(0.01)
    assert uv.started, "fake provider did not start"
    yield fake
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def provider(server: FakeProvider) -> FakeProvider:
    server.reset()
    return server


def make_model(provider: FakeProvider, **options: Any) -> OpenAICompatModel:
    return OpenAICompatModel(base_url=provider.base_url, model="fake-model", **options)


async def collect(
    model: OpenAICompatModel,
    messages: list[Message] | None = None,
    tools: list[ToolDescriptor] | None = None,
    *,
    instructions: str = "",
) -> list[ModelEvent]:
    """What the step streamed: its text and tool calls (its ``StepEnd`` left out)."""
    events = await collect_all(model, messages, tools, instructions=instructions)
    assert isinstance(events[-1], StepEnd), "a step ends with its StepEnd, once"
    assert not any(isinstance(e, StepEnd) for e in events[:-1])
    return events[:-1]


async def collect_all(
    model: OpenAICompatModel,
    messages: list[Message] | None = None,
    tools: list[ToolDescriptor] | None = None,
    *,
    instructions: str = "",
) -> list[ModelEvent]:
    messages = messages if messages is not None else [Message(role="user", text="hi")]
    stream = model.stream(messages, tools or [], instructions=instructions)
    return [event async for event in stream]


CREATE_TASK = ToolDescriptor(
    name="create_task",
    description="Create a task",
    input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
)

# ---------------------------------------------------------------------------------------------
# Streaming replies


async def test_text_streamed_in_many_deltas_arrives_in_order(provider: FakeProvider) -> None:
    words = ["Hel", "lo", ", ", "wor", "ld", "!"]
    provider.replies.append(
        Reply([chunk({"role": "assistant", "content": ""})] + [text(w) for w in words] + [DONE])
    )
    events = await collect(make_model(provider))
    assert events == [TextDelta(w) for w in words]


async def test_arguments_split_across_chunks_are_joined(provider: FakeProvider) -> None:
    pieces = ['{"ti', 'tle"', ': "Bu', "y milk", '"}']
    provider.replies.append(
        Reply(
            [call_part(0, call_id="call_abc", name="create_task")]
            + [call_part(0, arguments=p) for p in pieces]
            + [chunk({}, finish_reason="tool_calls"), DONE]
        )
    )
    events = await collect(make_model(provider), tools=[CREATE_TASK])
    assert events == [ToolCallRequest("call_abc", "create_task", '{"title": "Buy milk"}')]


async def test_two_tool_calls_interleaved_by_index_come_back_in_index_order(
    provider: FakeProvider,
) -> None:
    other = ToolDescriptor(name="get_weather", description="Weather", input_schema={})
    provider.replies.append(
        Reply(
            [
                call_part(1, call_id="call_2", name="get_weather", arguments='{"ci'),
                call_part(0, call_id="call_1", name="create_task"),
                call_part(1, arguments='ty": "Paris"}'),
                call_part(0, arguments='{"title": '),
                call_part(0, arguments='"Pack"}'),
                chunk({}, finish_reason="tool_calls"),
                DONE,
            ]
        )
    )
    events = await collect(make_model(provider), tools=[CREATE_TASK, other])
    assert events == [
        ToolCallRequest("call_1", "create_task", '{"title": "Pack"}'),
        ToolCallRequest("call_2", "get_weather", '{"city": "Paris"}'),
    ]


async def test_text_comes_first_and_tool_calls_close_the_step(provider: FakeProvider) -> None:
    provider.replies.append(
        Reply(
            [
                text("Let me "),
                call_part(0, call_id="c1", name="create_task", arguments="{}"),
                text("do that."),
                DONE,
            ]
        )
    )
    events = await collect(make_model(provider), tools=[CREATE_TASK])
    assert events == [
        TextDelta("Let me "),
        TextDelta("do that."),
        ToolCallRequest("c1", "create_task", "{}"),
    ]


async def test_non_ascii_tool_name_is_sent_safe_and_mapped_back(provider: FakeProvider) -> None:
    tools = [
        ToolDescriptor(name="créer tâche", description="Créer", input_schema={}),
        ToolDescriptor(name="タスク作成", description="作成", input_schema={}),
    ]
    names = ToolNameMap(tool.name for tool in tools)
    provider.replies.append(
        Reply(
            [
                call_part(0, call_id="c1", name=names.to_provider("créer tâche"), arguments="{}"),
                call_part(1, call_id="c2", name=names.to_provider("タスク作成"), arguments="{}"),
                DONE,
            ]
        )
    )
    events = await collect(make_model(provider), tools=tools)
    sent = [tool["function"]["name"] for tool in provider.received[0].body["tools"]]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in sent)
    assert sent == [names.to_provider("créer tâche"), names.to_provider("タスク作成")]
    assert events == [
        ToolCallRequest("c1", "créer tâche", "{}"),
        ToolCallRequest("c2", "タスク作成", "{}"),
    ]


async def test_function_name_outside_the_map_is_passed_through(provider: FakeProvider) -> None:
    provider.replies.append(
        Reply([call_part(0, call_id="c1", name="delete_everything", arguments="{}"), DONE])
    )
    events = await collect(make_model(provider), tools=[CREATE_TASK])
    assert events == [ToolCallRequest("c1", "delete_everything", "{}")]


async def test_missing_call_id_is_generated_per_call(provider: FakeProvider) -> None:
    provider.replies.append(
        Reply(
            [
                call_part(0, name="create_task", arguments="{}"),
                call_part(1, name="create_task", arguments="{}"),
                DONE,
            ]
        )
    )
    events = await collect(make_model(provider), tools=[CREATE_TASK])
    ids = [event.call_id for event in events if isinstance(event, ToolCallRequest)]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert ids[0].startswith("call_0_") and ids[1].startswith("call_1_")


async def test_keepalives_empty_choices_and_finish_reason_are_ignored(
    provider: FakeProvider,
) -> None:
    usage_only = sse({"id": "x", "choices": [], "usage": {"total_tokens": 3}})
    provider.replies.append(
        Reply(
            [
                b": ping\n\n",
                chunk({"role": "assistant"}),
                text("ok"),
                b": ping\n\n",
                chunk({}, finish_reason="stop"),
                usage_only,
                DONE,
            ]
        )
    )
    assert await collect(make_model(provider)) == [TextDelta("ok")]


async def test_data_line_split_across_network_writes_is_reassembled(
    provider: FakeProvider,
) -> None:
    whole = text("split") + text(" line")
    provider.replies.append(Reply([whole[:9], whole[9:30], whole[30:], DONE[:4], DONE[4:]]))
    assert await collect(make_model(provider)) == [TextDelta("split"), TextDelta(" line")]


async def test_stream_ending_with_a_finish_reason_but_no_done_marker_closes_the_step(
    provider: FakeProvider,
) -> None:
    provider.replies.append(
        Reply([
            text("bye"), call_part(0, call_id="c", name="create_task"),
            chunk({}, finish_reason="tool_calls"),
        ])
    )  # fmt: skip
    events = await collect(make_model(provider), tools=[CREATE_TASK])
    assert events == [TextDelta("bye"), ToolCallRequest("c", "create_task", "")]


async def test_stream_ending_with_neither_done_nor_finish_reason_is_truncated(
    provider: FakeProvider,
) -> None:
    """Such a reply once was stored as a complete answer."""
    provider.replies.append(Reply([text("Here is the pl"), call_part(0, call_id="c", name="x")]))
    with pytest.raises(ModelError) as caught:
        await collect(make_model(provider), tools=[CREATE_TASK])
    assert caught.value.code == "model_bad_reply"
    assert "truncated" in caught.value.message


async def test_fragments_without_index_are_grouped_by_id(provider: FakeProvider) -> None:
    def part(call_id: str | None, name: str | None, arguments: str) -> bytes:
        function = {"arguments": arguments} | ({"name": name} if name else {})
        return chunk(
            {"tool_calls": [{"function": function} | ({"id": call_id} if call_id else {})]}
        )

    provider.replies.append(
        Reply(
            [
                part("a", "create_task", '{"title":'),
                part(None, None, ' "x"}'),
                part("b", "create_task", "{}"),
                DONE,
            ]
        )
    )
    events = await collect(make_model(provider), tools=[CREATE_TASK])
    assert events == [
        ToolCallRequest("a", "create_task", '{"title": "x"}'),
        ToolCallRequest("b", "create_task", "{}"),
    ]


# ---------------------------------------------------------------------------------------------
# The request


async def test_request_carries_model_stream_instructions_and_tools(provider: FakeProvider) -> None:
    provider.replies.append(Reply([text("ok"), DONE]))
    no_schema = ToolDescriptor(name="ping", description="Ping", input_schema={})
    await collect(make_model(provider), tools=[CREATE_TASK, no_schema], instructions="Be brief.")
    body = provider.received[0].body
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert "temperature" not in body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "create_task",
                "description": "Create a task",
                "parameters": CREATE_TASK.input_schema,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "ping",
                "description": "Ping",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


async def test_no_tools_and_no_instructions_send_neither(provider: FakeProvider) -> None:
    provider.replies.append(Reply([text("ok"), DONE]))
    await collect(make_model(provider, temperature=0.2))
    body = provider.received[0].body
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.2


async def test_history_with_tool_calls_and_results_is_sent_in_chat_format(
    provider: FakeProvider,
) -> None:
    tool = ToolDescriptor(name="créer tâche", description="Créer", input_schema={})
    safe = ToolNameMap(["créer tâche"]).to_provider("créer tâche")
    history = [
        Message(role="user", text="add milk"),
        Message(
            role="assistant",
            text="Adding it.",
            tool_calls=(ToolCallRequest("call_1", "créer tâche", '{"title": "milk"}'),),
        ),
        Message(role="tool", text='{"id": 7}', tool_call_id="call_1", tool_name="créer tâche"),
        Message(role="assistant", tool_calls=(ToolCallRequest("call_2", "créer tâche", "{}"),)),
        Message(role="tool", text='{"id": 8}', tool_call_id="call_2", tool_name="créer tâche"),
        Message(role="assistant", text="Done."),
        Message(role="user", text="thanks"),
    ]
    provider.replies.append(Reply([text("ok"), DONE]))
    await collect(make_model(provider), history, [tool], instructions="sys")
    assert provider.received[0].body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "add milk"},
        {
            "role": "assistant",
            "content": "Adding it.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": safe, "arguments": '{"title": "milk"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"id": 7}'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": safe, "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": '{"id": 8}'},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "thanks"},
    ]


async def test_authorization_header_is_sent_only_with_a_key(provider: FakeProvider) -> None:
    provider.replies.extend([Reply([text("a"), DONE]), Reply([text("b"), DONE])])
    await collect(make_model(provider, api_key="sk-test-123"))
    await collect(make_model(provider))
    with_key, without_key = provider.received
    assert with_key.headers["authorization"] == "Bearer sk-test-123"
    assert "authorization" not in without_key.headers


# ---------------------------------------------------------------------------------------------
# Errors


async def test_http_500_raises_model_error_with_status_and_body(provider: FakeProvider) -> None:
    provider.replies.append(
        Reply(
            [b'{"error": {"message": "model overloaded"}}'],
            status=500,
            media_type="application/json",
        )
    )
    with pytest.raises(ModelError) as caught:
        await collect(make_model(provider))
    assert caught.value.code == "model_http_error"
    assert "500" in caught.value.message
    assert "model overloaded" in caught.value.message
    assert provider.base_url in caught.value.message


async def test_http_error_message_never_contains_the_api_key(provider: FakeProvider) -> None:
    body = b'{"error": {"message": "Incorrect API key provided: sk-secret-999"}}'
    provider.replies.append(Reply([body], status=401, media_type="application/json"))
    with pytest.raises(ModelError) as caught:
        await collect(make_model(provider, api_key="sk-secret-999"))
    assert "401" in str(caught.value)
    assert "sk-secret-999" not in str(caught.value)


async def test_connection_refused_raises_model_error_naming_base_url() -> None:
    # A bound socket that never listens refuses connections, and holding it keeps the port
    # from being reused by anything else while the test runs.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        model = OpenAICompatModel(base_url=base_url, model="m", api_key="sk-secret-1")
        with pytest.raises(ModelError) as caught:
            await collect(model)
    assert caught.value.code == "model_unreachable"
    assert base_url in caught.value.message
    assert "sk-secret-1" not in caught.value.message


async def test_silent_provider_raises_model_timeout(provider: FakeProvider) -> None:
    provider.replies.append(Reply([text("late"), DONE], delay=0.5))
    with pytest.raises(ModelError) as caught:
        await collect(make_model(provider, timeout=0.1))
    assert caught.value.code == "model_timeout"
    assert provider.base_url in caught.value.message


async def test_malformed_data_line_raises_model_error(provider: FakeProvider) -> None:
    provider.replies.append(Reply([text("ok"), b"data: {not json\n\n", DONE]))
    with pytest.raises(ModelError) as caught:
        await collect(make_model(provider))
    assert caught.value.code == "model_bad_reply"
    assert "not JSON" in caught.value.message
    assert provider.base_url in caught.value.message


async def test_error_event_mid_stream_raises_model_error(provider: FakeProvider) -> None:
    provider.replies.append(Reply([text("ok"), sse({"error": {"message": "context too long"}})]))
    with pytest.raises(ModelError, match="context too long"):
        await collect(make_model(provider))


async def test_reply_without_any_data_event_raises_model_error(provider: FakeProvider) -> None:
    provider.replies.append(Reply([b'{"choices": []}'], media_type="application/json"))
    with pytest.raises(ModelError) as caught:
        await collect(make_model(provider))
    assert caught.value.code == "model_bad_reply"


# ---------------------------------------------------------------------------------------------
# Configuration


def test_from_config_reads_the_key_from_the_environment() -> None:
    model = OpenAICompatModel.from_config(
        {
            "kind": "openai",
            "base_url": "http://127.0.0.1:11434/v1/",
            "model": "llama3.1",
            "api_key_env": "MY_KEY",
            "timeout": 5,
            "temperature": 0,
        },
        environ={"MY_KEY": "sk-from-env"},
    )
    assert model.base_url == "http://127.0.0.1:11434/v1"
    assert model.model == "llama3.1"
    assert model.timeout == 5.0
    assert model.temperature == 0.0
    assert "sk-from-env" not in repr(model)


async def test_from_config_key_is_sent_as_bearer(provider: FakeProvider) -> None:
    provider.replies.append(Reply([text("ok"), DONE]))
    model = OpenAICompatModel.from_config(
        {"base_url": provider.base_url, "model": "m", "api_key_env": "K"}, environ={"K": "sk-k"}
    )
    await collect(model)
    assert provider.received[0].headers["authorization"] == "Bearer sk-k"


async def test_azure_style_key_header_and_api_version_query(provider: FakeProvider) -> None:
    # docs/models.md's Azure agent file: the key as the whole `api-key` header, no Bearer.
    provider.replies.append(Reply([text("ok"), DONE]))
    model = OpenAICompatModel.from_config(
        {"base_url": provider.base_url, "model": "my-deployment", "api_key_env": "AZ",
         "api_key_header": "api-key", "query": {"api-version": "2024-10-21"}},
        environ={"AZ": "az-secret"},
    )  # fmt: skip
    assert await collect(model) == [TextDelta("ok")]
    [received] = provider.received
    assert received.headers["api-key"] == "az-secret"
    assert "authorization" not in received.headers
    assert received.query == {"api-version": "2024-10-21"}
    assert received.body["model"] == "my-deployment"


async def test_from_config_without_api_key_env_sends_no_key(provider: FakeProvider) -> None:
    # The environment's OPENAI_API_KEY must not go to whatever base_url was configured.
    provider.replies.append(Reply([text("ok"), DONE]))
    model = OpenAICompatModel.from_config(
        {"base_url": provider.base_url, "model": "m"},
        environ={"OPENAI_API_KEY": "sk-should-not-leak"},
    )
    assert model.timeout == 60.0
    assert model.temperature is None
    await collect(model)
    assert "authorization" not in provider.received[0].headers


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model": "m"}, "'base_url' is required"),
        ({"base_url": "", "model": "m"}, "'base_url' is required"),
        ({"base_url": "ftp://host/v1", "model": "m"}, "http(s) URL (got 'ftp://host/v1')"),
        ({"base_url": "127.0.0.1:11434/v1", "model": "m"}, "http(s) URL"),
        ({"base_url": "http://h/v1"}, "'model' (the provider's model name) is required"),
        ({"base_url": "http://h/v1", "model": "m", "kind": "scripted"}, "'kind' must be 'openai'"),
        ({"base_url": "http://h/v1", "model": "m", "timeout": 0}, "'timeout' must be"),
        ({"base_url": "http://h/v1", "model": "m", "timeout": "60"}, "'timeout' must be"),
        ({"base_url": "http://h/v1", "model": "m", "temperature": "hot"}, "'temperature'"),
        (
            {"base_url": "http://h/v1", "model": "m", "api_key_env": "UNSET"},
            "'UNSET' (named by 'api_key_env') is not set",
        ),
        ({"base_url": "http://h/v1", "model": "m", "api_key": "sk-x"}, "'api_key_env'"),
        ({"base_url": "http://h/v1", "model": "m", "temprature": 1}, "unknown key 'temprature'"),
        ({"base_url": "http://h/v1", "model": "m", "api_key_header": "x: y"}, "'api_key_header'"),
        ({"base_url": "http://h/v1", "model": "m", "query": {"v": 1}}, "'query' must map"),
        ({"base_url": "http://h/v1", "model": "m", "query": ["v"]}, "'query' must map"),
    ],
)
def test_from_config_rejects_bad_config(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        OpenAICompatModel.from_config(config, environ={})


# ---------------------------------------------------------------------------------------------
# Through the engine


def test_text_streamed_before_a_failure_is_kept_marked_and_sent_back(
    provider: FakeProvider, tmp_path: Path
) -> None:
    """Text seen live once before RUN_ERROR was missing from the snapshot and from the
    next model request."""
    agents = tmp_path / "agents"
    write_agent(agents, {
        "id": "talker", "name": "Talker",
        "model": {"kind": "openai", "base_url": provider.base_url, "model": "m"},
        "tools": [],
    })  # fmt: skip
    allow_hosts(agents, provider.base_url)
    provider.replies.append(Reply([text("Here is the pl")]))  # cut: no finish_reason, no [DONE]
    provider.replies.append(Reply([text("Sorry, again: the plan."), chunk({}, "stop"), DONE]))
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("talker")
        h.say(conv, "plan my week")
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "model_bad_reply"
        [mine] = [m for m in snap["messages"] if m["role"] == "assistant"]
        assert (mine["text"], mine["interrupted"]) == ("Here is the pl", True)
        ends = [d for t, d in h.events(conv) if t == "TEXT_MESSAGE_END"]
        assert ends[-1] == {"type": "TEXT_MESSAGE_END", "messageId": mine["id"],
                            "interrupted": True}  # fmt: skip
        assert [t for t, _ in h.events(conv)][-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
        h.say(conv, "go on")
        assert h.settle(conv)["run"]["status"] == "finished"
        history = provider.received[-1].body["messages"]
        assert [m["role"] for m in history] == ["user", "assistant", "user"]
        assert history[1]["content"].startswith("Here is the pl\n\n[This reply was interrupted")
    finally:
        h.stop()


# ---------------------------------------------------------------------------------------------
# What an agent file may make the server send, and where


SIGNING_KEYS = "the-server-signing-keys-0123456789"


def talker(agents: Path, model: dict[str, Any]) -> None:
    write_agent(agents, {"id": "talker", "model": {"kind": "openai", "model": "m", **model}})


def start_or_refusal(tmp_path: Path, agents: Path, environ: dict[str, str]) -> list[str]:
    """The loader's lines if the agents are refused; else a conversation is run (what an
    attacker who saved the file would do next) and no line comes back."""
    try:
        h = Harness(tmp_path, agents, environ=environ)
    except AgentConfigError as exc:
        return exc.problems
    try:
        conv = h.conversation("talker")
        h.say(conv, "hello")
        h.settle(conv)
    finally:
        h.stop()
    return []


@pytest.mark.parametrize("variable", ["HOSTCALL_SECRET_KEYS", "HOSTCALL_DATABASE_URL"])
def test_a_model_cannot_be_sent_the_servers_own_secrets_even_if_listed(
    provider: FakeProvider, tmp_path: Path, variable: str
) -> None:
    agents = tmp_path / "agents"
    talker(agents, {"base_url": provider.base_url, "api_key_env": variable})
    allow_hosts(agents, provider.base_url)
    provider.replies.append(Reply([text("ok"), DONE]))
    environ = {variable: SIGNING_KEYS, "HOSTCALL_SECRET_KEYS": SIGNING_KEYS}
    problems = start_or_refusal(tmp_path, agents, environ)
    assert [r.headers.get("authorization") for r in provider.received] == []
    assert problems == [
        f"talker.json: model: 'api_key_env': environment variable {variable!r} is one of "
        "the server's own settings (HOSTCALL_*), never given to an agent"
    ]
    # Listing it changes nothing: the platform file itself is refused.
    allow_hosts(agents, env=(variable,))
    problems = start_or_refusal(tmp_path, agents, environ)
    assert f"_platform.json: allowed_env: {variable!r} is one of the server's own" in problems[0]
    assert provider.received == []


def test_a_variable_not_on_the_operators_list_is_refused_at_load(
    provider: FakeProvider, tmp_path: Path
) -> None:
    agents = tmp_path / "agents"
    talker(agents, {"base_url": provider.base_url, "api_key_env": "AWS_SECRET_ACCESS_KEY"})
    allow_hosts(agents, provider.base_url)
    provider.replies.append(Reply([text("ok"), DONE]))
    problems = start_or_refusal(tmp_path, agents, {"AWS_SECRET_ACCESS_KEY": "aws-secret-123"})
    assert provider.received == []
    assert problems == [
        "talker.json: model: 'api_key_env': environment variable 'AWS_SECRET_ACCESS_KEY' is "
        "not listed in 'allowed_env' of _platform.json"
    ]


def test_a_listed_variable_is_sent_to_an_allowed_model(
    provider: FakeProvider, tmp_path: Path
) -> None:
    agents = tmp_path / "agents"
    talker(agents, {"base_url": provider.base_url, "api_key_env": "OPENAI_API_KEY"})
    allow_hosts(agents, provider.base_url, env=("OPENAI_API_KEY",))
    provider.replies.append(Reply([text("ok"), DONE]))
    assert start_or_refusal(tmp_path, agents, {"OPENAI_API_KEY": "sk-listed"}) == []
    assert [r.headers["authorization"] for r in provider.received] == ["Bearer sk-listed"]


def test_a_model_outside_its_environments_hosts_is_refused_at_load_with_no_connection(
    tmp_path: Path,
) -> None:
    trap = Trap()
    try:
        agents = tmp_path / "agents"
        talker(agents, {"base_url": f"http://127.0.0.1:{trap.port}/v1"})
        allow_hosts(agents)  # the default environment, with the demo's hosts only
        problems = start_or_refusal(tmp_path, agents, {})
        assert trap.connections == 0
        assert problems == [
            f"talker.json: model: 'base_url' goes to 127.0.0.1:{trap.port}, which is not in "
            "the 'allowed_hosts' of the agent's environment (_platform.json)"
        ]
    finally:
        trap.close()


def test_a_model_whose_host_is_taken_off_the_list_is_not_contacted(
    provider: FakeProvider, tmp_path: Path
) -> None:
    trap = Trap()
    agents = tmp_path / "agents"
    talker(agents, {"base_url": f"http://127.0.0.1:{trap.port}/v1"})
    allow_hosts(agents, f"http://127.0.0.1:{trap.port}/")
    h = Harness(tmp_path, agents)
    try:
        # The platform is read live: the operator narrows the environment while it runs.
        engine_agents = h.runtime.engine.agents
        narrowed = {"default": replace(engine_agents.platform.environments["default"],
                                       allowed_hosts=frozenset())}  # fmt: skip
        engine_agents.platform = replace(engine_agents.platform, environments=narrowed)
        conv = h.conversation("talker")
        h.say(conv, "hello")
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "model_unreachable"
        assert trap.connections == 0
    finally:
        h.stop()
        trap.close()


async def test_a_model_built_with_hosts_checks_them_before_every_request() -> None:
    trap = Trap()
    try:
        hosts: set[str] = {f"127.0.0.1:{trap.port}"}
        model = OpenAICompatModel.from_config(
            {"base_url": f"http://127.0.0.1:{trap.port}/v1", "model": "m"},
            environ={},
            allowed_hosts=lambda: hosts,
        )
        hosts.clear()
        with pytest.raises(ModelError) as caught:
            await collect(model)
        assert caught.value.code == "model_unreachable"
        assert "not contacted" in caught.value.message
        assert trap.connections == 0
    finally:
        trap.close()


@pytest.mark.parametrize("taken_off", ["allowed_env", "allowed_hosts"])
def test_a_run_in_flight_is_held_to_the_variables_and_hosts_the_operator_lists_now(
    provider: FakeProvider, tmp_path: Path, taken_off: str
) -> None:
    """A run waiting on a call keeps its definition, not the lists: the operator takes the
    model's key off allowed_env, or its host off the environment; the agent file changes so
    the reload passes, and the waiting run's next step sends nothing."""
    agents = tmp_path / "agents"
    tool = {"name": "ask_page", "description": "Asks the page.", "effect": "read",
            "input_schema": {"type": "object", "properties": {}},
            "output_schema": {"type": "object", "properties": {}}}  # fmt: skip
    write_agent(agents, {"id": "talker", "tools": [tool], "model": {
        "kind": "openai", "model": "m", "base_url": provider.base_url,
        "api_key_env": "OPENAI_API_KEY"}})  # fmt: skip
    allow_hosts(agents, provider.base_url, env=("OPENAI_API_KEY",))
    provider.replies.append(Reply([call_part(0, call_id="c1", name="ask_page", arguments="{}"),
                                   chunk({}, "tool_calls"), DONE]))  # fmt: skip
    h = Harness(tmp_path, agents, environ={"OPENAI_API_KEY": "sk-was-listed"})
    try:
        conv = h.conversation("talker")
        h.say(conv, "hello")
        call = h.open_call(conv)
        assert len(provider.received) == 1
        write_agent(agents, {"id": "talker", "tools": [tool]})  # now scripted
        platform = json.loads((agents / "_platform.json").read_text())
        if taken_off == "allowed_env":
            platform["allowed_env"] = []
        else:
            platform["environments"]["default"]["allowed_hosts"] = []
        write_agent(agents, platform, name="_platform.json")
        h.runtime.reload_agents()
        assert h.answer(call, {}).status_code == 200
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "model_unreachable"
        assert len(provider.received) == 1  # the step after the answer sent nothing
    finally:
        h.stop()
