"""A model step's tokens: the provider's count where it gives one (``StepEnd``), else an
estimate (hostcall/quotas.py ``estimate_tokens``), saying which. Each step's count is
priced (hostcall/pricing.py), stored (the console's totals), counted against the agent's
limits, and told to the metrics and the traces; so is the end of a run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from hostcall import metrics
from hostcall.agents import Agent
from hostcall.models.base import Message, Model, ModelError, ModelEvent, StepEnd, ToolDescriptor
from hostcall.pricing import model_name
from hostcall.quotas import Quotas, estimate_tokens
from hostcall.store.console_records import UsageRecord
from hostcall.store.interfaces import ModelUsage
from hostcall.store.records import Run, RunStatus
from hostcall.tracing import Tracing

log = logging.getLogger("hostcall.tracing")

PROVIDER = "provider"
ESTIMATE = "estimate"
_BEGAN_KEPT = 10_000


@dataclass(frozen=True, slots=True)
class StepUsage:
    record: UsageRecord
    agent: Agent
    # The person the run acts for (their own daily token budget), None for an anonymous one.
    person: str | None = None


class Usage:
    def __init__(
        self, store: ModelUsage, quotas: Quotas, tracing: Tracing, *, clock: Callable[[], float]
    ) -> None:
        self.store = store
        self.quotas = quotas
        self.tracing = tracing
        self.clock = clock
        # When each run's first step began in this process, for its span's start: a run
        # that fails or is stopped before its first step is counted has no usage to read
        # it from. Bounded: a run whose end another process records leaves its entry here.
        self._began: dict[str, float] = {}

    def first_step(self, run_id: str, began: float) -> None:
        """A run's first step begins (its span starts then)."""
        if not self.tracing.on:
            return
        if len(self._began) >= _BEGAN_KEPT:
            del self._began[next(iter(self._began))]  # the oldest
        self._began.setdefault(run_id, began)

    def measure(self, run: Run, agent: Agent, *, began: float) -> Measure:
        """``began``: when the step began (its usage's ``at``; the run's span starts at its
        first step's)."""
        return Measure(self, run, agent, began)

    async def count(self, spent: StepUsage) -> None:
        """The limits count what the step really used (hostcall/quotas.py)."""
        r = spent.record
        agent = spent.agent
        await self.quotas.record_tokens(
            agent.id,
            agent.limits,
            r.conversation_id,
            r.input_tokens + r.output_tokens,
            person=spent.person,
        )

    async def run_ended(self, run: Run, ending: RunStatus, *, error: str | None) -> None:
        """Count the run's end (``ending``: finished, failed or stopped); with tracing on,
        record its span (its steps' totals read back: the steps may have run in other
        processes)."""
        agent_id = str(run.agent.get("id", "")) if isinstance(run.agent, dict) else ""
        outcome = metrics.run_outcome_label(ending)
        metrics.child(metrics.RUNS, metrics.agent_label(agent_id), outcome).inc()
        if not self.tracing.on:
            return
        now = self.clock()
        began = self._began.pop(run.id, None)
        try:
            total = await self.store.usage_of_run(run.conversation_id, run.id)
        except Exception as exc:  # whatever the store's driver raises
            # The run has ended whatever its span says: a database gone now costs the
            # span its totals, never the run its end.
            log.warning("run %s: its span goes without totals: %s", run.id, exc)
            total = None
        attributes: dict[str, str | int | float] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": agent_id,
            "gen_ai.agent.name": str(run.agent.get("name", "")),
            "gen_ai.conversation.id": run.conversation_id,
            "hostcall.run.id": run.id,
            "hostcall.run.outcome": outcome,
        }
        if total is not None:
            attributes |= {
                "gen_ai.usage.input_tokens": total.input_tokens,
                "gen_ai.usage.output_tokens": total.output_tokens,
                "hostcall.steps": total.steps,
            }
            if total.cost is not None:
                attributes["hostcall.usage.cost"] = total.cost
        starts = [at for at in (began, total.first_at if total else None) if at is not None]
        start = min(starts, default=now)
        # A Stop is no error: the span keeps an unset status, its outcome says ``stopped``.
        failed = error if ending is RunStatus.FAILED else None
        self.tracing.record(f"invoke_agent {agent_id}", attributes, run_id=run.id, start=start,
                            end=now, error=failed, own=True)  # fmt: skip


