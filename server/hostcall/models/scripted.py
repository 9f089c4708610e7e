"""The scripted model: deterministic rules instead of a language model.

A rule matches the latest user message with a regular expression (and, with
``attachment``, a file it carries: its type and name, each a glob such as ``image/*`` or
``*.csv``), may say something, may
call one tool with arguments rendered from the match, and renders its reply from the tool's
result (or error). Templates run in Jinja2's sandbox (hostcall/models/templates.py).

It is the embedded default: the demo runs offline and QA tests are exact.
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import json
import re
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hostcall import patterns, strictjson
from hostcall.models import templates
from hostcall.models.base import (
    Attached,
    Message,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
    ToolDescriptor,
)

RULE_KEYS = {
    "match", "say", "tool", "arguments", "raw_arguments", "calls", "reply", "error_reply",
    "pace_seconds", "reasoning", "attachment",
}  # fmt: skip
ATTACHMENT_KEYS = ("type", "name")
MAX_PACE = 10.0
CONFIG_KEYS = {"kind", "rules", "fallback"}
DEFAULT_FALLBACK = "Sorry, I can't help with that yet."
# Read by visitors: no code, no message (it may quote an upstream body or an exception).
DEFAULT_ERROR_REPLY = "I couldn't finish that. Please try again."

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: patterns.Pattern
    say: str = ""
    # Each call: (tool, arguments template, raw arguments or None). Several make one turn
    # with parallel tool calls.
    calls: tuple[tuple[str, Any, str | None], ...] = ()
    reply: str = ""
    error_reply: str = DEFAULT_ERROR_REPLY
    number: int = 0  # 1-based, as ``hostcall check`` and the operator log name it
    # Seconds between streamed chunks of its text: a slow model, for demos and for tests of
    # what happens mid-answer (a restart, a reload).
    pace: float = 0.0
    # What the model streams as its reasoning before its first answer (plain text, not a
    # template): as a reasoning model's provider sends ``reasoning_content``.
    reasoning: str = ""
    # Globs a file of the message must match (``type``, ``name``); None: any message.
    attachment: tuple[tuple[str, str], ...] | None = None

    def where(self, key: str) -> str:
        return f"rule #{self.number} {key!r}"


class ScriptedModel:
    def __init__(self, rules: list[Rule], fallback: str = DEFAULT_FALLBACK) -> None:
        self.rules = rules
        self.fallback = fallback

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, tools: Collection[str] | None = None
    ) -> ScriptedModel:
        """Build from an agent file's ``model`` object; ``ValueError`` says what is wrong."""
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ValueError(f"unknown key {sorted(unknown)[0]!r} for a scripted model")
        raw_rules = config.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ValueError("'rules' must be a list")
        rules, problems = [], []
        for index, raw in enumerate(raw_rules):
            try:
                rules.append(_parse_rule(raw, index + 1, tools))
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            # Every bad rule at once: fixing a file one error per restart is no fun.
            raise ValueError(*problems)
        fallback = config.get("fallback", DEFAULT_FALLBACK)
        if not isinstance(fallback, str):
            raise ValueError("'fallback' must be a string")
        templates.check(fallback, "fallback")
        return cls(rules, fallback)

    async def stream(
        self, messages: list[Message], tools: list[ToolDescriptor], *, instructions: str = ""
    ) -> AsyncIterator[ModelEvent]:
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last_user is None:
            yield TextDelta(self.fallback)
            return
        text = messages[last_user].text
        files = [_file(a) for a in messages[last_user].attachments]
        for rule in self.rules:
            found = rule.pattern.search(text)
            if found is None:
                continue
            attached = _attached(rule, files)
            if rule.attachment is not None and attached is None:
                continue
            # An optional group that did not match is "", not None (which renders "None").
            groups = dict(found.groups)
            # ``context``: the page's, sent with the message (a group of that name wins,
            # as it did before pages had one). ``attachments``: the message's files;
            # ``attachment``: the one the rule matched.
            page = dict(messages[last_user].context or {})
            context: dict[str, Any] = {"context": page, "attachments": files,
                                       "attachment": attached, "match": groups,
                                       **groups}  # fmt: skip
            answers = [m for m in messages[last_user + 1 :] if m.role == "tool"]
            if rule.reasoning and not answers:
                for n, chunk in enumerate(_chunks(rule.reasoning)):
                    if n and rule.pace:
                        await asyncio.sleep(rule.pace)
                    yield ReasoningDelta(chunk)
            if not rule.calls:
                for n, chunk in enumerate(
                    _chunks(templates.render(rule.reply, context, rule.where("reply")))
                ):
                    if n and rule.pace:
                        await asyncio.sleep(rule.pace)
                    yield TextDelta(chunk)
            elif not answers:
                if rule.say:
                    for chunk in _chunks(templates.render(rule.say, context, rule.where("say"))):
                        yield TextDelta(chunk)
                for tool, arguments, raw in rule.calls:
                    yield ToolCallRequest(
                        call_id=f"call_{next(_ids)}",
                        name=tool,
                        arguments=raw
                        if raw is not None
                        else json.dumps(
                            templates.render_value(
                                arguments or {}, context, rule.where("arguments")
                            )
                        ),
                    )
            else:
                # `result`/`error` are the last answer's; `results` lists every answer's.
                context["results"] = results = [_parse(m.text) for m in answers]
                for chunk in _reply(rule, results[-1], context):
                    yield TextDelta(chunk)
            return
        yield TextDelta(self.fallback)


