"""hostcall/patterns.py: agent files' regular expressions in RE2, linear time; what RE2
lacks is refused with a hint saying what to write instead."""

from __future__ import annotations

import pytest

from hostcall import patterns
from tests.support.redos import FAST_SECONDS, HOSTILE_PATTERN, timed


@pytest.mark.parametrize(
    ("source", "hint"),
    [
        (r"(\w+) \1", "backreferences"),
        (r"(?P<w>\w+) (?P=w)", "backreferences"),
        (r"foo(?=bar)", "lookahead"),
        (r"foo(?!bar)", "lookahead"),
        (r"(?<=@)example", "lookbehind"),
        (r"(?<!@)example", "lookbehind"),
        (r"(?>a+)b", "atomic groups"),
        (r"a++b", "possessive"),
        (r"done\Z", r"\z"),
        (r"(?x) a b", "verbose"),
        (r"a.{900}x", "too large"),
        ("(unclosed", "missing )"),
    ],
)
def test_what_re2_lacks_is_refused_with_a_hint(source: str, hint: str) -> None:
    problem = patterns.problem(source)
    assert problem is not None and hint in problem, problem
    with pytest.raises(patterns.PatternError):
        patterns.search(source, "text")


def test_named_groups_flags_and_unicode_classes_are_read() -> None:
    found = patterns.compile(r"(?i)add (?P<qty>\d+) (?<what>\p{L}+)(?P<rest> now)?", capture=True)
    assert set(found.group_names) == {"qty", "what", "rest"}
    match = found.search("ADD 3 cafés")
    assert match is not None and match.groups == {"qty": "3", "what": "cafés", "rest": ""}
    assert patterns.problem(123) == "must be a string (a regular expression)"


@pytest.mark.parametrize("length", [28, 8000, 256 * 1024])
def test_a_catastrophic_pattern_takes_linear_time(length: int) -> None:
    text = "a" * length + "!"
    found, seconds = timed(lambda: patterns.search(HOSTILE_PATTERN, text))
    assert found is False and seconds < FAST_SECONDS, f"{seconds:.3f}s"
