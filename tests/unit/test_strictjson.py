"""hostcall/strictjson.py: what strict JSON refuses, and what stored data still renders as."""

from __future__ import annotations

import json
import math

import pytest

from hostcall import strictjson
from hostcall.strictjson import StrictJSONError


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[1, NaN]", StrictJSONError.NON_FINITE),
        ('{"a": Infinity}', StrictJSONError.NON_FINITE),
        ("-Infinity", StrictJSONError.NON_FINITE),
        ("1e999", StrictJSONError.NUMBER_TOO_LARGE),
        ("-1e400", StrictJSONError.NUMBER_TOO_LARGE),
        ("9" * 5000, StrictJSONError.NUMBER_TOO_LARGE),
        ("[" * 1000 + "]" * 1000, StrictJSONError.TOO_DEEP),
        ('{"a":' * 65 + "1" + "}" * 65, StrictJSONError.TOO_DEEP),
        ("[" * 100_000, StrictJSONError.TOO_DEEP),
        ("{not json", StrictJSONError.SYNTAX),
        (b"\xff\xfe{}", StrictJSONError.SYNTAX),
    ],
)
def test_loads_refuses_what_would_poison_a_conversation(text: str | bytes, reason: str) -> None:
    with pytest.raises(StrictJSONError) as caught:
        strictjson.loads(text)
    assert caught.value.reason == reason
    assert caught.value.message


def test_loads_accepts_ordinary_json_at_the_limits() -> None:
    assert strictjson.loads("[" * 64 + "]" * 64) is not None
    assert strictjson.loads("9" * 100) == int("9" * 100)
    assert strictjson.loads('{"a": "[[[[{{{{", "b": 1.5e300}') == {"a": "[[[[{{{{", "b": 1.5e300}
    # brackets inside strings do not count towards the depth
    deep_text = json.dumps({"note": "[" * 500})
    assert strictjson.loads(deep_text) == {"note": "[" * 500}


def test_dumps_never_writes_a_non_finite_number() -> None:
    with pytest.raises(ValueError):
        strictjson.dumps({"x": math.nan})
    assert strictjson.dumps({"x": 1}) == '{"x":1}'


def test_stored_non_finite_and_deep_values_become_displayable() -> None:
    value = {"a": math.nan, "b": [math.inf, -math.inf, 2.5], "deep": [[[["x"]]]]}
    shown = strictjson.displayable(value, max_depth=3)
    assert shown == {"a": None, "b": [None, None, 2.5], "deep": [[None]]}
    assert json.loads(strictjson.dumps_displayable({"a": math.nan})) == {"a": None}


def test_stored_text_that_cannot_be_read_back_is_none_not_an_exception() -> None:
    assert strictjson.loads_stored("[" * 100_000 + "]" * 100_000) is None
    assert strictjson.loads_stored("NaN") != strictjson.loads_stored("NaN")  # NaN, read leniently
    assert strictjson.loads_stored("{bad") is None
