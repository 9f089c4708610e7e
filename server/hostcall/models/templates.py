"""The scripted model's templates: Jinja2 in its sandbox, producing text, except an argument
that is exactly one expression, which keeps its value's JSON type.

Checked strictly when the agent file loads (``check``, ``check_all``), rendered leniently at
run time (a missing field renders empty). A template with no Jinja syntax at all (most
``say`` lines, plain replies, constant arguments) is its own text: it skips Jinja, which
would build a context for it and produce the same text.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, Undefined, nodes
from jinja2.environment import TemplateExpression
from jinja2.sandbox import ImmutableSandboxedEnvironment

from hostcall.models.base import ModelError
from hostcall.protocol.codes import RunErrorCode

_env = ImmutableSandboxedEnvironment(autoescape=False, undefined=StrictUndefined)
_lenient = ImmutableSandboxedEnvironment(autoescape=False)


def check(template: str, where: str) -> None:
    """``ValueError`` naming ``where`` if ``template`` does not compile."""
    try:
        _env.parse(template)
    except TemplateError as exc:
        raise ValueError(f"{where}: template does not compile: {exc}") from None


def check_all(value: Any, where: str) -> None:
    """``check`` every string in ``value`` (an arguments object, its lists and objects)."""
    if isinstance(value, str):
        check(value, where)
    elif isinstance(value, list):
        for v in value:
            check_all(v, where)
    elif isinstance(value, dict):
        for v in value.values():
            check_all(v, where)


def _plain(template: str) -> str | None:
    """What Jinja renders ``template`` as, if it holds no Jinja syntax; else None.

    Every tag, expression and comment opens with ``{`` (no line statements are set). Jinja
    turns ``\\r\\n`` and ``\\r`` into ``\\n`` (a template holding ``\\r`` goes through it)
    and drops one trailing newline (``keep_trailing_newline`` is off): done here too."""
    if "{" in template or "\r" in template:
        return None
    return template[:-1] if template.endswith("\n") else template


@functools.lru_cache(maxsize=2048)
def _template(source: str) -> Template:
    return _lenient.from_string(source)


def render(template: str, context: dict[str, Any], where: str) -> str:
    """Lenient at run time: a reply that names a missing field renders it empty rather than
    failing the run (templates were compiled, and checked against the output schemas, at
    load). Anything else that goes wrong is a ``ModelError`` naming the rule, for the
    operator's log; it never becomes text a visitor reads."""
    plain = _plain(template)
    if plain is not None:
        return plain.strip()
    try:
        return _template(template).render(context).strip()
    except Exception as exc:  # TemplateError, or TypeError etc. from a filter on odd data
        detail = f"{where} failed: {type(exc).__name__}: {exc}"
        raise ModelError(detail, code=RunErrorCode.REPLY_TEMPLATE_FAILED) from exc


def rendering(template: str, context: dict[str, Any], where: str) -> Iterator[str]:
    """``render``'s text, unstripped, in the pieces Jinja produces it as it renders."""
    plain = _plain(template)
    if plain is not None:
        yield plain
        return
    try:
        yield from _template(template).generate(context)
    except Exception as exc:  # as render's
        detail = f"{where} failed: {type(exc).__name__}: {exc}"
        raise ModelError(detail, code=RunErrorCode.REPLY_TEMPLATE_FAILED) from exc


def render_value(value: Any, context: dict[str, Any], where: str) -> Any:
    """Render every string in ``value``; keys whose string renders empty are left out. A
    string that is exactly one expression (``"{{ count | int }}"``) keeps its value's JSON
    type: a tool with a number parameter gets a number, not the number's text."""
    if isinstance(value, str):
        expression = _expression(value)
        if expression is not None:
            return _evaluate(expression, value, context, where)
        return render(value, context, where)
    if isinstance(value, list):
        return [render_value(v, context, where) for v in value]
    if isinstance(value, dict):
        rendered = {k: render_value(v, context, where) for k, v in value.items()}
        return {k: v for k, v in rendered.items() if v != ""}
    return value


@functools.lru_cache(maxsize=2048)
def _expression(template: str) -> TemplateExpression | None:
    """The expression of a template that is one ``{{ … }}`` and nothing else (spaces
    around it aside), compiled; None for any other template."""
    source = template.strip()
    if _plain(source) is not None:
        return None
    try:
        body = _lenient.parse(source).body
    except TemplateError:
        return None
    if not (
        len(body) == 1
        and isinstance(body[0], nodes.Output)
        and len(body[0].nodes) == 1
        and not isinstance(body[0].nodes[0], nodes.TemplateData)
    ):
        return None
    inner = _ONE_EXPRESSION.fullmatch(source)
    if inner is None:
        return None
    try:
        return _lenient.compile_expression(inner.group(1), undefined_to_none=False)
    except TemplateError:
        return None


def _evaluate(
    expression: TemplateExpression, template: str, context: dict[str, Any], where: str
) -> Any:
    """The expression's value if it is JSON (a string, number, boolean, null, or lists and
    objects of them); anything else (a date, an undefined name) as the template's text."""
    try:
        value = expression(**context)
    except Exception as exc:  # as render's
        detail = f"{where} failed: {type(exc).__name__}: {exc}"
        raise ModelError(detail, code=RunErrorCode.REPLY_TEMPLATE_FAILED) from exc
    typed = _json_value(value)
    return render(template, context, where) if typed is _NOT_JSON else typed


_NOT_JSON = object()
_ONE_EXPRESSION = re.compile(r"\{\{-?(.*?)-?\}\}", re.DOTALL)


def _json_value(value: Any) -> Any:
    if isinstance(value, Undefined):
        return _NOT_JSON
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NOT_JSON
    if isinstance(value, str):
        return str(value).strip()  # a Markup too; stripped as a rendered string is
    if isinstance(value, list | tuple):
        items = [_json_value(v) for v in value]
        return _NOT_JSON if any(v is _NOT_JSON for v in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        found = {k: _json_value(v) for k, v in value.items()}
        return _NOT_JSON if any(v is _NOT_JSON for v in found.values()) else found
    return _NOT_JSON
