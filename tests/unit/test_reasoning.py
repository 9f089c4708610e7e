"""A model's reasoning: read from what OpenAI-compatible providers stream, relayed as AG-UI's
REASONING_* events before the answer, hidden by the agent file's switch, and never kept when
the provider sent it encrypted (docs/protocol.md "Reasoning")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.appender import Appender
from hostcall.broker import Broker
from hostcall.errors import AgentConfigError
from hostcall.journal import Journal
from hostcall.models.base import Message, ReasoningDelta, ReasoningEncrypted, StepEnd, TextDelta
from hostcall.models.openai_compat import OpenAICompatModel
from hostcall.protocol.events import TextMessageStart, ToolCallStart
from hostcall.runs.reasoning import Reasoning
from hostcall.store.records import Conversation
from hostcall.store.sqlite import SQLiteStore
from hostcall.transcript import reasonings
from tests.support.harness import Harness, allow_hosts, write_agent
from tests.support.provider import DONE, FakeProvider, Reply, chunk, text

# An opaque blob as OpenRouter relays an encrypted reasoning item: it must never be stored.
BLOB = "gAAAAABencryptedreasoningblobthatnobodymayread"

REASONING_EVENTS = [
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
]


async def _streamed(provider: FakeProvider) -> list[Any]:
    model = OpenAICompatModel(base_url=provider.base_url, model="thinker")
    stream = model.stream([Message(role="user", text="hi")], [])
    return [e async for e in stream if not isinstance(e, StepEnd)]


async def test_reasoning_content_deltas_come_before_the_text(provider: FakeProvider) -> None:
    provider.replies.append(Reply([
        chunk({"role": "assistant", "reasoning_content": "The user "}),
        chunk({"reasoning_content": "greets me."}),
        chunk({"reasoning_content": None, "content": "Hello!"}),
        chunk({}, "stop"), DONE,
    ]))  # fmt: skip
    assert await _streamed(provider) == [
        ReasoningDelta("The user "), ReasoningDelta("greets me."), TextDelta("Hello!"),
    ]  # fmt: skip


async def test_ollamas_reasoning_key_is_read_too(provider: FakeProvider) -> None:
    provider.replies.append(Reply([chunk({"reasoning": "Hmm."}), text("Hi"), DONE]))
    assert await _streamed(provider) == [ReasoningDelta("Hmm."), TextDelta("Hi")]


async def test_encrypted_reasoning_is_read_as_its_presence_only(provider: FakeProvider) -> None:
    provider.replies.append(Reply([
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": BLOB}]}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "Visible."}]}),
        text("Done."), DONE,
    ]))  # fmt: skip
    events = await _streamed(provider)
    assert events == [ReasoningEncrypted(), ReasoningDelta("Visible."), TextDelta("Done.")]
    assert BLOB not in repr(events)


def _thinker(agents: Path, **extra: Any) -> None:
    write_agent(agents, {
        "id": "thinker", "name": "Thinker", "tools": [],
        "model": {"kind": "scripted", "rules": [{
            "match": "plan", "reasoning": "First the goals, then the days.",
            "reply": "Here is your plan.",
        }]},
        **extra,
    })  # fmt: skip


def test_reasoning_streams_as_agui_events_before_the_answer(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    _thinker(agents)
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("thinker")
        h.say(conv, "plan my week")
        snap = h.settle(conv)
        events = h.events(conv)
        names = [n for n, _ in events]
        thought = [d for n, d in events if n.startswith("REASONING")]
        assert [d["type"] for d in thought if d["type"] != "REASONING_MESSAGE_CONTENT"] == [
            n for n in REASONING_EVENTS if n != "REASONING_MESSAGE_CONTENT"
        ]
        assert len({d["messageId"] for d in thought}) == 1
        assert thought[1]["role"] == "reasoning"
        said = "".join(d["delta"] for d in thought if d["type"] == "REASONING_MESSAGE_CONTENT")
        assert said == "First the goals, then the days."
        # All of it before the answer begins; the answer is the only message kept.
        answer_starts = max(i for i, n in enumerate(names) if n == "TEXT_MESSAGE_START")
        assert names.index("REASONING_END") < answer_starts
        [answer] = [m for m in snap["messages"] if m["role"] == "assistant"]
        assert answer["text"] == "Here is your plan."
    finally:
        h.stop()


def test_an_agent_file_can_hide_the_reasoning(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    _thinker(agents, show_reasoning=False)
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("thinker")
        h.say(conv, "plan my week")
        snap = h.settle(conv)
        assert snap["run"]["status"] == "finished"
        names = [n for n, _ in h.events(conv)]
        assert not [n for n in names if n.startswith("REASONING")]
        assert "TEXT_MESSAGE_CONTENT" in names
        # Nor in the snapshot a reload draws.
        assert snap["messages"] and not [m for m in snap["messages"] if "reasoning" in m]
    finally:
        h.stop()


def test_show_reasoning_must_be_a_boolean(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    _thinker(agents, show_reasoning="no")
    with pytest.raises(AgentConfigError, match="'show_reasoning' must be true or false"):
        load_agents(agents, {})


def test_encrypted_reasoning_is_neither_relayed_nor_stored(
    provider: FakeProvider, tmp_path: Path
) -> None:
    agents = tmp_path / "agents"
    write_agent(agents, {
        "id": "talker", "name": "Talker", "tools": [],
        "model": {"kind": "openai", "base_url": provider.base_url, "model": "m"},
    })  # fmt: skip
    allow_hosts(agents, provider.base_url)
    provider.replies.append(Reply([
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": BLOB}]}),
        text("Done."), chunk({}, "stop"), DONE,
    ]))  # fmt: skip
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("talker")
        h.say(conv, "think hard")
        assert h.settle(conv)["run"]["status"] == "finished"
        events = h.events(conv)
        # That the model reasoned, and nothing of what: no message between START and END.
        thought = [n for n, _ in events if n.startswith("REASONING")]
        assert thought == ["REASONING_START", "REASONING_END"]
        stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*.db*") if p.is_file())
        assert stored and BLOB.encode() not in stored
        assert BLOB not in repr(events)
    finally:
        h.stop()


async def test_reasoning_again_after_the_answer_began_is_a_reasoning_of_its_own(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "r.db")
    try:
        await store.create_conversation(Conversation("c1", "thinker", 1.0, "en"))
        appender = Appender(Journal(store, Broker()), "c1", ("run:r1", "me"))
        await store.take_lease("run:r1", "me", 1e12, 0.0)
        reasoning = Reasoning(appender, shown=True)
        await reasoning.add(ReasoningDelta("one"))
        reasoning.end()
        appender.add(TextMessageStart("m_answer", "assistant"))
        await reasoning.add(ReasoningDelta("two"))
        reasoning.end()
        await appender.flush()
        events = [(e.name, e.data) for e in await store.events_after("c1", 0)]
    finally:
        await store.close()
    starts = [d for n, d in events if n == "REASONING_START"]
    assert len(starts) == 2 and starts[0] != starts[1]
    assert [n for n, _ in events].count("REASONING_END") == 2


def test_a_snapshot_carries_the_reasoning_before_its_answer(tmp_path: Path) -> None:
    # A reloaded widget draws the thread from the snapshot: the reasoning shown while the
    # answer streamed comes back with it, on the message it led to.
    agents = tmp_path / "agents"
    _thinker(agents)
    h = Harness(tmp_path, agents)
    try:
        conv = h.conversation("thinker")
        h.say(conv, "plan my week")
        snap = h.settle(conv)
        [question] = [m for m in snap["messages"] if m["role"] == "user"]
        [answer] = [m for m in snap["messages"] if m["role"] == "assistant"]
        assert answer["reasoning"] == "First the goals, then the days."
        assert "reasoning" not in question
    finally:
        h.stop()


async def test_reasoning_is_placed_on_what_it_led_to(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.db")
    try:
        await store.create_conversation(Conversation("c1", "thinker", 1.0, "en"))
        appender = Appender(Journal(store, Broker()), "c1", ("run:r1", "me"))
        await store.take_lease("run:r1", "me", 1e12, 0.0)
        reasoning = Reasoning(appender, shown=True)
        # A step that only calls a tool: its reasoning goes with the call's message.
        await reasoning.add(ReasoningDelta("look it up"))
        reasoning.end()
        appender.add(ToolCallStart("k1", "lookup", "m_calls"))
        # A run that failed after reasoning: the person's next message is not its answer.
        await reasoning.add(ReasoningEncrypted())
        reasoning.end()
        appender.add(TextMessageStart("m_user", "user"))
        # Reasoning in two parts before one answer: both, in order.
        await reasoning.add(ReasoningDelta("first"))
        reasoning.end()
        await reasoning.add(ReasoningDelta("second"))
        reasoning.end()
        appender.add(TextMessageStart("m_answer", "assistant"))
        await appender.flush()
        found = await reasonings(store, "c1")
    finally:
        await store.close()
    assert found == {"m_calls": "look it up", "m_answer": "first\n\nsecond"}
