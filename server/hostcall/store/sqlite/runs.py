"""The SQLite store's runs, each with the agent definition it started with (stored once per
distinct definition: hostcall/store/definitions.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from hostcall.store import rows
from hostcall.store.definitions import Definitions
from hostcall.store.interfaces import Runs
from hostcall.store.records import OPEN_STATES, ClaimedRun, Run, RunStart, RunStatus
from hostcall.store.sqlite.connection import Part, SQLiteConnection
from hostcall.store.sqlite.coordination import Coordination
from hostcall.store.statements import SQLITE as SQL

_OPEN = tuple(s.value for s in OPEN_STATES)

# A waiting run none of whose current step's calls is open, claimed (running).
CLAIM_READY_RUN = f"""
UPDATE runs SET status = 'running'
WHERE id = ? AND status = 'waiting' AND NOT EXISTS (
    SELECT 1 FROM calls c WHERE c.run_id = runs.id AND c.step = runs.step
    AND c.state IN ({",".join("?" * len(OPEN_STATES))}))
RETURNING *
"""


class RunTables(Part, Runs):
    def __init__(
        self, db: SQLiteConnection, *, definitions: Definitions, leases: Coordination
    ) -> None:
        super().__init__(db)
        # The agent definitions runs name by digest, and which this process has written.
        self._definitions = definitions
        # The leases a run's claim and its step's last write take, keep and release.
        self.leases = leases

    async def create_run(self, run: Run) -> None:
        digest = self._definitions.digest(run)
        # A definition already there is not written again: a lookup, no write (the
        # transaction may roll back, so this process does not skip it by memory).
        self.db.execute(
            "INSERT OR IGNORE INTO agent_definitions (digest, definition) VALUES (?, ?)",
            (digest, self._definitions.text(digest, run.agent)),
        )
        self.db.execute(
            "INSERT INTO runs"
            " (id, conversation_id, agent_digest, status, step, error, simulate, identity)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.id,
                run.conversation_id,
                digest,
                run.status,
                run.step,
                None,
                int(run.simulate),
                rows.dump(run.visitor.to_json()) if run.visitor is not None else None,
            ),
        )

    async def create_run_alone(
        self, run: Run, lease: tuple[str, str, float], *, turns: int | None = None
    ) -> RunStart:
        held = self.db.execute(
            "SELECT person FROM handoffs WHERE conversation_id = ? AND state = 'taken'",
            (run.conversation_id,),
        ).fetchone()
        if held is not None:
            return RunStart(None, held=held[0])
        busy = self.db.execute(
            "SELECT id, status FROM runs WHERE conversation_id = ?"
            " AND status IN ('running', 'waiting') ORDER BY pos DESC LIMIT 1",
            (run.conversation_id,),
        ).fetchone()
        if busy is not None:
            return RunStart((busy[0], RunStatus(busy[1])))
        await self.create_run(run)
        self.db.execute("INSERT INTO leases (key, owner, until) VALUES (?, ?, ?)", lease)
        return RunStart(None, self.db.history(run.conversation_id, turns))

    def _runs(self, found: Iterable[Any]) -> list[Run]:
        """Rows to runs, each with the agent definition its digest names."""
        found = list(found)
        agents, missing = self._definitions.known(r["agent_digest"] for r in found)
        if missing:
            marks = ",".join("?" * len(missing))
            for digest, text in self.db.execute(
                f"SELECT digest, definition FROM agent_definitions WHERE digest IN ({marks})",
                missing,
            ):
                agents[digest] = self._definitions.learn(digest, text)
        return [rows.run(r, agents[r["agent_digest"]]) for r in found]

    def _run_or_none(self, found: Iterable[Any]) -> Run | None:
        runs = self._runs(found)
        return runs[0] if runs else None

    async def get_run(self, run_id: str) -> Run | None:
        return self._run_or_none(self.db.execute(SQL.run, (run_id,)))

    async def latest_run(self, conversation_id: str) -> Run | None:
        return self._run_or_none(self.db.execute(SQL.latest_run, (conversation_id,)))

    async def list_runs(self, conversation_id: str) -> list[Run]:
        return self._runs(self.db.execute(SQL.runs, (conversation_id,)))

    async def runs_with_status(self, status: RunStatus) -> list[Run]:
        return self._runs(self.db.execute(SQL.runs_with_status, (status,)))

    async def update_run(self, run_id: str, **changes: Any) -> None:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = ?" for k in encoded)
        self.db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*encoded.values(), run_id))

    async def update_run_leased(
        self, run_id: str, lease: tuple[str, str], *, until: float | None = None, **changes: Any
    ) -> bool:
        key, owner = lease
        if until is None:
            held = await self.leases.release_lease(key, owner)
            if held and self.db.owner is not None and self.db.owner is asyncio.current_task():
                self.db.let_go.add(lease)
        else:
            held = await self.leases.keep_lease(key, owner, until)
        if held:
            await self.update_run(run_id, **changes)
        return held

    async def claim_run(
        self, run_id: str, from_status: RunStatus, to_status: RunStatus
    ) -> Run | None:
        found = self.db.execute(
            SQL.claim_run, (to_status, run_id, from_status)
        ).fetchall()  # all: the UPDATE completes only once its RETURNING rows are read
        return self._run_or_none(found)

    async def claim_ready_run(
        self, run_id: str, key: str, owner: str, until: float, now: float, *,
        turns: int | None = None,
    ) -> ClaimedRun | None:  # fmt: skip
        # Two statements, and nothing decoded but the claimed run and its history: the claim
        # is on the way from a step's last answer to the next step's first text.
        async with self.db.transaction():
            found = self.db.execute(CLAIM_READY_RUN, (run_id, *_OPEN)).fetchall()
            if not found:
                return None
            if not await self.leases.take_lease(key, owner, until, now):
                # Another process holds the run: the claim goes back (nobody saw it: the
                # transaction holds the file).
                await self.claim_run(run_id, RunStatus.RUNNING, RunStatus.WAITING)
                return None
            run = self._runs(found)[0]
            return ClaimedRun(run, self.db.history(run.conversation_id, turns))

    async def stalled_runs(self) -> list[Run]:
        return self._runs(self.db.execute(SQL.stalled_runs))
