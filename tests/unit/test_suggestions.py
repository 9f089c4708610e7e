"""An agent file's ``suggestions`` (starters per locale, follow-up rules) and ``rating`` blocks:
each mistake stops loading (and ``hostcall check``) with one line naming the field; a good
file reaches the widget's config as written, and an agent with neither gives it nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.cli import main
from tests.support.harness import Harness, planner_definition, write_agent
from tests.unit.test_agent_files import agents_folder, problems_of
from tests.unit.test_embedding import widget_config

GOOD_SUGGESTIONS = {
    "starters": {"en": ["What is due today?", "Plan my week"], "fr": ["Qu'ai-je à faire ?"]},
    "follow_ups": [
        {"when": ["task", "tâche"], "offer": {"en": ["Add another task"], "fr": ["Une autre"]}}
    ],
}
GOOD_RATING = {"after_handoff": True, "when": ["goodbye"]}

# (name, block, value, the words its one line says)
MISTAKES: list[tuple[str, str, Any, tuple[str, ...]]] = [
    ("not-an-object", "suggestions", ["hi"], ("suggestions must be an object",)),
    ("empty", "suggestions", {}, ("neither starters nor follow_ups",)),
    ("unknown-key", "suggestions", {"starters": {"en": ["a"]}, "chips": 1}, ("'chips'",)),
    ("starters-a-list", "suggestions", {"starters": ["a"]}, ("starters must be an object",)),
    ("unknown-locale", "suggestions", {"starters": {"de": ["Hallo"]}}, ("unknown locale 'de'",)),
    ("too-many", "suggestions", {"starters": {"en": list("abcde")}}, ("1 to 4 strings",)),
    ("none", "suggestions", {"starters": {"en": []}}, ("starters.en", "1 to 4")),
    ("blank", "suggestions", {"starters": {"en": ["  "]}}, ("'  ' is not a non-blank",)),
    ("not-text", "suggestions", {"starters": {"en": [3]}}, ("3 is not a non-blank string",)),
    ("too-long", "suggestions", {"starters": {"en": ["x" * 81]}}, ("81 characters; at most 80",)),
    ("twice", "suggestions", {"starters": {"ja": ["はい", "はい"]}}, ("same text is given twice",)),
    ("rules-not-a-list", "suggestions", {"follow_ups": {}}, ("follow_ups must be a list",)),
    (
        "too-many-rules",
        "suggestions",
        {"follow_ups": [{"when": ["a"], "offer": {"en": ["b"]}}] * 21},
        ("at most 20 rules",),
    ),
    (
        "rule-no-when",
        "suggestions",
        {"follow_ups": [{"offer": {"en": ["b"]}}]},
        ("follow_ups #1.when must be a list",),
    ),
    (
        "rule-no-offer",
        "suggestions",
        {"follow_ups": [{"when": ["a"]}]},
        ("follow_ups #1.offer must be an object",),
    ),
    (
        "rule-long-phrase",
        "suggestions",
        {"follow_ups": [{"when": ["x" * 61], "offer": {"en": ["b"]}}]},
        ("at most 60",),
    ),
    (
        "rule-many-offers",
        "suggestions",
        {"follow_ups": [{"when": ["a"], "offer": {"es": list("abcd")}}]},
        ("offer.es", "1 to 3"),
    ),
    (
        "rule-unknown-key",
        "suggestions",
        {"follow_ups": [{"when": ["a"], "offer": {"en": ["b"]}, "if": 1}]},
        ("follow_ups #1: unknown key 'if'",),
    ),
    ("rating-not-an-object", "rating", True, ("rating must be an object",)),
    ("rating-unknown-key", "rating", {"stars": 5}, ("rating: unknown key 'stars'",)),
    (
        "rating-handoff-not-bool",
        "rating",
        {"after_handoff": "yes"},
        ("after_handoff must be true or false",),
    ),
    ("rating-never", "rating", {"after_handoff": False}, ("asks never",)),
    ("rating-when-too-many", "rating", {"when": list("abcdefghijk")}, ("rating.when", "1 to 10")),
]


@pytest.mark.parametrize(("block", "value", "says"), [m[1:] for m in MISTAKES],
                         ids=[m[0] for m in MISTAKES])  # fmt: skip
def test_each_mistake_stops_loading_with_one_line_naming_the_field(
    tmp_path: Path, block: str, value: Any, says: tuple[str, ...]
) -> None:
    data = {**planner_definition(), block: value}
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    [problem] = problems_of(tmp_path)
    assert problem.startswith(f"agent.json: {block}") and "\n" not in problem, problem
    for words in says:
        assert words in problem, (words, problem)


def test_hostcall_check_says_what_is_wrong_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {**planner_definition(), "suggestions": {"starters": {"en": ["x" * 200]}}}
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    assert main(["check", "--agents", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        "agent.json: suggestions.starters.en: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… is 200"
        " characters; at most 80\n"
    )
    write_agent(agents_folder(tmp_path), {**data, "suggestions": GOOD_SUGGESTIONS}, "agent.json")
    assert main(["check", "--agents", str(tmp_path)]) == 0


def test_good_blocks_load_and_reach_the_widget_config_and_none_give_it_nothing(
    tmp_path: Path, agents_dir: Path, made: list[Harness]
) -> None:
    data = {**planner_definition(), "suggestions": GOOD_SUGGESTIONS, "rating": GOOD_RATING}
    write_agent(agents_dir, {**data, "id": "asks"})
    agent = load_agents(agents_dir, {})["asks"]
    assert agent.suggestions is not None and agent.rating is not None
    assert agent.suggestions.starters["en"] == ("What is due today?", "Plan my week")
    h = Harness(tmp_path, agents_dir)
    made.append(h)
    page = h.http.get("/widget/asks")
    assert widget_config(page.text)["suggest"] == {
        "starters": GOOD_SUGGESTIONS["starters"],
        "followUps": GOOD_SUGGESTIONS["follow_ups"],
        "rating": {"afterHandoff": True, "when": ["goodbye"]},
    }
    # The demo's planner has neither: its widget loads nothing of this.
    assert widget_config(h.http.get("/widget/planner").text)["suggest"] is None
    # A rating block alone, empty: asked after a handoff only.
    write_agent(agents_dir, {**planner_definition(), "id": "rates", "rating": {}})
    rates = load_agents(agents_dir, {})["rates"]
    assert rates.rating is not None and rates.rating.after_handoff and rates.suggestions is None
