"""The application services (hostcall/services/), driven without HTTP: a use case's write
is followed by what it leaves to do, so a run goes on without a route remembering to resume
it. The real runtime on a real SQLite file; the sweeper, which would resume a stalled run on
its own, is set never to come round during a test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hostcall.protocol.events import CustomName, EventType
from hostcall.protocol.frames import Event
from hostcall.protocol.requests import CallResult
from hostcall.runtime import Runtime
from hostcall.services.runs import Held
from hostcall.settings import Settings
from hostcall.store.records import Call, Conversation, RunStatus
from hostcall.tokens import Purpose
from tests.support.harness import BOARD, SECRET

# Long enough that only the service's own follow-up can resume a run within a test.
NEVER = 3600.0
# How long a signal may take on a loaded machine before the test says it never came.
PATIENCE = 20.0


@pytest.fixture
async def runtime(tmp_path: Path, agents_dir: Path) -> AsyncIterator[Runtime]:
    settings = Settings(
        agents_dir=agents_dir,
        db_path=tmp_path / "hostcall.db",
        secret_keys=SECRET,
        sweep_seconds=NEVER,
        environ={},
    )
    built = Runtime.build(settings)
    async with built.running():
        yield built


async def _until(queue: asyncio.Queue[Event | None], *names: str) -> Event:
    """The next event published with one of ``names`` (a CUSTOM event: its own name)."""
    async with asyncio.timeout(PATIENCE):
        while True:
            event = await queue.get()
            assert event is not None, "the stream was dropped"
            if event.name in names:
                return event


async def _waiting_call(
    runtime: Runtime, queue: asyncio.Queue[Event | None], conversation: Conversation
) -> Call:
    sent = await runtime.services.runs.send(conversation, "What should I work on next?")
    assert not isinstance(sent, Held)
    await _until(queue, CustomName.TOOL_CALL_DISPATCH)
    [call] = await runtime.store.list_calls(conversation.id)
    return call


async def test_answering_the_last_open_call_resumes_its_run(runtime: Runtime) -> None:
    services = runtime.services
    conversation = await services.conversations.start("planner", "en", person=None, browser=None)
    queue = runtime.broker.subscribe(conversation.id)
    call = await _waiting_call(runtime, queue, conversation)
    view = await services.calls.view(call)
    assert view.result_token is not None
    claims = runtime.tokens.verify(Purpose.CALL_RESULT, view.result_token)

    answered = await services.calls.answer(
        call.id, claims, CallResult(view.result_token, BOARD, None)
    )

    assert answered.state.value == "answered"
    await _until(queue, EventType.RUN_FINISHED)
    run = await runtime.store.latest_run(conversation.id)
    assert run is not None and run.status is RunStatus.FINISHED
    replies = [m.text for m in await runtime.store.list_messages(conversation.id)]
    assert "Fix login bug" in replies[-1]


async def test_an_operator_ending_a_call_resumes_its_run(runtime: Runtime) -> None:
    services = runtime.services
    conversation = await services.conversations.start("planner", "en", person=None, browser=None)
    queue = runtime.broker.subscribe(conversation.id)
    call = await _waiting_call(runtime, queue, conversation)

    await services.calls.end(call.id, operator="ops")

    await _until(queue, EventType.RUN_FINISHED)
    ended = await runtime.store.get_call(call.id)
    assert ended is not None and ended.outcome is not None
    assert ended.outcome["error"]["code"] == "operator_ended"
    run = await runtime.store.latest_run(conversation.id)
    assert run is not None and run.status is RunStatus.FINISHED
