"""The usage page (operators): model tokens and their cost per agent, per day and per
conversation, over the last N days (hostcall/runs/usage.py records them, a row per step)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from hostcall.console.accounts import Role
from hostcall.console.render import page
from hostcall.console.session import guarded, operator_of
from hostcall.protocol.numbers import whole_number
from hostcall.runtime import runtime_of
from hostcall.store.console_records import UsageTotal

DEFAULT_DAYS = 30
MAX_DAYS = 366
TOP_CONVERSATIONS = 50


@dataclass
class AgentTotal:
    agent_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    steps: int = 0
    estimated: int = 0

    def add(self, total: UsageTotal) -> None:
        self.input_tokens += total.input_tokens
        self.output_tokens += total.output_tokens
        self.steps += total.steps
        self.estimated += total.estimated
        if total.cost is not None:
            self.cost = (self.cost or 0.0) + total.cost


def per_agent(days: list[UsageTotal]) -> list[AgentTotal]:
    agents: dict[str, AgentTotal] = {}
    for day in days:
        agents.setdefault(day.agent_id, AgentTotal(day.agent_id)).add(day)
    return [agents[a] for a in sorted(agents)]


def money(cost: float | None) -> str:
    """A cost as the page shows it ("" when unpriced: the template says so in words)."""
    if cost is None:
        return ""
    # A conversation with a small model costs a fraction of a cent: six places show it.
    return f"{cost:.6f}" if cost < 1 else f"{cost:,.2f}"


def _days(request: Request) -> int:
    raw = request.query_params.get("days", str(DEFAULT_DAYS))
    return whole_number(raw, "days", low=1, high=MAX_DAYS)


@guarded(Role.OPERATOR)
async def usage_page(request: Request) -> Response:
    days = _days(request)
    runtime = runtime_of(request)
    since = runtime.clock() - days * 86400
    usage = runtime.services.usage
    by_day = await usage.by_day(time.strftime("%Y-%m-%d", time.gmtime(since)))
    conversations = await usage.by_conversation(since, TOP_CONVERSATIONS)
    return page(
        request,
        "usage.html",
        operator_of(request),
        days=days,
        agents=per_agent(by_day),
        by_day=by_day,
        conversations=conversations,
        money=money,
    )
