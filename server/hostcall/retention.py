"""Retention: an agent's ``retention_days`` deletes its conversations idle that long, whole
(hostcall/visitors/personal_data.py), on the sweeper's turn (one process of a cluster at a time).

A pass lets go of at most ``BATCH`` conversations per agent, oldest first, so a first pass
over years of history does not hold the sweeper (or SQLite's one writer) for long; the next
passes take the rest. A conversation with a run in progress is left until the run ends.
Each pass that deleted anything writes one audit entry per agent (actor ``retention``).

Each pass also deletes the files uploaded more than ``UNSENT_SECONDS`` ago that no message
sent (a visitor who chose a file and left): a file is kept only as part of a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from hostcall.agents import Agent
from hostcall.quotas import Quotas
from hostcall.store.interfaces import Attachments
from hostcall.visitors.personal_data import ErasureWrites, erase

log = logging.getLogger("hostcall.retention")

DAY = 86400.0
# Conversations deleted per agent and pass.
BATCH = 200
ACTOR = "retention"
ACTION = "conversations.expire"
# An upload no message sent in this long is deleted: the widget uploads on Send, so only a
# message refused after its uploads (or a client that went away) leaves one.
UNSENT_SECONDS = 3600.0


class RetentionStore(ErasureWrites, Attachments, Protocol):
    """The conversations an agent's retention lets go, and the files no message sent."""


class Retention:
    def __init__(
        self,
        store: RetentionStore,
        agents: Callable[[], Mapping[str, Agent]],
        *,
        clock: Callable[[], float],
        quotas: Quotas | None = None,
    ) -> None:
        self.store = store
        self.quotas = quotas
        self.agents = agents
        self.clock = clock

    async def sweep(self) -> int:
        """One pass over every agent with a retention: the conversations it deleted. Unsent
        uploads past their hour go first, whatever the agents' retention."""
        unsent = await self.store.purge_unsent_attachments(self.clock() - UNSENT_SECONDS)
        if unsent:
            log.info("%d uploaded files no message sent deleted", unsent)
        deleted = 0
        for agent in list(self.agents().values()):
            if agent.retention_days is None:
                continue
            before = self.clock() - agent.retention_days * DAY
            stale = await self.store.stale_conversations(agent.id, before, BATCH)
            if not stale:
                continue
            erased = await erase(
                self.store, stale, actor=ACTOR, action=ACTION, agent_id=agent.id,
                details={"retentionDays": agent.retention_days}, clock=self.clock,
            )  # fmt: skip
            if self.quotas is not None:
                await self.quotas.forget(agent.id, agent.limits, conversation_ids=stale)
            log.info(
                "agent %s: %d conversations older than %d days deleted",
                agent.id, erased.conversations, agent.retention_days,
            )  # fmt: skip
            deleted += erased.conversations
        return deleted
