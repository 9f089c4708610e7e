"""The scripted model's templates (hostcall/models/templates.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from hostcall.models import templates

_jinja = ImmutableSandboxedEnvironment(autoescape=False)
# Text without an opening brace, rich in what Jinja's lexer treats specially: newlines of
# every kind (it normalises them, and drops one at the end), and the other delimiters' halves.
_plain_text = st.lists(
    st.sampled_from(["a", " ", "\n", "\r", "\r\n", "%", "#", "}", "-", "é", "\t", "\\"])
    | st.text(st.characters(exclude_characters="{"), max_size=5),
    max_size=30,
).map("".join)


@given(_plain_text)
def test_a_template_without_syntax_renders_as_jinja_renders_it(text: str) -> None:
    expected = _jinja.from_string(text).render()
    assert "".join(templates.rendering(text, {}, "test")) == expected
    assert templates.render(text, {}, "test") == expected.strip()
    assert templates.render_value({"k": text}, {}, "test") == (
        {"k": expected.strip()} if expected.strip() else {}
    )


def test_a_template_with_syntax_still_goes_through_jinja() -> None:
    assert templates.render("Hi {{ name }}!\n", {"name": "Ann"}, "test") == "Hi Ann!"
    assert "".join(templates.rendering("{# note #}plain\n", {}, "test")) == "plain"
    assert templates.render_value({"n": "{{ n }}"}, {"n": 3}, "test") == {"n": 3}
