"""Check a scripted model's reply templates against its tools' output schemas, when the agent
is loaded (``hostcall check``), instead of when a visitor chats.

Two checks per rule that calls a tool and has a ``reply``:

- every ``result.a.b`` / ``result['a']`` the template reads must be a property of the tool's
  output schema, and not a name Jinja2 resolves to a dict method first (``result.items`` is
  ``dict.items``, whatever the schema says: write ``result['items']``);
- the reply (and ``error_reply``) must render on an example result built from the schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from hostcall import patterns
from hostcall.errors import ToolErrorCode

_env = ImmutableSandboxedEnvironment(autoescape=False)
#: Names Jinja2's ``x.name`` finds on a dict before looking up the key.
_DICT_ATTRS = frozenset(name for name in dir(dict) if not name.startswith("_"))
_EXAMPLE_ERROR = {
    "code": ToolErrorCode.CLIENT_ERROR,
    "message": "example error",
    "reason": "example",
}


def reply_problems(
    config: Any, output_schemas: Mapping[str, Any], *, other: Mapping[str, Any] | None = None
) -> list[str]:
    """Problems of a ``model`` object's reply templates; ``[]`` for other models.
    ``other``: the output schema of a tool not in ``output_schemas`` (one an MCP server's
    ``"all"`` will bring); None: such a rule is not checked here."""
    if not isinstance(config, Mapping) or config.get("kind") != "scripted":
        return []
    rules = config.get("rules")
    problems: list[str] = []
    for number, rule in enumerate(rules if isinstance(rules, list) else [], start=1):
        if not isinstance(rule, Mapping):
            continue  # reported by the model's own checks
        tools = _called_tools(rule)
        schema = output_schemas.get(tools[-1], other) if tools else None
        if not isinstance(schema, Mapping):
            continue
        where = f"rule #{number}"
        found = []
        for key in ("reply", "error_reply"):
            template = rule.get(key)
            if isinstance(template, str):
                found += _template_problems(template, f"{where}: {key!r}", tools[-1], schema)
        # The example render would only repeat a field mistake in other words.
        problems += found or _render_problems(rule, where, tools[-1], schema)
    return problems


def _called_tools(rule: Mapping[str, Any]) -> list[str]:
    calls = rule.get("calls", [rule] if "tool" in rule else [])
    if not isinstance(calls, list):
        return []
    return [c["tool"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("tool"), str)]


def _template_problems(
    template: str, where: str, tool: str, schema: Mapping[str, Any]
) -> list[str]:
    try:
        tree = _env.parse(template)
    except Exception:
        return []  # a syntax error is reported by the model's own checks
    problems = []
    for path in _result_paths(tree):
        problem = _resolve(path, schema)
        if problem:
            shown = "result" + "".join(
                f".{p}" if isinstance(p, _Attr) else f"[{p!r}]" for p in path
            )
            problems.append(f"{where}: reads {shown}: {problem} (tool {tool!r})")
    # One report per distinct mistake, in template order.
    return list(dict.fromkeys(problems))


def _result_paths(tree: nodes.Node) -> Iterator[list[str | int]]:
    """Each outermost ``result.x[...]...`` chain, as its keys; attribute steps marked."""
    inner: set[int] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        child = getattr(node, "node", None)
        if isinstance(child, (nodes.Getattr, nodes.Getitem)):
            inner.add(id(child))
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if id(node) in inner:
            continue
        path: list[Any] = []
        current: Any = node
        while isinstance(current, (nodes.Getattr, nodes.Getitem)):
            if isinstance(current, nodes.Getattr):
                path.append(_Attr(current.attr))
            elif isinstance(current.arg, nodes.Const) and isinstance(current.arg.value, (str, int)):
                path.append(current.arg.value)
            else:
                path = []  # a computed key: nothing to say from here on
            current = current.node
        if isinstance(current, nodes.Name) and current.name == "result" and path:
            yield list(reversed(path))


class _Attr(str):
    """A key reached with ``.name`` (which Jinja2 tries as an attribute first)."""


def _resolve(path: list[str | int], schema: Mapping[str, Any]) -> str | None:
    current: Any = schema
    for key in path:
        if not isinstance(current, Mapping):
            return None
        if isinstance(key, int):
            current = current.get("items")
            continue
        properties = current.get("properties")
        if isinstance(key, _Attr) and key in _DICT_ATTRS:
            return (
                f"'.{key}' is the dictionary's {key}() method in a template, not a field; "
                f"write ['{key}']"
            )
        if not isinstance(properties, Mapping):
            return None  # free-form: nothing to check against
        if key not in properties:
            # Even where additionalProperties allows it: a reply should read declared fields.
            known = ", ".join(sorted(properties)) or "none"
            return f"the output schema has no property {key!r} here (it has: {known})"
        current = properties[key]
    return None


# ----------------------------------------------------------------------------- example render


def _render_problems(
    rule: Mapping[str, Any], where: str, tool: str, schema: Mapping[str, Any]
) -> list[str]:
    try:
        groups = patterns.compile(str(rule.get("match", "")), capture=True).group_names
    except patterns.PatternError:
        return []  # the model's own checks say why
    context: dict[str, Any] = {name: "example" for name in groups}
    context["match"] = dict(context)
    context.setdefault("context", {})  # the page's context: any key may be missing
    result = example(schema)
    problems = []
    cases = (
        ("reply", {"result": result, "results": [result], "simulated": False}),
        ("error_reply", {"error": _EXAMPLE_ERROR, "results": [{"error": _EXAMPLE_ERROR}]}),
    )
    for key, extra in cases:
        template = rule.get(key)
        if not isinstance(template, str):
            continue
        try:
            compiled = _env.from_string(template)
        except Exception:
            continue  # a syntax error is reported by the model's own checks
        try:
            compiled.render({**context, **extra})
        except Exception as exc:  # whatever a visitor would have met at run time
            problems.append(
                f"{where}: {key!r} fails on an example result of {tool!r}: "
                f"{type(exc).__name__}: {exc}"
            )
    return problems


def example(schema: Any, depth: int = 0) -> Any:
    """A plausible value for ``schema``: every property, one item per array."""
    if not isinstance(schema, Mapping) or depth > 8:
        return "example"
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return (
            {k: example(v, depth + 1) for k, v in props.items()}
            if isinstance(props, Mapping)
            else {}
        )
    if kind == "array":
        return [example(schema.get("items", {}), depth + 1)]
    return {"integer": 1, "number": 1.5, "boolean": True, "null": None}.get(str(kind), "example")
