"""A fake OpenAI-compatible provider on loopback that speaks the real wire format: each
reply is raw body pieces, written separately, as a server streams them."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from hostcall.qa.servers import serve_in_thread


@dataclass
class Reply:
    """What the fake provider sends back: raw body pieces, each written separately."""

    pieces: list[bytes] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    media_type: str = "text/event-stream"
    stall: float = 0.0  # a slow stream: the wait after the first piece


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
        # Set when a client closed a reply's stream before its last piece: the step reading
        # it was stopped (a positive sign, where waiting "long enough" is not one).
        self.hung_up = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        self.replies.clear()
        self.received.clear()
        self.hung_up.clear()

    async def chat_completions(self, request: Request) -> Response:
        received = Received(dict(request.headers), await request.json(), dict(request.query_params))
        self.received.append(received)
        reply = self.replies.pop(0)
        if reply.delay:
            await asyncio.sleep(reply.delay)

        async def body() -> AsyncIterator[bytes]:
            sent = 0
            try:
                for n, piece in enumerate(reply.pieces):
                    yield piece
                    sent += 1
                    # Separate writes, so the client reads piece by piece.
                    await asyncio.sleep(reply.stall if n == 0 and reply.stall else 0.001)
            finally:  # cancelled, when the client goes (Starlette listens for it)
                if sent < len(reply.pieces):
                    self.hung_up.set()

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
def provider_server() -> Iterator[FakeProvider]:
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
def provider(provider_server: FakeProvider) -> FakeProvider:
    provider_server.reset()
    return provider_server


class HeldProvider:
    """A model that streams ``first`` at once (then ``asked`` is set), and ``rest`` once the
    test sets ``go`` (or after ``hold`` seconds): a step caught mid-text, for as long as a
    test needs it there."""

    def __init__(self, first: str = "Let me think", rest: str = " about it.", *,
                 hold: float = 30.0) -> None:  # fmt: skip
        self.first, self.rest, self.hold = first, rest, hold
        self.asked = threading.Event()
        self.go = threading.Event()

    async def chat(self, request: Request) -> Response:
        async def chunks() -> AsyncIterator[str]:
            for text in (self.first, None, self.rest):
                if text is None:
                    self.asked.set()
                    await asyncio.to_thread(self.go.wait, self.hold)
                    continue
                delta = {"choices": [{"index": 0, "delta": {"content": text}}]}
                yield f"data: {json.dumps(delta)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    @contextmanager
    def serving(self) -> Iterator[int]:
        """Serve it on loopback; yields its port (``/v1/chat/completions``)."""
        app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])
        with serve_in_thread(app) as port:
            yield port
