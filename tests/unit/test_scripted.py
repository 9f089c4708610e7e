"""The scripted model's reply to a tool's answer streams as Jinja renders it: the same
chunks as the whole text's, the first ones before the rest is rendered."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostcall.models.base import Message, ModelError, TextDelta, ToolCallRequest
from hostcall.models.scripted import ScriptedModel, _chunks, _streamed
from tests.support.harness import Harness, planner_definition, write_agent
from tests.support.redos import (
    FAST_SECONDS,
    HOSTILE_PATTERN,
    HOSTILE_TEXT,
    RESPONSIVE_SECONDS,
    timed,
    while_answering_healthz,
)

# Words and the whitespace between them, Unicode's included: the cuts fall anywhere.
TEXT = st.lists(st.sampled_from(["a", "bc", "é", " ", "  ", "\n", "\t", "\u3000", "x.y"]))


@given(pieces=st.lists(st.text(alphabet="ab \n\t\u3000", max_size=12), max_size=12))
def test_streamed_chunks_are_the_chunks_of_the_whole_text(pieces: list[str]) -> None:
    assert list(_streamed(pieces)) == _chunks("".join(pieces).strip())


@given(parts=TEXT, cut=st.integers(min_value=1, max_value=5))
def test_streamed_chunks_do_not_depend_on_where_the_text_was_cut(
    parts: list[str], cut: int
) -> None:
    text = "".join(parts)
    pieces = [text[i : i + cut] for i in range(0, len(text), cut)]
    assert list(_streamed(pieces)) == list(_streamed([text])) == _chunks(text.strip())


def _answered(reply: str, output: Any) -> tuple[ScriptedModel, list[Message]]:
    model = ScriptedModel.from_config(
        {"kind": "scripted", "rules": [{"match": "next", "tool": "read", "reply": reply}]}
    )
    messages = [
        Message("user", "next"),
        Message("assistant", tool_calls=(ToolCallRequest("k_1", "read", "{}"),)),
        Message("tool", json.dumps({"output": output}), tool_call_id="k_1", tool_name="read"),
    ]
    return model, messages


async def _texts(model: ScriptedModel, messages: list[Message]) -> list[str]:
    texts = []
    async for item in model.stream(messages, []):
        assert isinstance(item, TextDelta)
        texts.append(item.text)
    return texts


def test_a_reply_streams_in_the_chunks_of_its_whole_text() -> None:
    reply = (
        "  Here is the order I suggest:\n{% for t in result.output.tasks %}{{ t }}\n{% endfor %}"
    )
    model, messages = _answered(reply, {"tasks": ["one", "two", "three"]})
    texts = asyncio.run(_texts(model, messages))
    assert texts == _chunks("Here is the order I suggest:\none\ntwo\nthree")


def test_a_reply_streams_its_first_words_before_the_rest_is_rendered() -> None:
    # The first chunk is out before the division by zero further on is rendered; the
    # failure then comes as the model's error, after it (the step keeps what it streamed).
    model, messages = _answered(
        "Here is the order I suggest: {{ 10 // (result.output.tasks | length) }}", {"tasks": []}
    )

    async def run() -> list[str]:
        texts = []
        with pytest.raises(ModelError) as caught:
            async for item in model.stream(messages, []):
                assert isinstance(item, TextDelta)
                texts.append(item.text)
        assert caught.value.code == "reply_template_failed"
        assert "ZeroDivisionError" in caught.value.message
        return texts

    assert asyncio.run(run()) == ["Here is the order "]


# ---- a designer's catastrophic pattern against a visitor's text ----------------------------

ECHO = {
    "id": "echo",
    "model": {
        "kind": "scripted",
        "rules": [
            {"match": HOSTILE_PATTERN, "reply": "only a"},
            {"match": r"(?P<word>\w+)!$", "reply": "{{ word }} and {{ match.word | length }}"},
        ],
        "fallback": "nothing",
    },
    "tools": [],
}


def test_a_rule_matches_a_hostile_message_in_linear_time() -> None:
    model = ScriptedModel.from_config(ECHO["model"])
    texts, seconds = timed(lambda: asyncio.run(_texts(model, [Message("user", HOSTILE_TEXT)])))
    assert seconds < FAST_SECONDS, f"the rules took {seconds:.2f}s"
    # No rule took the first: the next one did, with its named group.
    assert "".join(texts) == f"{HOSTILE_TEXT[:-1]} and {len(HOSTILE_TEXT) - 1}"


def test_the_server_answers_while_a_rule_matches_a_hostile_message(tmp_path: Path) -> None:
    write_agent(tmp_path / "agents", ECHO)
    h = Harness(tmp_path, tmp_path / "agents")
    try:
        conv = h.conversation("echo")

        def send() -> dict[str, Any]:
            h.say(conv, HOSTILE_TEXT)
            return h.settle(conv)

        snap, longest = while_answering_healthz(h.http, send)
        assert longest < RESPONSIVE_SECONDS, f"/healthz waited {longest:.2f}s"
        assert snap["run"]["status"] == "finished"
        assert [(m["role"], m["text"]) for m in snap["messages"]] == [
            ("user", HOSTILE_TEXT), ("assistant", f"{HOSTILE_TEXT[:-1]} and 26"),
        ]  # fmt: skip
    finally:
        h.stop()


def test_the_demos_rules_read_words_of_any_script() -> None:
    """RE2's \\w is ASCII: the demo's due date says \\p{L}, so a Spanish day still parses."""
    model = ScriptedModel.from_config(planner_definition()["model"])

    async def first_call() -> ToolCallRequest:
        text = "Add a task to revisar el presupuesto before miércoles"
        async for item in model.stream([Message("user", text)], []):
            if isinstance(item, ToolCallRequest):
                return item
        raise AssertionError("no tool call")

    call = asyncio.run(first_call())
    assert call.name == "create_task"
    arguments = json.loads(call.arguments)
    assert (arguments["title"], arguments["dueDate"]) == ("Revisar el presupuesto", "miércoles")
