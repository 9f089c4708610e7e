import re

import pytest

from hostcall.models.names import ToolNameMap, safe_name

PROVIDER_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
AWKWARD = [
    "create task",
    "créer tâche",
    "creer tache",
    "créer  tâche",
    "タスク作成",
    "タスク 削除",
    "Ünïcödé_ñame 2",
    "_private",
    "x" * 100,
    "ß" * 80,
    "a b",
    "a_b",
]


def test_provider_safe_name_is_sent_unchanged() -> None:
    names = ToolNameMap(["search_orders", "get-weather", "_x"])
    assert names.to_provider("search_orders") == "search_orders"
    assert names.to_provider("get-weather") == "get-weather"
    assert names.to_provider("_x") == "_x"


def test_spaces_become_underscores_with_a_hash_suffix() -> None:
    safe = ToolNameMap(["create task"]).to_provider("create task")
    assert re.fullmatch(r"create_task_[0-9a-f]{8}", safe)


def test_accents_are_folded_to_ascii() -> None:
    safe = ToolNameMap(["créer tâche"]).to_provider("créer tâche")
    assert re.fullmatch(r"creer_tache_[0-9a-f]{8}", safe)


def test_japanese_name_gets_an_ascii_name() -> None:
    safe = ToolNameMap(["タスク作成"]).to_provider("タスク作成")
    assert re.fullmatch(r"tool_[0-9a-f]{8}", safe)


def test_names_that_fold_alike_stay_distinct() -> None:
    names = ToolNameMap(["créer tâche", "creer tache", "créer  tâche", "タスク作成", "タスク 削除"])
    safe = [names.to_provider(n) for n in ["créer tâche", "creer tache", "créer  tâche"]]
    assert len(set(safe)) == 3
    assert names.to_provider("タスク作成") != names.to_provider("タスク 削除")


def test_safe_name_keeps_itself_when_another_name_folds_to_it() -> None:
    names = ToolNameMap(["a b", "a_b"])
    assert names.to_provider("a_b") == "a_b"
    assert names.to_provider("a b") != "a_b"


def test_safe_name_that_equals_another_names_suffixed_form_forces_a_longer_hash() -> None:
    taken = safe_name("a b")
    names = ToolNameMap(["a b", taken])
    assert names.to_provider(taken) == taken
    assert names.to_provider("a b") != taken
    assert names.from_provider(names.to_provider("a b")) == "a b"


def test_long_names_are_capped_at_64_characters_and_stay_distinct() -> None:
    first, second = "x" * 100, "x" * 99 + "y"
    names = ToolNameMap([first, second, "é" * 200])
    for name in (first, second, "é" * 200):
        assert len(names.to_provider(name)) <= 64
    assert names.to_provider(first) != names.to_provider(second)


def test_64_character_safe_name_is_unchanged() -> None:
    name = "a" * 64
    assert ToolNameMap([name]).to_provider(name) == name


@pytest.mark.parametrize("name", [*AWKWARD, "", " ", "🙂", "a.b/c"])
def test_every_provider_name_matches_the_function_name_pattern(name: str) -> None:
    assert PROVIDER_PATTERN.fullmatch(ToolNameMap([name]).to_provider(name))


def test_round_trip_for_every_name() -> None:
    names = ToolNameMap(AWKWARD)
    assert len(names) == len(AWKWARD)
    provider = {names.to_provider(name) for name in AWKWARD}
    assert len(provider) == len(AWKWARD)
    for name in AWKWARD:
        assert names.from_provider(names.to_provider(name)) == name


def test_mapping_does_not_depend_on_order_or_instance() -> None:
    forward = ToolNameMap(AWKWARD)
    backward = ToolNameMap(reversed(AWKWARD))
    assert [forward.to_provider(n) for n in AWKWARD] == [backward.to_provider(n) for n in AWKWARD]


def test_unknown_provider_name_maps_to_none() -> None:
    assert ToolNameMap(["create task"]).from_provider("delete_everything") is None


def test_name_outside_the_map_still_gets_a_safe_name() -> None:
    names = ToolNameMap([])
    assert "made up" not in names
    assert PROVIDER_PATTERN.fullmatch(names.to_provider("made up"))
    assert names.to_provider("made up") == safe_name("made up")