def _file(attached: Attached) -> dict[str, Any]:
    """A file as a rule's templates read it: name, type, size, and its text if the agent
    gives its type as text."""
    shown: dict[str, Any] = {"name": attached.name, "type": attached.type, "size": attached.size}
    return shown | ({"text": attached.text} if attached.text is not None else {})


def _attached(rule: Rule, files: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first of the message's files the rule's ``attachment`` globs match; None."""
    for file in files:
        if rule.attachment is not None and all(
            fnmatch.fnmatchcase(str(file[key]).lower(), glob.lower())
            for key, glob in rule.attachment
        ):
            return file
    return None


def _parse(content: str) -> Any:
    try:
        return strictjson.loads(content)
    except strictjson.StrictJSONError:
        return content


def _reply(rule: Rule, value: Any, context: dict[str, Any]) -> Iterator[str]:
    """The reply to the last answer, ``value`` (parsed once, for ``results`` too), in
    chunks. A plain reply's chunks come as Jinja renders it: the first words go out before
    the rest is rendered (the resumed run's first text). A template that fails
    midway then fails the run after its first chunks, which stay, marked interrupted."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("error"), dict):
        error = {**context, "error": value["error"]}
        return iter(_chunks(templates.render(rule.error_reply, error, rule.where("error_reply"))))
    if isinstance(value, dict) and set(value) == {"untrusted", "result"}:
        # A page's result marked untrusted (hostcall/policies.py): a rule reads the result.
        value = value["result"]
    simulated = isinstance(value, dict) and value.get("simulated") is True and "result" in value
    if not simulated:
        context = {**context, "result": value, "simulated": False}
        return _streamed(templates.rendering(rule.reply, context, rule.where("reply")))
    context = {**context, "result": value["result"], "simulated": True}
    reply = templates.render(rule.reply, context, rule.where("reply"))
    return iter(_chunks(f"(Simulated) {reply}"))


_WORDS = re.compile(r"\s*\S+\s*")


def _chunks(text: str, words: int = 4) -> list[str]:
    # Stream a few words at a time, like a real model, so the widget's streaming path is
    # exercised by the demo and by QA tests.
    pieces = _WORDS.findall(text)
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)] or [""]


def _streamed(pieces: Iterable[str], words: int = 4) -> Iterator[str]:
    """``_chunks("".join(pieces).strip(), words)``, each chunk as soon as the next word
    has begun (its last word, and the spaces after it, are complete then)."""
    pending = ""
    sent = False
    for piece in pieces:
        pending += piece
        if not sent:
            pending = pending.lstrip()
        found = _WORDS.findall(pending)
        while len(found) > words:
            yield "".join(found[:words])
            sent = True
            found = found[words:]
            pending = "".join(found)
    if pending.strip() or not sent:
        yield from _chunks(pending.strip(), words)


