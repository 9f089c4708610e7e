"""Rate and cost limits per client address, per conversation and per agent (issue 7, item 3).

Counting is the ``limits`` library's (fixed windows): a well-kept implementation with
storages for one process (``memory://``, the default) and several (``redis://``,
``memcached://``, ``mongodb://``), chosen by ``Settings.limits_storage``. With
``--workers N`` on memory storage each worker counts on its own, so a client gets up to N
times the limit; point ``limits_storage`` at a shared storage to count once.

Model tokens are estimated at 4 characters per token (the adapters do not report usage
yet): the prompt the model was sent plus what it wrote, counted after each step. A budget
that is spent refuses the *next* message; a step in flight is never cut.

Limits are set per agent in its file, under ``"limits"`` (docs/agents.md); 0 turns one off.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from server.errors import TooManyRequests

CHARS_PER_TOKEN = 4
# "Per conversation" is counted over a window as long as a session lives (30 days).
CONVERSATION_WINDOW_DAYS = 30


@dataclass(frozen=True, slots=True)
class Limits:
    conversations_per_minute_per_client: int = 30
    conversations_per_minute: int = 600
    messages_per_minute_per_client: int = 60
    messages_per_minute_per_conversation: int = 20
    model_tokens_per_conversation: int = 200_000
    model_tokens_per_day: int = 5_000_000


DEFAULT_LIMITS = Limits()
LIMIT_KEYS = frozenset(f.name for f in fields(Limits))


def parse_limits(data: Any, where: str) -> tuple[Limits, list[str]]:
    """An agent file's ``limits`` object: the defaults, with what it sets."""
    if data is None:
        return DEFAULT_LIMITS, []
    if not isinstance(data, dict):
        return DEFAULT_LIMITS, [f"{where}: 'limits' must be an object"]
    problems = [f"{where}: limits: unknown key {k!r}" for k in sorted(set(data) - LIMIT_KEYS)]
    values: dict[str, int] = {}
    for key in sorted(set(data) & LIMIT_KEYS):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{where}: limits: {key!r} must be a whole number, 0 or more")
        else:
            values[key] = value
    return replace(DEFAULT_LIMITS, **values), problems


class Quotas:
    def __init__(self, storage_uri: str = "memory://") -> None:
        self._limiter = FixedWindowRateLimiter(storage_from_string(storage_uri))

    # ---- checks at the doors ---------------------------------------------------------------

    def new_conversation(self, agent_id: str, limits: Limits, client: str) -> None:
        self._hit(
            (RateLimitItemPerMinute(limits.conversations_per_minute_per_client), "conv-client",
             agent_id, client, "conversations from this address"),
            (RateLimitItemPerMinute(limits.conversations_per_minute), "conv-agent", agent_id,
             "", "conversations with this agent"),
        )  # fmt: skip

    def new_message(self, agent_id: str, limits: Limits, conversation_id: str, client: str) -> None:
        self._spent(agent_id, limits, conversation_id)
        self._hit(
            (RateLimitItemPerMinute(limits.messages_per_minute_per_client), "msg-client",
             agent_id, client, "messages from this address"),
            (RateLimitItemPerMinute(limits.messages_per_minute_per_conversation), "msg-conv",
             agent_id, conversation_id, "messages in this conversation"),
        )  # fmt: skip

    # ---- model tokens ----------------------------------------------------------------------

    def record_tokens(
        self, agent_id: str, limits: Limits, conversation_id: str, tokens: int
    ) -> None:
        for item, scope, key in self._token_items(limits, agent_id, conversation_id):
            if item.amount:
                self._limiter.hit(item, scope, agent_id, key, cost=max(1, tokens))

    def _spent(self, agent_id: str, limits: Limits, conversation_id: str) -> None:
        for item, scope, key in self._token_items(limits, agent_id, conversation_id):
            if item.amount and not self._limiter.test(item, scope, agent_id, key):
                what = "this conversation" if key else "this agent today"
                raise TooManyRequests(
                    f"the model token budget of {what} ({item.amount}) is spent",
                    code="token_budget_exhausted",
                    retry_after=self._retry_after(item, scope, agent_id, key),
                )

    @staticmethod
    def _token_items(
        limits: Limits, agent_id: str, conversation_id: str
    ) -> list[tuple[RateLimitItem, str, str]]:
        return [
            (RateLimitItemPerDay(limits.model_tokens_per_conversation,
                                 CONVERSATION_WINDOW_DAYS), "tok-conv", conversation_id),
            (RateLimitItemPerDay(limits.model_tokens_per_day), "tok-agent", ""),
        ]  # fmt: skip

    # ---- plumbing --------------------------------------------------------------------------

    def _hit(self, *checks: tuple[RateLimitItem, str, str, str, str]) -> None:
        for item, scope, agent_id, key, what in checks:
            if item.amount and not self._limiter.test(item, scope, agent_id, key):
                raise TooManyRequests(
                    f"too many {what}: the limit is {item.amount} per minute",
                    retry_after=self._retry_after(item, scope, agent_id, key),
                )
        for item, scope, agent_id, key, _ in checks:
            if item.amount:
                self._limiter.hit(item, scope, agent_id, key)

    def _retry_after(self, item: RateLimitItem, *ids: str) -> int:
        reset = self._limiter.get_window_stats(item, *ids).reset_time
        return max(1, math.ceil(reset - time.time()))


def estimate_tokens(texts: Mapping[str, str] | list[str]) -> int:
    chars = sum(len(t) for t in (texts.values() if isinstance(texts, Mapping) else texts))
    return math.ceil(chars / CHARS_PER_TOKEN)
