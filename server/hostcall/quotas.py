"""Rate and cost limits per client address, per conversation, per person and per agent.

Counting is in fixed windows (hostcall/counters.py). On PostgreSQL it is in the database, so
every process of a cluster counts in the same place and a limit of N is N across all of
them. On SQLite (one process) it is the ``limits`` library's, in memory; a
``limits_storage`` other than ``memory://`` (``redis://``...) is used as given.

Model tokens are the provider's count of each step (hostcall/runs/usage.py), or where it
gives none an estimate at 4 characters per token of what the model was sent and wrote,
counted after each step. A budget
that is spent refuses the *next* message; a step in flight is never cut. A conversation's
spent budget ends it (``conversation_limit_reached``: start a new one); the agent's daily
budget asks to come back later (``token_budget_exhausted``, ``Retry-After``).

A person (an identified visitor: hostcall/visitors/identity.py) has daily limits of their own, on
messages and model tokens, counted across every conversation, browser and device of theirs,
beside the per-address ones (which a person on a shared network would otherwise share).
Their counters' ids are ``("msg-person" | "tok-person", agent, sub)``.

Limits are set per agent in its file, under ``"limits"`` (docs/agents.md); 0 turns one off.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerMinute

from hostcall.counters import Counters
from hostcall.errors import Conflict, TooManyRequests
from hostcall.notices import CONVERSATION_LIMIT
from hostcall.protocol.codes import ErrorCode

CHARS_PER_TOKEN = 4
# "Per conversation" is counted over a window as long as a session lives (30 days).
CONVERSATION_WINDOW_DAYS = 30


@dataclass(frozen=True, slots=True)
class Limits:
    conversations_per_minute_per_client: int = 30
    conversations_per_minute: int = 600
    messages_per_minute_per_client: int = 60
    messages_per_minute_per_conversation: int = 20
    # A visitor's ratings of replies (feedback): a few a minute is a person thinking twice.
    ratings_per_minute_per_client: int = 60
    ratings_per_minute_per_conversation: int = 10
    # Files uploaded (hostcall/attachments/): a message carries 10 at most.
    uploads_per_minute_per_client: int = 60
    uploads_per_minute_per_conversation: int = 30
    model_tokens_per_conversation: int = 200_000
    model_tokens_per_day: int = 5_000_000
    # An identified person's, across all their conversations (none for anonymous visitors).
    messages_per_day_per_person: int = 500
    model_tokens_per_day_per_person: int = 1_000_000


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
    def __init__(self, counters: Counters, *, clock: Callable[[], float] = time.time) -> None:
        self._counters = counters
        self.clock = clock

    # ---- checks at the doors ---------------------------------------------------------------

    async def new_conversation(self, agent_id: str, limits: Limits, client: str) -> None:
        await self._hit(
            (RateLimitItemPerMinute(limits.conversations_per_minute_per_client), "conv-client",
             agent_id, client, "conversations from this address"),
            (RateLimitItemPerMinute(limits.conversations_per_minute), "conv-agent", agent_id,
             "", "conversations with this agent"),
        )  # fmt: skip

    async def new_message(
        self,
        agent_id: str,
        limits: Limits,
        conversation_id: str,
        client: str,
        *,
        person: str | None = None,
    ) -> None:
        await self._spent(agent_id, limits, conversation_id, person)
        checks: list[tuple[RateLimitItem, str, str, str, str]] = [
            (RateLimitItemPerMinute(limits.messages_per_minute_per_client), "msg-client",
             agent_id, client, "messages from this address"),
            (RateLimitItemPerMinute(limits.messages_per_minute_per_conversation), "msg-conv",
             agent_id, conversation_id, "messages in this conversation"),
        ]  # fmt: skip
        if person is not None:
            checks.append((RateLimitItemPerDay(limits.messages_per_day_per_person),
                           "msg-person", agent_id, person, "messages from you"))  # fmt: skip
        await self._hit(*checks)

    async def new_rating(
        self, agent_id: str, limits: Limits, conversation_id: str, client: str
    ) -> None:
        """A rating of a reply, counted whether or not it changes the one stored: each is a
        write, and a script sending thousands must meet a limit like any other."""
        await self._hit(
            (RateLimitItemPerMinute(limits.ratings_per_minute_per_client), "rate-client",
             agent_id, client, "ratings from this address"),
            (RateLimitItemPerMinute(limits.ratings_per_minute_per_conversation), "rate-conv",
             agent_id, conversation_id, "ratings in this conversation"),
        )  # fmt: skip

    async def new_upload(
        self, agent_id: str, limits: Limits, conversation_id: str, client: str
    ) -> None:
        """An upload, counted before its body is read: refused or kept, each one costs the
        server the reading and the checking."""
        await self._hit(
            (RateLimitItemPerMinute(limits.uploads_per_minute_per_client), "up-client",
             agent_id, client, "uploads from this address"),
            (RateLimitItemPerMinute(limits.uploads_per_minute_per_conversation), "up-conv",
             agent_id, conversation_id, "uploads in this conversation"),
        )  # fmt: skip

    # ---- a person's data erased -------------------------------------------------------------

    async def forget(
        self,
        agent_id: str,
        limits: Limits,
        *,
        conversation_ids: Sequence[str] = (),
        person: str | None = None,
    ) -> None:
        """Drop the counters that name these conversations or this person (their data
        erased: hostcall/visitors/personal_data.py). In the store they went with the erasure's rows;
        in memory (or the operator's storage) they go here."""
        items: list[tuple[RateLimitItem, str, str]] = []
        for cid in conversation_ids:
            items.append((RateLimitItemPerMinute(limits.messages_per_minute_per_conversation),
                          "msg-conv", cid))  # fmt: skip
            items.append((RateLimitItemPerMinute(limits.ratings_per_minute_per_conversation),
                          "rate-conv", cid))  # fmt: skip
            items.append((RateLimitItemPerMinute(limits.uploads_per_minute_per_conversation),
                          "up-conv", cid))  # fmt: skip
            items += [i for i in self._token_items(limits, agent_id, cid, None) if i[2] == cid]
        if person is not None:
            items.append((RateLimitItemPerDay(limits.messages_per_day_per_person),
                          "msg-person", person))  # fmt: skip
            items += [i for i in self._token_items(limits, agent_id, "", person) if i[2] == person]
        for item, scope, key in items:
            if item.amount:
                await self._counters.clear(item, (scope, agent_id, key))

    # ---- model tokens ----------------------------------------------------------------------

    async def record_tokens(
        self,
        agent_id: str,
        limits: Limits,
        conversation_id: str,
        tokens: int,
        *,
        person: str | None = None,
    ) -> None:
        for item, scope, key in self._token_items(limits, agent_id, conversation_id, person):
            if item.amount:
                await self._counters.add(item, (scope, agent_id, key), max(1, tokens))

    async def _spent(
        self, agent_id: str, limits: Limits, conversation_id: str, person: str | None
    ) -> None:
        for item, scope, key in self._token_items(limits, agent_id, conversation_id, person):
            ids = (scope, agent_id, key)
            if item.amount and not await self._counters.has_room(item, ids):
                if scope == "tok-person":
                    raise TooManyRequests(
                        f"your model token budget with this agent today ({item.amount}) is spent",
                        code=ErrorCode.TOKEN_BUDGET_EXHAUSTED,
                        retry_after=await self._retry_after(item, ids),
                    )
                if key:
                    # Its window is as long as a session lives: "retry in 30 days" would
                    # be no answer. A new conversation has a budget of its own.
                    raise Conflict(
                        CONVERSATION_LIMIT,
                        code=ErrorCode.CONVERSATION_LIMIT_REACHED,
                        limit=item.amount,
                    )
                raise TooManyRequests(
                    f"the model token budget of this agent today ({item.amount}) is spent",
                    code=ErrorCode.TOKEN_BUDGET_EXHAUSTED,
                    retry_after=await self._retry_after(item, ids),
                )

    @staticmethod
    def _token_items(
        limits: Limits, agent_id: str, conversation_id: str, person: str | None
    ) -> list[tuple[RateLimitItem, str, str]]:
        items: list[tuple[RateLimitItem, str, str]] = [
            (RateLimitItemPerDay(limits.model_tokens_per_conversation,
                                 CONVERSATION_WINDOW_DAYS), "tok-conv", conversation_id),
            (RateLimitItemPerDay(limits.model_tokens_per_day), "tok-agent", ""),
        ]  # fmt: skip
        if person is not None:
            items.append((RateLimitItemPerDay(limits.model_tokens_per_day_per_person),
                          "tok-person", person))  # fmt: skip
        return items

    # ---- plumbing --------------------------------------------------------------------------

    async def _hit(self, *checks: tuple[RateLimitItem, str, str, str, str]) -> None:
        """Count one in each limit that is on, or in none if one of them is full."""
        on = [(item, (scope, agent_id, key), what)
              for item, scope, agent_id, key, what in checks if item.amount]  # fmt: skip
        full = await self._counters.take([(item, ids) for item, ids, _ in on])
        if full is not None:
            item, ids, what = on[full]
            raise TooManyRequests(
                f"too many {what}: the limit is {item.amount} per {item.GRANULARITY.name}",
                retry_after=await self._retry_after(item, ids),
            )

    async def _retry_after(self, item: RateLimitItem, ids: tuple[str, ...]) -> int:
        reset = await self._counters.reset_at(item, ids)
        return max(1, math.ceil(reset - self.clock()))


def estimate_tokens(texts: Mapping[str, str] | list[str]) -> int:
    chars = sum(len(t) for t in (texts.values() if isinstance(texts, Mapping) else texts))
    return math.ceil(chars / CHARS_PER_TOKEN)