def _parse_rule(raw: Any, number: int, tools: Collection[str] | None) -> Rule:
    where = f"rule #{number}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object")
    unknown = set(raw) - RULE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    attachment = _parse_attachment(raw.get("attachment"), where) if "attachment" in raw else None
    if not isinstance(raw.get("match", "" if attachment else None), str):
        raise ValueError(f"{where}: 'match' (a regular expression) is required")
    try:
        # RE2, linear time: the text is a visitor's message.
        pattern = patterns.compile(raw.get("match", ""), capture=True)
    except patterns.PatternError as exc:
        raise ValueError(f"{where}: 'match' {exc}") from None
    if "tool" in raw and "calls" in raw:
        raise ValueError(f"{where}: use 'tool' for one call or 'calls' for several, not both")
    singles = [{k: raw[k] for k in ("tool", "arguments", "raw_arguments") if k in raw}]
    raw_calls = raw.get("calls", singles if "tool" in raw else [])
    if not isinstance(raw_calls, list):
        raise ValueError(f"{where}: 'calls' must be a list of {{'tool', 'arguments'}}")
    calls = tuple(_parse_call(c, where, tools) for c in raw_calls)
    pace = raw.get("pace_seconds", 0)
    if isinstance(pace, bool) or not isinstance(pace, int | float) or not 0 <= pace <= MAX_PACE:
        raise ValueError(f"{where}: 'pace_seconds' must be a number from 0 to {MAX_PACE:g}")
    if not isinstance(raw.get("reasoning", ""), str):
        raise ValueError(f"{where}: 'reasoning' must be a string")
    for key in ("say", "reply", "error_reply"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise ValueError(f"{where}: {key!r} must be a string")
            templates.check(raw[key], f"{where}: {key!r}")
    return Rule(
        pattern=pattern,
        say=raw.get("say", ""),
        calls=calls,
        reply=raw.get("reply", ""),
        error_reply=raw.get("error_reply", DEFAULT_ERROR_REPLY),
        number=number,
        pace=float(pace),
        reasoning=raw.get("reasoning", ""),
        attachment=attachment,
    )


def _parse_attachment(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{"type": glob, "name": glob}``, one or both: what a message's file must match."""
    if (
        not isinstance(raw, dict)
        or not raw
        or set(raw) - set(ATTACHMENT_KEYS)
        or not all(isinstance(v, str) and v for v in raw.values())
    ):
        raise ValueError(
            f"{where}: 'attachment' is {{'type', 'name'}}, one or both, each a glob"
            " ('image/*', '*.csv')"
        )
    return tuple((k, raw[k]) for k in ATTACHMENT_KEYS if k in raw)


def _parse_call(raw: Any, where: str, tools: Collection[str] | None) -> tuple[str, Any, str | None]:
    if not isinstance(raw, dict) or set(raw) - {"tool", "arguments", "raw_arguments"}:
        raise ValueError(f"{where}: a call is {{'tool', 'arguments' or 'raw_arguments'}}")
    tool = raw.get("tool")
    if not isinstance(tool, str):
        raise ValueError(f"{where}: 'tool' must be a tool name")
    # raw_arguments exists to script a misbehaving model (conformance tests); such a call
    # may also name a tool the agent lacks, to exercise unknown_tool.
    raw_args = raw.get("raw_arguments")
    if raw_args is not None and not isinstance(raw_args, str):
        raise ValueError(f"{where}: 'raw_arguments' must be a string")
    if tools is not None and tool not in tools and raw_args is None:
        raise ValueError(f"{where}: calls tool {tool!r}, which the agent does not define")
    templates.check_all(raw.get("arguments"), f"{where}: 'arguments'")
    return tool, raw.get("arguments"), raw_args
