"""What the widget offers a visitor to click, and when it asks for a rating: an agent file's
``suggestions`` block (starter prompts per locale on an empty chat, follow-ups after a reply
that matches a rule) and its ``rating`` block (a five-point question after a handoff ends,
or after a reply that ends the conversation). docs/agents.md has the format.

Both are the widget's to show (widget/suggest.js): the server checks them when it loads the
file, and hands them to the widget's config as they are. A rule matches a reply that
contains one of its ``when`` phrases, ignoring case: the same test in any language, with no
regular expression for a file's author to get wrong or a page to run slowly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The widget's languages (widget/locale-xx.js): a prompt in another would never be shown.
LOCALES = ("en", "fr", "es", "ja")
# A few short prompts: they are buttons on a phone's width, not a menu.
MAX_STARTERS = 4
MAX_OFFERS = 3
MAX_PROMPT_CHARS = 80
MAX_RULES = 20
MAX_PHRASES = 10
MAX_PHRASE_CHARS = 60

SUGGESTION_KEYS = {"starters", "follow_ups"}
RULE_KEYS = {"when", "offer"}
RATING_KEYS = {"after_handoff", "when"}


@dataclass(frozen=True, slots=True)
class FollowUp:
    """Prompts (per locale) offered after a reply containing one of ``when``."""

    when: tuple[str, ...]
    offer: dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Suggestions:
    starters: dict[str, tuple[str, ...]]
    follow_ups: tuple[FollowUp, ...] = ()


@dataclass(frozen=True, slots=True)
class RatingAsk:
    """When the widget asks for the conversation's rating (once: the server keeps the first)."""

    after_handoff: bool = True
    when: tuple[str, ...] = ()


def _texts(value: Any, where: str, most: int, chars: int) -> tuple[tuple[str, ...], list[str]]:
    """A list of 1 to ``most`` distinct non-blank strings of at most ``chars`` characters."""
    if not isinstance(value, list) or not 1 <= len(value) <= most:
        return (), [f"{where} must be a list of 1 to {most} strings"]
    problems: list[str] = []
    for text in value:
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{where}: {text!r} is not a non-blank string")
        elif len(text) > chars:
            problems.append(f"{where}: {text[:40]!r}… is {len(text)} characters; at most {chars}")
    if not problems and len(set(value)) < len(value):
        problems.append(f"{where}: the same text is given twice")
    return (tuple(t.strip() for t in value), problems) if not problems else ((), problems)


def _per_locale(value: Any, where: str, most: int) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    if not isinstance(value, dict) or not value:
        return {}, [f"{where} must be an object of prompts per locale ({', '.join(LOCALES)})"]
    found: dict[str, tuple[str, ...]] = {}
    problems: list[str] = []
    for locale, prompts in value.items():
        if locale not in LOCALES:
            problems.append(f"{where}: unknown locale {locale!r}; one of {', '.join(LOCALES)}")
            continue
        texts, bad = _texts(prompts, f"{where}.{locale}", most, MAX_PROMPT_CHARS)
        problems += bad
        found[locale] = texts
    return found, problems


def parse_suggestions(data: Any, where: str) -> tuple[Suggestions | None, list[str]]:
    """An agent file's ``suggestions`` block, or every problem with it."""
    where = f"{where}: suggestions"
    if not isinstance(data, dict):
        return None, [f"{where} must be an object (starters, follow_ups)"]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(data) - SUGGESTION_KEYS)]
    starters: dict[str, tuple[str, ...]] = {}
    if "starters" in data:
        starters, bad = _per_locale(data["starters"], f"{where}.starters", MAX_STARTERS)
        problems += bad
    rules: list[FollowUp] = []
    raw_rules = data.get("follow_ups", [])
    if not isinstance(raw_rules, list) or len(raw_rules) > MAX_RULES:
        problems.append(f"{where}.follow_ups must be a list of at most {MAX_RULES} rules")
        raw_rules = []
    for index, raw in enumerate(raw_rules):
        at = f"{where}.follow_ups #{index + 1}"
        if not isinstance(raw, dict):
            problems.append(f"{at} must be an object (when, offer)")
            continue
        problems += [f"{at}: unknown key {k!r}" for k in sorted(set(raw) - RULE_KEYS)]
        when, bad = _texts(raw.get("when"), f"{at}.when", MAX_PHRASES, MAX_PHRASE_CHARS)
        offer, worse = _per_locale(raw.get("offer"), f"{at}.offer", MAX_OFFERS)
        problems += bad + worse
        rules.append(FollowUp(when, offer))
    if not starters and not rules and not problems:
        problems.append(f"{where} has neither starters nor follow_ups")
    if problems:
        return None, problems
    return Suggestions(starters, tuple(rules)), []


def parse_rating(data: Any, where: str) -> tuple[RatingAsk | None, list[str]]:
    """An agent file's ``rating`` block (``{}``: after a handoff only)."""
    where = f"{where}: rating"
    if not isinstance(data, dict):
        return None, [f"{where} must be an object (after_handoff, when)"]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(data) - RATING_KEYS)]
    after_handoff = data.get("after_handoff", True)
    if not isinstance(after_handoff, bool):
        problems.append(f"{where}.after_handoff must be true or false")
    when: tuple[str, ...] = ()
    if "when" in data:
        when, bad = _texts(data["when"], f"{where}.when", MAX_PHRASES, MAX_PHRASE_CHARS)
        problems += bad
    if not problems and after_handoff is False and not when:
        problems.append(f"{where} asks never: set after_handoff or when")
    if problems:
        return None, problems
    return RatingAsk(after_handoff, when), []


def widget_config(suggestions: Suggestions | None, rating: RatingAsk | None) -> Any:
    """The widget's ``suggest`` config; None (null) for an agent with neither block, whose
    widget then loads nothing of this."""
    if suggestions is None and rating is None:
        return None
    config: dict[str, Any] = {}
    if suggestions is not None:
        config["starters"] = {k: list(v) for k, v in suggestions.starters.items()}
        config["followUps"] = [
            {"when": list(r.when), "offer": {k: list(v) for k, v in r.offer.items()}}
            for r in suggestions.follow_ups
        ]
    if rating is not None:
        config["rating"] = {"afterHandoff": rating.after_handoff, "when": list(rating.when)}
    return config
