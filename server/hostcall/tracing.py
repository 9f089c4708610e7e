"""OpenTelemetry traces of runs, their steps, model calls and tool calls (docs/operations.md).

Off unless an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``hostcall serve --otlp-endpoint``) and
``OTEL_SDK_DISABLED`` is not ``true``; off, ``span`` hands back one shared empty context and
nothing else runs. On, spans go to the endpoint over OTLP/HTTP in batches, from a thread of
the SDK's: a collector that is slow or down never holds a request. Nor does it hold a
SIGTERM: stopping waits ``SHUTDOWN_SECONDS`` at most for the last batch, then drops it.

A run is not one coroutine: it waits for its calls holding nothing, and its steps may run in
different processes. So its trace and span ids are derived from the run's id, and every
step, model call and tool call of the run is a child of that span context wherever it
happens; the run's own span is recorded when the run ends, from its start to its end.
Every span carries ``gen_ai.conversation.id``. Attribute names follow OpenTelemetry's
GenAI semantic conventions (``gen_ai.*``); what they have no name for is ``hostcall.*``.

Nothing a visitor wrote, a model said or a tool returned goes into an attribute unless
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true`` (the conventions' own
switch): then tool calls carry their arguments and results, and a step the page's context
it read (``hostcall.page_context``).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span

Attributes = Mapping[str, str | int | float | bool | list[str]]

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# How long stopping waits for the spans still batched. The SDK's own bound is a 30 s flush of
# exports that each retry for 10 s: behind a collector that never answers (or refuses), a
# SIGTERM took 14-26 s, past many orchestrators' grace period, to send nothing.
SHUTDOWN_SECONDS = 2.0

log = logging.getLogger("hostcall.tracing")
_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()
# The ids the next span takes, when it is a run's own (see _RunIds).
_forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "hostcall_forced_span_ids", default=None
)


def traces_endpoint(environ: Mapping[str, str]) -> str | None:
    """Where spans go, from the standard variables; None: tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return base.rstrip("/") + "/v1/traces" if base else None


def run_ids(run_id: str) -> tuple[int, int]:
    """A run's trace id and span id, the same in every process."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


class Tracing:
    """This process's tracer, or none (``Tracing.off()``)."""

    def __init__(self, provider: TracerProvider | None = None, *, content: bool = False) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("hostcall") if provider is not None else None
        self.content = content

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @classmethod
    def build(cls, environ: Mapping[str, str], exporter: SpanExporter | None = None) -> Tracing:
        """From the environment; ``exporter`` (a test's): spans go there as each ends."""
        content = environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"
        endpoint = traces_endpoint(environ)
        if exporter is None and endpoint is None:
            return cls.off()
        # Imported only when tracing is on: the SDK costs an idle server nothing.
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        name = environ.get("OTEL_SERVICE_NAME", "").strip() or "hostcall"
        provider = TracerProvider(
            resource=Resource.create({"service.name": name}),
            id_generator=_run_id_generator(),
            shutdown_on_exit=False,  # ``shutdown`` does it, with a bound the SDK's has not
        )
        if exporter is not None:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        return cls(provider, content=content)

    @property
    def on(self) -> bool:
        return self._tracer is not None

    def add_content(self, span: Span | None, name: str, value: str) -> None:
        """Set an attribute that holds the visitor's data (the page's context) on ``span``:
        only when the operator opted in to content, as for tools' arguments and results."""
        if span is not None and self.content:
            span.set_attribute(name, value)

    def span(
        self, name: str, attributes: Attributes, *, run_id: str | None = None
    ) -> contextlib.AbstractContextManager[Span | None]:
        """A span around a block (the current one's child, or ``run_id``'s run's); None
        when tracing is off. An exception leaving the block marks it as an error."""
        if self._tracer is None:
            return _NO_SPAN
        return self._open(name, attributes, run_id)

    @contextlib.contextmanager
    def _open(self, name: str, attributes: Attributes, run_id: str | None) -> Iterator[Span]:
        assert self._tracer is not None
        from opentelemetry.trace import StatusCode

        # Exceptions marked here, not by the SDK: a block cancelled (a visitor's Stop
        # cancels the step's task) did not fail, and its span must not say it did.
        with self._tracer.start_as_current_span(
            name,
            context=_run_context(run_id),
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
                raise

    def record(
        self,
        name: str,
        attributes: Attributes,
        *,
        run_id: str | None,
        start: float,
        end: float,
        error: str | None = None,
        own: bool = False,
        client: bool = False,
    ) -> None:
        """A span that happened from ``start`` to ``end`` (seconds since the epoch), as a
        child of ``run_id``'s run (None: of the current span), or (``own``) as the run's
        span itself, a root. ``error``: its ``error.type``, and an error status.
        ``client``: a call to another service (a model), a CLIENT span."""
        if self._tracer is None:
            return
        from opentelemetry.context import Context
        from opentelemetry.trace import SpanKind, StatusCode

        assert run_id is not None or not own, "a run's own span needs its id"
        token = _forced_ids.set(run_ids(run_id)) if run_id is not None and own else None
        try:
            # Do not "fix" ``Context()`` into None: None is the current context, and a run
            # that ends inside its step (a failure) would make its span the child of its own
            # child, a cycle no trace viewer can draw.
            span = self._tracer.start_span(
                name,
                context=Context() if own else _run_context(run_id),
                kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
                attributes=attributes,
                start_time=int(start * 1e9),
            )
        finally:
            if token is not None:
                _forced_ids.reset(token)
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(StatusCode.ERROR, error)
        span.end(end_time=int(max(end, start) * 1e9))

    def shutdown(self, timeout: float = SHUTDOWN_SECONDS) -> None:
        """Send what is still batched, and stop, waiting ``timeout`` seconds at most: what the
        collector has not taken by then is dropped (the SDK's thread that sends it is a
        daemon, and the process exits without it)."""
        if self._provider is None:
            return
        # The SDK's shutdown takes no timeout: it runs in a thread of its own, waited on
        # for ``timeout`` only.
        stopping = threading.Thread(
            target=self._provider.shutdown, name="hostcall-tracing-shutdown", daemon=True
        )
        stopping.start()
        stopping.join(timeout)
        if stopping.is_alive():
            log.warning(
                "traces: the collector did not take the last spans within %g s; they are dropped",
                timeout,
            )


def _run_context(run_id: str | None) -> Any:
    if run_id is None:
        return None  # the current context: a span inside another is its child
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    trace_id, span_id = run_ids(run_id)
    sampled = TraceFlags(TraceFlags.SAMPLED)
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=sampled)
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _run_id_generator() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _RunIds(RandomIdGenerator):
        """Random ids, except for a run's own span: the ids its children already use."""

        def generate_span_id(self) -> int:
            forced = _forced_ids.get()
            return forced[1] if forced is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            forced = _forced_ids.get()
            return forced[0] if forced is not None else super().generate_trace_id()

    return _RunIds()
