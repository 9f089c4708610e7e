"""A conversation as its widget loads it (docs/protocol.md ``GET /api/conversations/{id}``):
what a surface needs to draw the thread and go on from the stream's next event."""

from __future__ import annotations

from typing import Protocol

from hostcall.attachments.wire import shown_all
from hostcall.engine import Engine
from hostcall.protocol.responses import (
    Snapshot,
    SnapshotMessage,
    SnapshotRating,
    SnapshotRun,
    SurfaceView,
)
from hostcall.store.interfaces import (
    Calls,
    Events,
    Feedbacks,
    Handoffs,
    Messages,
    Runs,
    Surfaces,
)
from hostcall.store.records import Conversation, RunStatus
from hostcall.transcript import open_messages, reasonings


class _SnapshotStore(Calls, Events, Feedbacks, Handoffs, Messages, Runs, Surfaces, Protocol):
    """What a snapshot reads: the thread, its run, calls, surfaces, handoff and ratings."""


class SnapshotService:
    def __init__(self, engine: Engine, *, store: _SnapshotStore) -> None:
        self.store = store
        self.ledger = engine.ledger

    async def read(self, conversation: Conversation, surface: str | None) -> Snapshot:
        store, ledger = self.store, self.ledger
        if surface is not None:
            # The snapshot writes this surface's calls to it, as its stream would: the claim.
            for call in await store.list_calls(conversation.id):
                if call.surface_id == surface and call.state.value == "dispatched":
                    await ledger.rehoming.claim(call.id, surface, call.assignment)
        run = await store.latest_run(conversation.id)
        # Before the log's end: a person joining after it comes in the stream.
        handoff = await store.get_handoff(conversation.id)
        last_seq = await store.last_seq(conversation.id)
        if run is not None and run.status is RunStatus.RUNNING:
            # A message still streaming is not in ``messages`` yet: resume the stream just
            # before its start, so a client gets it whole (and any discard before it).
            opened = await open_messages(store, conversation.id)
            if opened:
                last_seq = min(opened.values()) - 1
        rated = {f.message_id: f.rating for f in await store.feedback_of(conversation.id)}
        reasoned = await reasonings(store, conversation.id)
        messages = tuple(
            SnapshotMessage(
                id=m.id,
                role=m.role,
                text=m.text,
                run_id=m.run_id,
                interrupted=True if m.interrupted else None,
                tool_call_ids=tuple(c["id"] for c in m.tool_calls) if m.tool_calls else None,
                name=m.author,
                feedback=rated.get(m.id),
                superseded_by=m.superseded_by,
                reasoning=reasoned.get(m.id),
                attachments=shown_all(conversation.id, m.attachments),
            )
            for m in await store.list_messages(conversation.id)
            if m.role != "tool"
        )
        now, grace = ledger.moves.clock(), ledger.moves.surface_grace
        surfaces = tuple(
            SurfaceView(x.id, tuple(x.tools), x.present(now, grace))
            for x in await store.list_surfaces(conversation.id)
        )
        # Read after the messages, as before: every call a message names is in ``calls``.
        calls = tuple([await ledger.views.view(c) for c in await store.list_calls(conversation.id)])
        rating = await store.rating_of(conversation.id)
        return Snapshot(
            conversation_id=conversation.id,
            agent_id=conversation.agent_id,
            last_event_id=f"{conversation.id}:{last_seq}",
            surfaces=surfaces,
            run=None if run is None else SnapshotRun(run.id, run.status.value, run.error),
            messages=messages,
            calls=calls,
            person=handoff.person if handoff is not None and handoff.taken else None,
            rating=None if rating is None else SnapshotRating(rating.score, rating.remark),
        )