class Measure:
    """One step's model call: timed, its ``StepEnd`` kept, its failure counted."""

    def __init__(self, usage: Usage, run: Run, agent: Agent, began: float) -> None:
        self.usage = usage
        self.run = run
        self.agent = agent
        self.model = model_name(agent.model)
        self.label = metrics.model_label(self.model)  # a model no loaded agent runs: "other"
        self.began = began
        self.started = usage.clock()
        self._perf = time.perf_counter()

    async def stream(
        self, model: Model, history: list[Message], tools: list[ToolDescriptor]
    ) -> AsyncIterator[ModelEvent]:
        self.started = self.usage.clock()
        self._perf = time.perf_counter()
        answered = False
        try:
            async for item in model.stream(history, tools, instructions=self.agent.instructions):
                answered = isinstance(item, StepEnd)
                yield item
        except ModelError as exc:
            seconds = time.perf_counter() - self._perf
            metrics.child(metrics.MODEL_SECONDS, self.label, "error").observe(seconds)
            self._trace(seconds, None, None, error=exc.code)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            # A Stop cut the call short (its step cancelled, here or at the reader's yield):
            # the call happened, and did not fail. Once answered, ``spent`` traces it.
            if not answered:
                self._trace(time.perf_counter() - self._perf, None, None)
            raise

    def spent(
        self,
        end: StepEnd | None,
        history: Sequence[Message],
        written: Sequence[str],
        *,
        cut_off: bool = False,
    ) -> StepUsage:
        """The step's usage: the provider's count, or an estimate of what was sent (the
        instructions and the history) and written (text and tool-call arguments).
        ``cut_off``: the model failed after it had begun to answer (the provider read the
        request and wrote that much, and bills it): estimated, and its time already told to
        the metrics as an error's."""
        seconds = time.perf_counter() - self._perf
        if end is not None and end.input_tokens is not None and end.output_tokens is not None:
            read, wrote, source = end.input_tokens, end.output_tokens, PROVIDER
        else:
            read = estimate_tokens([self.agent.instructions, *(m.text for m in history)])
            wrote = estimate_tokens(list(written))
            source = ESTIMATE
        price = self.agent.prices.get(self.model)
        record = UsageRecord(
            run_id=self.run.id,
            conversation_id=self.run.conversation_id,
            agent_id=self.agent.id,
            step=self.run.step + 1,
            model=self.model,
            input_tokens=read,
            output_tokens=wrote,
            source=source,
            cost=price.cost(read, wrote) if price is not None else None,
            at=self.began,
            seconds=seconds,
        )
        if not cut_off:
            metrics.child(metrics.MODEL_SECONDS, self.label, "ok").observe(seconds)
        metrics.child(metrics.MODEL_TOKENS, self.label, "input", source).inc(read)
        metrics.child(metrics.MODEL_TOKENS, self.label, "output", source).inc(wrote)
        if not cut_off:  # (a cut-off call's span was recorded with its error)
            self._trace(seconds, record, end)
        person = self.run.visitor.sub if self.run.visitor else None
        return StepUsage(record, self.agent, person)

    def _trace(
        self,
        seconds: float,
        record: UsageRecord | None,
        end: StepEnd | None,
        *,
        error: str | None = None,
    ) -> None:
        """The model call's span, a CLIENT span as the GenAI conventions make it. ``record``:
        the model answered (its reply's model and id, when it named them)."""
        tracing = self.usage.tracing
        if not tracing.on:
            return
        kind = str(self.agent.model.get("kind", ""))
        attributes: dict[str, str | int | float | list[str]] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai" if kind == "openai" else f"hostcall.{kind}",
            "gen_ai.request.model": self.model,
            "gen_ai.agent.id": self.agent.id,
            "gen_ai.agent.name": self.agent.name,
            "gen_ai.conversation.id": self.run.conversation_id,
        }
        base_url = self.agent.model.get("base_url")
        if isinstance(base_url, str):  # a model behind HTTP (the scripted one has none)
            parts = urlsplit(base_url)
            if parts.hostname:
                attributes["server.address"] = parts.hostname
                attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        if record is not None:
            answered = end.response_model if end is not None else None
            attributes["gen_ai.response.model"] = answered or self.model
        if end is not None and end.response_id is not None:
            attributes["gen_ai.response.id"] = end.response_id
        if end is not None and end.finish_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [end.finish_reason]
        if record is not None:
            attributes |= {
                "gen_ai.usage.input_tokens": record.input_tokens,
                "gen_ai.usage.output_tokens": record.output_tokens,
                "hostcall.usage.source": record.source,
            }
        # A child of the step's span, which is current here.
        tracing.record(f"chat {self.model}", attributes, run_id=None, start=self.started,
                       end=self.started + seconds, error=error, client=True)  # fmt: skip
