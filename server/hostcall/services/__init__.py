"""The application's use cases, one method each, between the web's routes (the widget's
API and the console's) and the run engine: a route parses its request, calls one method
here and writes its response. A method does a use case's writes and what they leave to do
(a run to resume, a server-side call to start, calls to move off a surface, an operator's
audit entry), so no route has to remember it. Each service takes the slice of the store it
uses (its own protocol, hostcall/store/interfaces.py); no route reaches the store.

The runtime holds one ``Services``, and builds it: handing each service its slice of the
store is the composition root's job (hostcall/runtime.py, ``_services``); a route reaches
it with ``services_of(request)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostcall.services.agent_versions import AgentVersionService
from hostcall.services.apps import AppService
from hostcall.services.attachments import AttachmentService
from hostcall.services.audit import AuditService
from hostcall.services.branches import BranchService
from hostcall.services.calls import CallService
from hostcall.services.conversations import ConversationService
from hostcall.services.feedback import FeedbackService
from hostcall.services.handoffs import HandoffService
from hostcall.services.inspection import InspectionService
from hostcall.services.logs import LogService
from hostcall.services.operators import OperatorService
from hostcall.services.people import PeopleService
from hostcall.services.runs import RunService
from hostcall.services.snapshots import SnapshotService
from hostcall.services.surfaces import SurfaceService
from hostcall.services.usage import UsageService

__all__ = [
    "AgentVersionService",
    "AppService",
    "AttachmentService",
    "AuditService",
    "CallService",
    "ConversationService",
    "FeedbackService",
    "HandoffService",
    "InspectionService",
    "LogService",
    "OperatorService",
    "PeopleService",
    "RunService",
    "Services",
    "SnapshotService",
    "SurfaceService",
    "UsageService",
]


@dataclass(frozen=True, slots=True)
class Services:
    agent_versions: AgentVersionService
    attachments: AttachmentService
    apps: AppService
    audit: AuditService
    branches: BranchService
    calls: CallService
    conversations: ConversationService
    feedback: FeedbackService
    handoffs: HandoffService
    inspection: InspectionService
    logs: LogService
    operators: OperatorService
    people: PeopleService
    runs: RunService
    snapshots: SnapshotService
    surfaces: SurfaceService
    usage: UsageService
