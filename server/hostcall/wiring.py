"""How the runtime's parts are put together: the call ledger on one core of views and
moves, and the use cases the routes call, each on its own slice of the store."""

from __future__ import annotations

from collections.abc import Callable

from hostcall.apps.origin import AppsOrigin
from hostcall.apps.references import AppReferences
from hostcall.calls.answers import Answers
from hostcall.calls.moves import CallMoves
from hostcall.calls.proposals import Proposals
from hostcall.calls.rehoming import Rehoming
from hostcall.calls.views import CallViews
from hostcall.engine import Engine
from hostcall.handoff import HumanHandoff
from hostcall.journal import Journal
from hostcall.leases import Leases
from hostcall.ledger import Ledger
from hostcall.quotas import Quotas
from hostcall.runs.agents import RunAgents
from hostcall.services import (
    AgentVersionService,
    AppService,
    AttachmentService,
    AuditService,
    BranchService,
    CallService,
    ConversationService,
    FeedbackService,
    HandoffService,
    InspectionService,
    LogService,
    OperatorService,
    PeopleService,
    RunService,
    Services,
    SnapshotService,
    SurfaceService,
    UsageService,
)
from hostcall.store import Store
from hostcall.tokens import Tokens
from hostcall.tracing import Tracing

AGENT_IDS_KEPT = 10_000
# How long /healthz waits for the store's write probe: a health check must answer fast,
# and a healthy database answers in milliseconds.
HEALTH_PROBE_SECONDS = 0.8


def build_ledger(
    journal: Journal,
    store: Store,
    tokens: Tokens,
    leases: Leases,
    agents: RunAgents,
    *,
    clock: Callable[[], float],
    surface_grace: float,
    tracing: Tracing,
    apps: AppsOrigin | None,
) -> Ledger:
    """The call ledger's parts, on one core of views and moves."""
    views = CallViews(tokens, agents, apps=AppReferences(tokens, apps, store=store, agents=agents))
    moves = CallMoves(
        journal,
        views,
        leases,
        store=store,
        clock=clock,
        surface_grace=surface_grace,
        tracing=tracing,
    )
    return Ledger(
        views=views,
        moves=moves,
        proposals=Proposals(moves, agents, store=store),
        answers=Answers(moves, agents, store=store),
        rehoming=Rehoming(moves, store=store),
    )


def build_services(
    engine: Engine,
    store: Store,
    quotas: Quotas,
    *,
    clock: Callable[[], float],
    apps: AppsOrigin | None,
) -> Services:
    """The use cases, each handed its own slice of ``store`` (typed by the service: the
    whole store stops here)."""
    handoff = HumanHandoff(engine.journal, store=store, clock=clock)
    runs = RunService(engine, handoff, store=store, clock=clock)
    return Services(
        agent_versions=AgentVersionService(store),
        attachments=AttachmentService(store, clock=clock),
        apps=AppService(engine, apps, store=store, clock=clock),
        audit=AuditService(store),
        branches=BranchService(engine, store=store),
        calls=CallService(engine, store=store, clock=clock),
        conversations=ConversationService(engine, quotas, store=store, clock=clock),
        feedback=FeedbackService(store, clock=clock),
        handoffs=HandoffService(runs, handoff, store=store, clock=clock),
        inspection=InspectionService(engine, store=store),
        logs=LogService(store),
        operators=OperatorService(store),
        people=PeopleService(engine, quotas, store=store, clock=clock),
        runs=runs,
        snapshots=SnapshotService(engine, store=store),
        surfaces=SurfaceService(engine, store=store),
        usage=UsageService(store),
    )
