"""An OTLP/HTTP trace receiver on loopback: what a collector is sent, decoded with the
protocol's own protobuf messages (the bytes on the wire, not the SDK's objects)."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.requests import Request
from starlette.responses import Response


class Receiver:
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        self.lock = threading.Lock()

    async def traces(self, request: Request) -> Response:
        body = ExportTraceServiceRequest()
        body.ParseFromString(await request.body())
        with self.lock:
            self.requests.append(body)
            self.content_types.append(request.headers.get("content-type", ""))
        return Response(b"", media_type="application/x-protobuf")

    def spans(self) -> list[tuple[str, str, Any]]:
        """(service name, span name, span) of everything received."""
        found = []
        for request in self.requests:
            for resource in request.resource_spans:
                service = next(a.value.string_value for a in resource.resource.attributes
                               if a.key == "service.name")  # fmt: skip
                for scope in resource.scope_spans:
                    found += [(service, span.name, span) for span in scope.spans]
        return found


def attributes(span: Any) -> dict[str, Any]:
    """A received span's attributes as Python values (an array as a list)."""
    found: dict[str, Any] = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        if kind == "array_value":
            found[a.key] = [getattr(v, v.WhichOneof("value")) for v in a.value.array_value.values]
        else:
            found[a.key] = getattr(a.value, kind)
    return found
