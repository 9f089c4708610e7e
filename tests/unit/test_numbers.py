"""hostcall/protocol/numbers.py: what a whole number in a request's text is."""

from __future__ import annotations

import pytest

from hostcall.errors import BadRequest
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.numbers import LARGEST, parsed, whole_number


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("7", 7), ("007", 7), (str(LARGEST), LARGEST)]
)
def test_ascii_digits_that_fit_64_bits_are_a_number(text: str, value: int) -> None:
    assert parsed(text) == value


@pytest.mark.parametrize(
    "text", ["", " 7", "7 ", "+7", "-7", "7_0", "7.0", "²", "٣", str(LARGEST + 1), "9" * 5000]
)
def test_anything_else_is_not(text: str) -> None:
    assert parsed(text) is None


def test_a_refusal_names_the_field_and_range_and_quotes_what_was_sent() -> None:
    with pytest.raises(BadRequest) as caught:
        whole_number("9" * 50, "page", low=1, high=100)
    assert caught.value.message == f"page must be a whole number from 1 to 100, not {'9' * 40!r}…"
    assert caught.value.code is ErrorCode.BAD_REQUEST and caught.value.details == {"field": "page"}
    with pytest.raises(BadRequest) as caught:
        whole_number(None, "version")
    assert (
        caught.value.message
        == "version must be a whole number from 0 to 9223372036854775807, not ''"
    )
    assert whole_number("100", "page", low=1, high=100) == 100
