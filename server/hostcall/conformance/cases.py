"""The named cases: each drives threads of its own and raises ``Failed`` (or ``Skipped``)
with what it saw. ``prompt`` must make the agent call a tool that waits for a person's
approval (an interrupt of ``reason: "tool_call"``, resolved with AG-UI's recommended
``{approved: boolean}`` payload), and run it once approved; ``expiring_prompt`` the same,
with an ``expiresAt`` soon enough to wait for; ``write_prompt`` the same, for a write still
in flight a moment after its approval (a slow one), which the client aborts.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hostcall.conformance.client import Endpoint, Run, Thread

APPROVE = {"approved": True}
DENY = {"approved": False}


class Failed(Exception):
    """The case saw the endpoint break the guarantee; the message says how."""


class Skipped(Exception):
    """The case cannot be run against this endpoint (the message says why)."""


@dataclass(frozen=True, slots=True)
class Target:
    endpoint: Endpoint
    prompt: str
    expiring_prompt: str
    max_wait: float
    # A second client of the same endpoint (its own connection), for the two-client case.
    other: Endpoint
    write_prompt: str = ""


def _interrupted(endpoint: Endpoint, prompt: str) -> tuple[Thread, list[dict[str, Any]]]:
    """A thread whose first run ended with interrupts for a person; the interrupts."""
    thread = endpoint.thread()
    run = thread.say(prompt)
    found = [i for i in run.interrupts if i.get("reason") == "tool_call" and i.get("toolCallId")]
    if not found:
        raise Failed(f"the prompt did not end with a tool_call interrupt: {run.describe()}")
    return thread, run.interrupts


def _answers(interrupts: list[dict[str, Any]], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A resume covering every interrupt (AG-UI: no partial resumes)."""
    return [{"interruptId": i["id"], "status": "resolved", "payload": payload}
            for i in interrupts]  # fmt: skip


def _applied(run: Run, what: str) -> None:
    if run.refused or run.outcome is None:
        raise Failed(f"{what} was not applied: {run.describe()}")


def _not_offered(run: Run, interrupt: dict[str, Any], what: str) -> None:
    if run.refused:
        raise Failed(f"{what}: {run.describe()}")
    if any(i.get("id") == interrupt["id"] for i in run.interrupts):
        raise Failed(f"{what}: the settled interrupt {interrupt['id']} was offered again")


def _never_ran_again(run: Run, call_id: str, what: str) -> None:
    again = run.about(call_id, "TOOL_CALL_RESULT") + run.about(call_id, "TOOL_CALL_START")
    if again:
        raise Failed(f"{what}: tool call {call_id} appeared again ({again[0]['type']})")


# ---- the cases ---------------------------------------------------------------------------------


