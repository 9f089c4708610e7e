"""The PostgreSQL store's runs: their rows, the agent definition each names
(hostcall/store/definitions.py), and the claims and step ends that move them, each one
statement."""

from __future__ import annotations

from typing import Any

from hostcall.store import rows
from hostcall.store.definitions import Definitions
from hostcall.store.interfaces import Runs
from hostcall.store.postgres.connections import Part, PostgresConnections, Row
from hostcall.store.postgres.coordination import Coordination
from hostcall.store.postgres.held import IF_FENCED
from hostcall.store.records import OPEN_STATES, ClaimedRun, Run, RunStart, RunStatus
from hostcall.store.statements import POSTGRES as SQL
from hostcall.store.statements import WINDOW_START, window_skip

_OPEN = rows.states_sql(OPEN_STATES)

# The conversation's messages of its last turns, oldest first, as one JSON value (NULL for
# none): a step's history, read in the statement that claims or starts its run (the step's
# own SELECT of them cost a statement per step). {cid}: the conversation's id; {when}: a
# condition (the run was claimed or stored); {skip}: the turns to skip back (``window_skip``).
HISTORY = """(
    SELECT json_agg(m ORDER BY m.pos) FROM messages m WHERE m.conversation_id = {cid} AND {when}
    AND m.superseded_by IS NULL AND m.pos >= COALESCE(({window}), 0)
)"""


def _history(cid: str, when: str, skip: str) -> str:
    return HISTORY.format(cid=cid, when=when, window=WINDOW_START.format(cid=cid, skip=skip))


# claim_ready_run in one statement (one round trip where it took four): the lease is taken
# only for a ready run, and the run claimed only with the lease. A concurrent claimer's
# INSERT waits for this one to commit, then finds a live lease that is not its own.
# The run is claimed only at the step ``ready`` saw: had another process claimed it and
# ended a step while this statement waited for the lease row, the run would be waiting
# again, at a step with open calls that ``ready``'s snapshot cannot see (the lease taken
# then goes back). So the history, read with that snapshot, is the claimed step's: every
# message of the conversation is committed with the step, or the settling of the call,
# that ``ready`` requires done.
CLAIM_READY_RUN = f"""
WITH ready AS (
    SELECT r.id, r.step FROM runs r
    WHERE r.id = %(run)s AND r.status = %(waiting)s AND NOT EXISTS (
        SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.step = r.step AND c.state IN {_OPEN})
), taken AS (
    INSERT INTO leases (key, owner, until) SELECT %(key)s, %(owner)s, %(until)s FROM ready
    ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, until = excluded.until
    WHERE leases.owner = excluded.owner OR leases.until < %(now)s
    RETURNING key
), claimed AS (
    UPDATE runs SET status = %(running)s
    WHERE id = %(run)s AND status = %(waiting)s AND step = (SELECT step FROM ready)
      AND EXISTS (SELECT 1 FROM taken)
    RETURNING *
)
SELECT EXISTS (SELECT 1 FROM taken) AS took,
    {_history("claimed.conversation_id", "claimed.id IS NOT NULL", "%(skip)s")} AS history,
    claimed.*
FROM (SELECT 1) AS one LEFT JOIN claimed ON TRUE
"""


RUN_INSERT = (
    "INSERT INTO runs (id, conversation_id, agent_digest, status, step, error, simulate, identity)"
    " VALUES (%s, %s, %s, %s, %s, NULL, %s, %s)"
)
# The run and its lease unless the conversation has a run in progress (then that run's id
# and status, and nothing stored). A lease row already there for a new run's key (never: ids
# are random) fails the transaction rather than being taken over. With the conversation's
# messages (those sent earlier in the transaction included), which nobody else can add
# meanwhile: its row is locked, and no run of it is in progress.
CREATE_RUN_ALONE = f"""
WITH taken AS (
    SELECT person FROM handoffs WHERE conversation_id = %s AND state = 'taken'
), busy AS (
    SELECT id, status FROM runs WHERE conversation_id = %s AND status IN ('running', 'waiting')
    ORDER BY pos DESC LIMIT 1
), run AS (
    INSERT INTO runs (id, conversation_id, agent_digest, status, step, error, simulate, identity)
    SELECT %s, %s, %s, %s, %s, NULL, %s, %s
    WHERE NOT EXISTS (SELECT 1 FROM busy) AND NOT EXISTS (SELECT 1 FROM taken)
    RETURNING id
), lease AS (
    INSERT INTO leases (key, owner, until) SELECT %s, %s, %s FROM run
)
SELECT busy.id AS busy, busy.status, taken.person AS held,
    {_history("%s", "busy.id IS NULL AND taken.person IS NULL", "%s")} AS history
FROM (SELECT 1) AS one LEFT JOIN busy ON TRUE LEFT JOIN taken ON TRUE
"""


