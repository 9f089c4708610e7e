"""What one conversation costs PostgreSQL in statements and round trips (the load bench's
flow: create, capabilities, stream, message, dispatch, delivered, result, ``RUN_FINISHED``).
Hostcall's CPU per conversation on PostgreSQL is mostly psycopg sending statements and
reading answers (py-spy, load bench), so a statement more per turn is CPU more on every
conversation: counted, not timed, the figure holds on a loaded machine.
bench/statement_bench.py prints the same counts per operation, for both stores."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from hostcall.settings import ROOT
from tests.support.databases import fresh_schema
from tests.support.live import live_server, settings_for
from tests.support.wire import OPERATIONS, Counted, counting, total, turn

sys.path.insert(0, str(ROOT / "bench"))  # the load bench's agent
import load_bench

# A conversation (all but the replay): 24 statements and 25 round trips before the touch
# rode in the run's first append, the surface's tools became one upsert, an answer's audit
# entry rode in its outcome's append, a delivery stopped reading the call first, and the
# conversation's agent was remembered from its session's read (the delivery's Origin
# check read the conversation again); 19 and 23 while a page's tools were saved, then the
# conversation's calls read in a statement of their own to see whether one could move;
# 18 and 22 while a message's session check and its run's read of the pages' tools were
# two statements.
STATEMENTS = 17
ROUND_TRIPS = 21


def _conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, streamed_elsewhere: bool
) -> tuple[dict[str, Counted], Counted, str]:
    """The statements of a second conversation (a process's first run also writes its
    agent's definition), per operation; with ``streamed_elsewhere``, its stream on a second
    process and both processes' statements."""
    load_bench.write_agent(tmp_path)
    with fresh_schema() as url, counting(monkeypatch) as tally:
        # No sweeper pass: it reads on its own clock, not the conversation's.
        settings = replace(
            settings_for(tmp_path, database_url=url),
            agents_dir=tmp_path / "agents",
            sweep_seconds=3600,
        )
        with live_server(settings) as live, ExitStack() as more:
            other = more.enter_context(live_server(settings)) if streamed_elsewhere else None
            turn(live, tally, other)
            found = turn(live, tally, other)
    spent = total(found, but=(OPERATIONS[-1],))
    shown = json.dumps({k: (v.statements, v.round_trips) for k, v in found.items()}, indent=1)
    return found, spent, shown


def test_a_conversation_on_postgresql_costs_no_more_statements_than_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, spent, shown = _conversation(tmp_path, monkeypatch, streamed_elsewhere=False)
    assert spent.statements <= STATEMENTS, (
        f"{spent.statements} statements per conversation: {shown}"
    )
    assert spent.round_trips <= ROUND_TRIPS, f"{spent.round_trips} round trips: {shown}"
    # The replay reads the conversation, redeems the ticket, and reads the events once.
    replay = found[OPERATIONS[-1]]
    assert replay.statements <= 3, shown


# With the stream on another process (as with ``--workers 2``), both processes' statements:
# 24-26 statements and 28-30 round trips while that process read back the events each
# notification woke it for; now a notification carries its statement's events.
STREAMED_STATEMENTS = 17
STREAMED_ROUND_TRIPS = 21


def test_a_conversation_streamed_on_another_process_costs_no_more_than_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, spent, shown = _conversation(tmp_path, monkeypatch, streamed_elsewhere=True)
    assert spent.statements <= STREAMED_STATEMENTS, (
        f"{spent.statements} statements per conversation: {shown}"
    )
    assert spent.round_trips <= STREAMED_ROUND_TRIPS, f"{spent.round_trips} round trips: {shown}"
