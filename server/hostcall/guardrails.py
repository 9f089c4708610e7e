"""Guardrails: per-tool rules over a call's input or output.

A rule is ``{"name", "on": "input" | "output", "when": [conditions], "action", "fields"}``;
every condition must hold (``when`` may also be one condition). A condition reads one field
by JSON Pointer (``/amount``, ``/tasks/0/title``) and compares it:

    equals, not_equals, contains, regex, gt, gte, lt, lte, exists

``regex`` is RE2's syntax, matched in linear time (hostcall/patterns.py).

A condition of an input rule may read the signed-in visitor the run acts for instead, with a
path under ``$user``: ``$user/sub``, ``$user/claims/plan`` (docs/identity.md). It is the
verified identity token's, never the model's; with nobody signed in it is missing (so
``not_equals`` holds: a rule "block unless plan is pro" blocks anonymous visitors too).

Actions: ``block`` (the call never runs, or its output never reaches the model:
``blocked_by_guardrail``), ``require_approval`` (input only), ``redact`` (output only: the
listed fields become "[redacted]" before the model sees them; the ledger keeps the full
output) and ``log``. Every match is recorded on the call and in the event stream.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hostcall import patterns
from hostcall.visitors.visitor import Visitor

OPERATORS = ("equals", "not_equals", "contains", "regex", "gt", "gte", "lt", "lte", "exists")
ACTIONS = ("block", "require_approval", "redact", "log")
RULE_KEYS = {"name", "on", "when", "action", "fields"}
REDACTED = "[redacted]"
USER = "$user"
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Condition:
    path: str
    op: str
    value: Any = None

    def holds(self, document: Any, visitor: Visitor | None = None) -> bool:
        if self.path.startswith(USER):
            found = _MISSING if visitor is None else resolve(visitor.view(), self.path[len(USER) :])
        else:
            found = resolve(document, self.path)
        if self.op == "exists":
            return (found is not _MISSING) == (self.value is not False)
        if found is _MISSING:
            return self.op == "not_equals"
        if self.op == "equals":
            return bool(found == self.value)
        if self.op == "not_equals":
            return bool(found != self.value)
        if self.op == "contains":
            if isinstance(found, str):
                return isinstance(self.value, str) and self.value.lower() in found.lower()
            return isinstance(found, list) and self.value in found
        if self.op == "regex":
            # RE2, linear time: the text is a call's input or output, which a visitor steers.
            return isinstance(found, str) and patterns.search(self.value, found)
        if isinstance(found, bool) or not isinstance(found, int | float):
            return False
        return {
            "gt": found > self.value,
            "gte": found >= self.value,
            "lt": found < self.value,
            "lte": found <= self.value,
        }[self.op]


@dataclass(frozen=True, slots=True)
class Guardrail:
    name: str
    on: str
    when: tuple[Condition, ...]
    action: str
    fields: tuple[str, ...] = ()

    def matches(self, document: Any, visitor: Visitor | None = None) -> bool:
        return all(c.holds(document, visitor) for c in self.when)


@dataclass(frozen=True, slots=True)
class Hit:
    rule: str
    action: str
    on: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "action": self.action, "on": self.on}


def resolve(document: Any, pointer: str) -> Any:
    """The value at a JSON Pointer (RFC 6901), or ``_MISSING``."""
    if pointer in ("", "/"):
        return document
    current = document
    for raw in pointer.lstrip("/").split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def evaluate(
    rules: Sequence[Guardrail], on: str, document: Any, *, visitor: Visitor | None = None
) -> list[Hit]:
    """``visitor``: the signed-in visitor the run acts for, read by ``$user`` paths."""
    return [Hit(r.name, r.action, on) for r in rules if r.on == on and r.matches(document, visitor)]


def redact(rules: Sequence[Guardrail], hits: Sequence[Hit], document: Any) -> Any:
    names = {h.rule for h in hits if h.action == "redact"}
    if not names:
        return document
    result = copy.deepcopy(document)
    for rule in rules:
        if rule.name in names:
            for pointer in rule.fields:
                _replace(result, pointer)
    return result


def _replace(document: Any, pointer: str) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]
    parent = resolve(document, "/" + "/".join(pointer.lstrip("/").split("/")[:-1]))
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        parent[last] = REDACTED
    elif isinstance(parent, list):
        if last == "*":
            for i in range(len(parent)):
                parent[i] = REDACTED
        elif last.isdigit() and int(last) < len(parent):
            parent[int(last)] = REDACTED


def parse_guardrails(raw: Any) -> tuple[Guardrail, ...]:
    """Parse a tool's ``guardrails`` list; ``ValueError`` names the rule and the problem."""
    if not isinstance(raw, list):
        raise ValueError("'guardrails' must be a list of rules")
    rules: list[Guardrail] = []
    for index, item in enumerate(raw):
        where = f"guardrail #{index + 1}"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be a JSON object")
        if isinstance(item.get("name"), str):
            where = f"guardrail {item['name']!r}"
        unknown = set(item) - RULE_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown key {min(unknown)!r}")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}: 'name' is required (the model is told which rule fired)")
        on = item.get("on", "input")
        if on not in ("input", "output"):
            raise ValueError(f"{where}: 'on' must be 'input' or 'output'")
        action = item.get("action")
        if action not in ACTIONS:
            raise ValueError(f"{where}: 'action' must be one of {', '.join(ACTIONS)}")
        if action == "require_approval" and on != "input":
            raise ValueError(f"{where}: 'require_approval' applies to inputs only")
        if action == "redact" and on != "output":
            raise ValueError(f"{where}: 'redact' applies to outputs only")
        fields = item.get("fields", [])
        if action == "redact" and (
            not isinstance(fields, list) or not fields or not all(_pointer(f) for f in fields)
        ):
            raise ValueError(f"{where}: 'redact' needs 'fields', a list of JSON Pointers")
        when_raw = item.get("when", [])
        when_list = [when_raw] if isinstance(when_raw, dict) else when_raw
        if not isinstance(when_list, list) or not when_list:
            raise ValueError(f"{where}: 'when' must be a condition or a non-empty list of them")
        conditions = tuple(_condition(c, where) for c in when_list)
        if on == "output" and any(c.path.startswith(USER) for c in conditions):
            raise ValueError(f"{where}: '$user' conditions apply to input rules only")
        rules.append(Guardrail(name, on, conditions, action, tuple(fields)))
    names = [r.name for r in rules]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ValueError(f"guardrail {duplicate!r}: duplicate name")
    return tuple(rules)


def _pointer(value: Any) -> bool:
    return isinstance(value, str) and (value == "" or value.startswith("/"))


def _condition(raw: Any, where: str) -> Condition:
    if not isinstance(raw, dict) or set(raw) - {"path", "op", "value"}:
        raise ValueError(f"{where}: a condition is {{'path', 'op', 'value'}}")
    path, op, value = raw.get("path"), raw.get("op"), raw.get("value")
    user_path = isinstance(path, str) and path.startswith(USER) and _pointer(path[len(USER) :])
    if not (_pointer(path) or user_path):
        raise ValueError(
            f"{where}: 'path' must be a JSON Pointer such as '/amount', or one under $user "
            "such as '$user/claims/plan'"
        )
    if op not in OPERATORS:
        raise ValueError(f"{where}: 'op' must be one of {', '.join(OPERATORS)} (got {op!r})")
    if op == "regex" and (problem := patterns.problem(value)):
        raise ValueError(f"{where}: 'value' {problem}")
    if op in ("gt", "gte", "lt", "lte") and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        raise ValueError(f"{where}: {op!r} compares with a number")
    assert isinstance(path, str) and isinstance(op, str)
    return Condition(path, op, value)