class RunTables(Part, Runs):
    def __init__(
        self, db: PostgresConnections, *, definitions: Definitions, leases: Coordination
    ) -> None:
        super().__init__(db)
        # The agent definitions runs name by digest, and which this process has written.
        self._definitions = definitions
        # A claimed run's lease, let go when the claim finds the run not ready after all.
        self.leases = leases

    async def create_run(self, run: Run) -> None:
        await self.db.run(RUN_INSERT, self._run_values(run, await self._stored_digest(run)))

    async def create_run_alone(
        self, run: Run, lease: tuple[str, str, float], *, turns: int | None = None
    ) -> RunStart:
        # After the transaction's append of the run's first events (whose UPDATE of the
        # conversation's row locks it to the end), in a statement of its own: a statement
        # that waited for the lock reads the runs as they were when it began (READ
        # COMMITTED re-checks only the locked row), so a run committed meanwhile would go
        # unseen (measured: two messages at once both started a run). The checks (a run in
        # progress, a person holding the conversation), the run and its lease are one
        # statement (it used to take three).
        values = self._run_values(run, await self._stored_digest(run))
        self.db.lease_written()
        cid = run.conversation_id
        window = (cid, cid, window_skip(turns))
        row = await self.db.one(CREATE_RUN_ALONE, (cid, cid, *values, *lease, *window))
        assert row is not None  # the statement always returns its one row
        if row["held"] is not None:
            return RunStart(None, held=row["held"])
        if row["busy"]:
            return RunStart((row["busy"], RunStatus(row["status"])))
        return RunStart(None, rows.messages(row["history"]))

    async def _stored_digest(self, run: Run) -> str:
        """The digest naming the run's definition, which is written first if this process
        has not seen it written."""
        digest = self._definitions.digest(run)
        if digest not in self._definitions.written:
            # Once per distinct definition and process, not per run (~5 KB of JSON each).
            await self.db.run(
                "INSERT INTO agent_definitions (digest, definition) VALUES (%s, %s)"
                " ON CONFLICT (digest) DO NOTHING",
                (digest, self._definitions.text(digest, run.agent)),
            )
            # Remembered only once committed: a rolled-back run's definition is not there.
            self.db.after_commit(lambda: self._definitions.written.add(digest))
        return digest

    @staticmethod
    def _run_values(run: Run, digest: str) -> tuple[Any, ...]:
        visitor = rows.dump(run.visitor.to_json()) if run.visitor is not None else None
        return (run.id, run.conversation_id, digest, run.status, run.step, run.simulate, visitor)

    async def _runs(self, found: list[Row]) -> list[Run]:
        """Rows to runs, each with the agent definition its digest names (read from the
        table only the first time this process meets a digest)."""
        agents, missing = self._definitions.known(r["agent_digest"] for r in found)
        if missing:
            for row in await self.db.all(
                "SELECT digest, definition FROM agent_definitions WHERE digest = ANY(%s)",
                (missing,),
            ):
                agents[row["digest"]] = self._definitions.learn(row["digest"], row["definition"])
        return [rows.run(r, agents[r["agent_digest"]]) for r in found]

    async def _run_or_none(self, row: Row | None) -> Run | None:
        return (await self._runs([row]))[0] if row else None

    async def get_run(self, run_id: str) -> Run | None:
        return await self._run_or_none(await self.db.one(SQL.run, (run_id,)))

    async def latest_run(self, conversation_id: str) -> Run | None:
        return await self._run_or_none(await self.db.one(SQL.latest_run, (conversation_id,)))

    async def list_runs(self, conversation_id: str) -> list[Run]:
        return await self._runs(await self.db.all(SQL.runs, (conversation_id,)))

    async def runs_with_status(self, status: RunStatus) -> list[Run]:
        return await self._runs(await self.db.all(SQL.runs_with_status, (status,)))

    async def update_run(self, run_id: str, **changes: Any) -> None:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = %s" for k in encoded)
        await self.db.run(
            f"UPDATE runs SET {assignments} WHERE id = %s",
            (*encoded.values(), run_id),
        )

    async def update_run_leased(
        self, run_id: str, lease: tuple[str, str], *, until: float | None = None, **changes: Any
    ) -> bool:
        encoded = rows.run_changes(changes)
        assignments = ", ".join(f"{k} = %s" for k in encoded)
        # One statement where there were two: the lease row's change takes its
        # lock, held to commit, as DELETE or UPDATE alone did; the run changes only with it.
        lease_args: list[Any]
        if until is None:
            held, lease_args = "DELETE FROM leases WHERE key = %s AND owner = %s", [*lease]
        else:
            held, lease_args = (
                "UPDATE leases SET until = %s WHERE key = %s AND owner = %s",
                [until, *lease],
            )
        ctes = (
            f"{{p}}held AS ({held}{IF_FENCED} RETURNING 1), {{p}}changed AS (UPDATE runs SET"
            f" {assignments} WHERE id = %s AND EXISTS (SELECT 1 FROM {{p}}held))"
        )
        values = (*lease_args, *encoded.values(), run_id)
        current = self.db.current()
        if current is not None and lease in current.fenced:
            # A fenced append of this transaction found the lease held, keeps its row FOR
            # SHARE to the end, and nothing in the transaction wrote a lease since: the
            # lease is still held, so the answer is known without asking. Held, the write
            # goes out with the step's other writes at the end, in one statement where
            # there were two, and is not waited for.
            await self.db.hold(current, "runs", ctes.replace(IF_FENCED, ""), values)
            self.db.lease_written()
            return True
        if current is not None:
            # Not known yet: held, and answered by the transaction's next fenced append of
            # the lease, which carries it (a step's end before its last text: one statement
            # where there were two), or checked where it goes out alone. Lost,
            # the transaction raises LeaseLost and changes nothing.
            await self.db.hold(current, "runs", ctes, values, fence=lease, check="{p}held")
            self.db.lease_written()
            return True
        row = await self.db.one(
            f"WITH {ctes.replace('{p}', '').replace(IF_FENCED, '')} SELECT COUNT(*) AS n FROM held",
            values,
        )
        return row is not None and row["n"] == 1

    async def claim_run(
        self, run_id: str, from_status: RunStatus, to_status: RunStatus
    ) -> Run | None:
        row = await self.db.one(SQL.claim_run, (to_status, run_id, from_status))
        return await self._run_or_none(row)

    async def claim_ready_run(
        self, run_id: str, key: str, owner: str, until: float, now: float, *,
        turns: int | None = None,
    ) -> ClaimedRun | None:  # fmt: skip
        self.db.lease_written()
        row = await self.db.one(
            CLAIM_READY_RUN,
            {
                "run": run_id,
                "key": key,
                "owner": owner,
                "until": until,
                "now": now,
                "waiting": RunStatus.WAITING.value,
                "running": RunStatus.RUNNING.value,
                "skip": window_skip(turns),
            },
        )
        assert row is not None  # the statement always returns its one row
        if row["id"] is not None:
            run = (await self._runs([row]))[0]
            return ClaimedRun(run, rows.messages(row["history"]))
        if row["took"]:
            # The run moved on between the statement's read and its update (another process
            # claimed and ran it meanwhile): the lease taken for it goes back.
            await self.leases.release_lease(key, owner)
        return None

    async def stalled_runs(self) -> list[Run]:
        return await self._runs(await self.db.all(SQL.stalled_runs))