def reload_while_awaiting_decision(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    for n in (1, 2):
        again = thread.reload()
        offered = {i.get("id") for i in again.interrupts}
        if again.refused or offered != {i["id"] for i in interrupts}:
            raise Failed(f"reload {n} did not offer the pending interrupts: {again.describe()}")
    return f"{len(interrupts)} interrupt(s) offered again on each of 2 reloads"


def reload_after_approval(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    first = interrupts[0]
    resumed = thread.resume(*_answers(interrupts, APPROVE))
    _applied(resumed, "the approval")
    again = thread.reload()
    _not_offered(again, first, "a reload after the approval")
    _never_ran_again(again, first["toolCallId"], "a reload after the approval")
    return f"approved, then reloaded: {again.describe()}"


def reload_after_denial(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    _applied(thread.resume(*_answers(interrupts, DENY)), "the denial")
    again = thread.reload()
    _not_offered(again, interrupts[0], "a reload after the denial")
    _never_ran_again(again, interrupts[0]["toolCallId"], "a reload after the denial")
    return "denied, then reloaded: nothing offered, nothing run"


def two_clients_one_thread(t: Target) -> str:
    mine, interrupts = _interrupted(t.endpoint, t.prompt)
    theirs = Thread(t.other, mine.id, list(mine.messages))
    seen = theirs.reload()
    if {i.get("id") for i in seen.interrupts} != {i["id"] for i in interrupts}:
        raise Failed(f"the second client was not offered the interrupts: {seen.describe()}")
    _applied(mine.resume(*_answers(interrupts, DENY)), "the first client's denial")
    late = theirs.resume(*_answers(interrupts, APPROVE))
    if not late.refused:
        raise Failed(f"the second client's approval was taken after a denial: {late.describe()}")
    _never_ran_again(late, interrupts[0]["toolCallId"], "the second client's approval")
    return f"first answer won; the second got {late.error}"


def earlier_interrupt_after_moving_on(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    for _ in range(2):
        thread.reload()  # runs of the thread since the interrupt was offered
    resumed = thread.resume(*_answers(interrupts, APPROVE))
    _applied(resumed, "the approval of the earlier interrupt")
    _not_offered(resumed, interrupts[0], "the approval of the earlier interrupt")
    return f"approved two runs later: {resumed.describe()}"


def denial_yields_tool_result(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    call_id = interrupts[0]["toolCallId"]
    resumed = thread.resume(*_answers(interrupts, DENY))
    _applied(resumed, "the denial")
    results = resumed.about(call_id, "TOOL_CALL_RESULT")
    if len(results) != 1:
        raise Failed(f"the denied call had {len(results)} TOOL_CALL_RESULT, not one")
    return f"the model read: {str(results[0].get('content'))[:60]}"


def replay_never_reexecutes_nor_drops(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    call_id = interrupts[0]["toolCallId"]
    resumed = thread.resume(*_answers(interrupts, APPROVE))
    _applied(resumed, "the approval")
    ran = len(resumed.about(call_id, "TOOL_CALL_RESULT"))
    if ran > 1:
        raise Failed(f"the approved call has {ran} results in one run")
    for n in (1, 2, 3):
        _never_ran_again(thread.reload(), call_id, f"replay {n}")
    pending, waiting = _interrupted(t.endpoint, t.prompt)
    for n in (1, 2, 3):
        again = pending.reload()
        if {i.get("id") for i in again.interrupts} != {i["id"] for i in waiting}:
            raise Failed(f"replay {n} dropped a pending interrupt: {again.describe()}")
    return "3 replays: the approved call never again; the pending interrupt kept"


def expired_resume_refused(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.expiring_prompt)
    expires = interrupts[0].get("expiresAt")
    if not expires:
        raise Skipped("the interrupt has no expiresAt")
    moment = datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp()
    if moment - time.time() > t.max_wait:
        raise Skipped(f"expiresAt {expires} is beyond --max-wait {t.max_wait:g}s")
    # Do not "fix" to a fixed sleep: the case waits exactly until expiresAt has passed.
    while time.time() <= moment:
        time.sleep(min(0.2, max(0.0, moment - time.time()) + 0.01))
    late = thread.resume(*_answers(interrupts, APPROVE))
    if not late.refused:
        raise Failed(f"a resume after expiresAt was taken: {late.describe()}")
    _never_ran_again(late, interrupts[0]["toolCallId"], "the late resume")
    return f"refused: {late.error}"


# A result that says the write may have completed: in its words, or as Hostcall's outcome
# says it (``mayHaveRun``).
MAY_HAVE_COMPLETED = re.compile(
    r"may (already )?have (taken effect|completed|run|succeeded|happened)|\"mayHaveRun\": ?true",
    re.IGNORECASE,
)


def _error_of(content: Any) -> dict[str, Any] | None:
    """A result's ``{"error": {...}}``, or None (an output, or plain text)."""
    try:
        parsed = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error if isinstance(error, dict) else None


def _said(content: Any) -> str:
    error = _error_of(content)
    return f"{error.get('code')}: {error.get('message')}" if error else str(content)


def interrupted_write_may_have_completed(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.write_prompt or t.prompt)
    call_id = interrupts[0]["toolCallId"]
    aborted = thread.resume_then_abort(*_answers(interrupts, APPROVE))
    if aborted.refused:
        raise Failed(f"the approval was not applied: {aborted.describe()}")
    seen = aborted.about(call_id, "TOOL_CALL_RESULT")
    # The client comes back with the history it kept. The endpoint may take a moment to
    # notice the abort (a reload then follows the run until it ends): reload until the
    # call's result comes, for at most --max-wait.
    deadline = time.monotonic() + t.max_wait
    reloads = 0
    while True:
        reload = thread.reload()
        reloads += 1
        if reload.about(call_id, "TOOL_CALL_START"):
            raise Failed("the reload ran the interrupted write again (TOOL_CALL_START)")
        seen += reload.about(call_id, "TOOL_CALL_RESULT")
        if seen or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if not seen:
        raise Failed(f"{reloads} reload(s) said nothing about the interrupted write: "
                     "no TOOL_CALL_RESULT")  # fmt: skip
    if len(seen) > 1:
        raise Failed(f"the interrupted write has {len(seen)} results: it ran again")
    content = seen[0].get("content")
    if _error_of(content) is not None and not MAY_HAVE_COMPLETED.search(str(content)):
        raise Failed(f"the write ended without saying it may have completed: {content!r:.120}")
    _never_ran_again(thread.reload(), call_id, "a second reload")
    return f"the client read: {_said(content)[:100]}"


def duplicate_resume_refused(t: Target) -> str:
    thread, interrupts = _interrupted(t.endpoint, t.prompt)
    entries = _answers(interrupts, DENY)
    _applied(thread.resume(*entries), "the first resume")
    again = thread.resume(*entries)
    if not again.refused:
        raise Failed(f"the same resume was taken twice: {again.describe()}")
    flipped = thread.resume(*_answers(interrupts, APPROVE))
    if not flipped.refused:
        raise Failed(f"an approval after the denial was taken: {flipped.describe()}")
    _never_ran_again(flipped, interrupts[0]["toolCallId"], "the approval after the denial")
    return f"refused: {again.error}"


CASES: tuple[tuple[str, Callable[[Target], str]], ...] = (
    ("reload while awaiting a decision", reload_while_awaiting_decision),
    ("reload after an approval", reload_after_approval),
    ("reload after a denial", reload_after_denial),
    ("two clients on one thread", two_clients_one_thread),
    ("approve an earlier interrupt after moving on", earlier_interrupt_after_moving_on),
    ("a denial yields a tool result", denial_yields_tool_result),
    ("replay never re-executes nor drops", replay_never_reexecutes_nor_drops),
    ("a resume after expiresAt is refused", expired_resume_refused),
    ("a duplicate resume is refused", duplicate_resume_refused),
    ("an interrupted write may have completed", interrupted_write_may_have_completed),
)
