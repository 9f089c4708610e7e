"""The application's use cases, one method each, between the web's routes and the run
engine: a route parses its request, calls one method here and writes its response. A
method does a use case's writes and what they leave to do (a run to resume, a server-side
call to start, calls to move off a surface), so no route has to remember it.

The runtime holds one ``Services`` (hostcall/runtime.py); a route reaches it with
``services_of(request)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hostcall.engine import Engine
from hostcall.quotas import Quotas
from hostcall.services.calls import CallService
from hostcall.services.conversations import ConversationService
from hostcall.services.feedback import FeedbackService
from hostcall.services.handoffs import HandoffService
from hostcall.services.logs import LogService
from hostcall.services.runs import RunService
from hostcall.services.snapshots import SnapshotService
from hostcall.services.surfaces import SurfaceService

__all__ = [
    "CallService",
    "ConversationService",
    "FeedbackService",
    "HandoffService",
    "LogService",
    "RunService",
    "Services",
    "SnapshotService",
    "SurfaceService",
]


@dataclass(frozen=True, slots=True)
class Services:
    calls: CallService
    conversations: ConversationService
    feedback: FeedbackService
    handoffs: HandoffService
    logs: LogService
    runs: RunService
    snapshots: SnapshotService
    surfaces: SurfaceService

    @classmethod
    def build(cls, engine: Engine, quotas: Quotas, *, clock: Callable[[], float]) -> Services:
        runs = RunService(engine, clock=clock)
        return cls(
            calls=CallService(engine, clock=clock),
            conversations=ConversationService(engine, quotas, clock=clock),
            feedback=FeedbackService(engine, clock=clock),
            handoffs=HandoffService(engine, runs, clock=clock),
            logs=LogService(engine),
            runs=runs,
            snapshots=SnapshotService(engine),
            surfaces=SurfaceService(engine),
        )
