"""A person's page (docs/console.md "A person's data"): the conversations of one signed-in
person with one agent, and, for admins, their export (one JSON document) and erasure (every
row of every conversation, the counters that name them), each in the audit log.

A person is the pair (agent, ``sub``) the identity token named (``Conversation.person``).
Erasing asks for the person's id typed again: a form posted by mistake erases nothing.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hostcall.console.accounts import Role
from hostcall.console.render import page
from hostcall.console.session import guarded, operator_of
from hostcall.errors import BadRequest, NotFound
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.cursors import page_cursor, read_cursor
from hostcall.protocol.numbers import whole_number
from hostcall.runtime import Runtime, runtime_of

# Conversations on a page of a person's page (older ones on the next pages).
SHOWN = 50
# People on a page of the list of people.
PEOPLE_SHOWN = 50
# A person's id as identity tokens carry it (``sub``): long enough for any issuer's.
MAX_PERSON_CHARS = 255


def _person(runtime: Runtime, fields: dict[str, str]) -> tuple[str, str]:
    """The (agent, person) a request names, checked."""
    agent = fields.get("agent", "")
    person = fields.get("person", "")
    if agent not in runtime.agents:
        raise NotFound(f"no agent {agent[:80]!r}", code=ErrorCode.UNKNOWN_AGENT)
    if not person or len(person) > MAX_PERSON_CHARS:
        raise BadRequest(
            f"'person' must be a person's id, 1 to {MAX_PERSON_CHARS} characters", field="person"
        )
    return agent, person


def _page_url(agent: str, person: str, **extra: str) -> str:
    return "/console/people?" + urlencode({"agent": agent, "person": person, **extra})


@guarded(Role.OPERATOR)
async def person_page(request: Request) -> Response:
    runtime = runtime_of(request)
    params = dict(request.query_params)
    if not params.get("person"):
        return await _known(request, runtime, params)
    agent, person = _person(runtime, params)
    erased = params.get("erased")  # what the erasure just done said (its redirect's)
    return await _shown(
        request,
        runtime,
        agent,
        person,
        before=read_cursor(params.get("before")),
        erased=whole_number(erased, "erased") if erased is not None else None,
    )


async def _known(request: Request, runtime: Runtime, params: dict[str, str]) -> Response:
    """The lookup form, and the signed-in people (of the agent chosen, else of all), the one
    written to last first: who there is to look up, without knowing an id beforehand."""
    agent = params.get("agent", "")
    if agent and agent not in runtime.agents:
        raise NotFound(f"no agent {agent[:80]!r}", code=ErrorCode.UNKNOWN_AGENT)
    number = whole_number(params.get("page", "1"), "page", low=1, high=100_000)
    found = await runtime.services.people.known(
        agent, limit=PEOPLE_SHOWN + 1, offset=(number - 1) * PEOPLE_SHOWN
    )
    pages = {"agent": agent} if agent else {}
    return page(
        request,
        "person.html",
        operator_of(request),
        agents=sorted(runtime.agents),
        agent=agent,
        person="",
        lines=None,
        people=found[:PEOPLE_SHOWN],
        person_url=lambda p: _page_url(p.agent_id, p.person),
        newer="/console/people?" + urlencode({**pages, "page": number - 1}) if number > 1 else "",
        later="/console/people?" + urlencode({**pages, "page": number + 1})
        if len(found) > PEOPLE_SHOWN
        else "",
    )


async def _shown(
    request: Request,
    runtime: Runtime,
    agent: str,
    person: str,
    *,
    before: tuple[float, str] | None = None,
    erased: int | None = None,
    confirm_error: bool = False,
) -> Response:
    """The person's page: their conversations, a page of them from ``before``."""
    lines = await runtime.services.people.conversations(
        agent, person, limit=SHOWN + 1, before=before
    )
    last = lines[SHOWN - 1] if len(lines) > SHOWN else None
    older = _page_url(agent, person, before=page_cursor(last.updated_at, last.id)) if last else ""
    return page(
        request,
        "person.html",
        operator_of(request),
        status=400 if confirm_error else 200,
        agents=sorted(runtime.agents),
        agent=agent,
        person=person,
        lines=lines[:SHOWN],
        older=older,
        newest=_page_url(agent, person) if before is not None else "",
        erased=erased,
        confirm_error=confirm_error,
    )


@guarded(Role.ADMIN)
async def export(request: Request) -> Response:
    runtime = runtime_of(request)
    agent, person = _person(runtime, request.state.form)
    document = await runtime.services.people.export(agent, person, actor=operator_of(request).name)
    body = json.dumps(document, ensure_ascii=False, indent=2)
    return Response(
        body,
        media_type="application/json",
        headers={
            "Content-Disposition": 'attachment; filename="hostcall-person.json"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )


@guarded(Role.ADMIN)
async def erase(request: Request) -> Response:
    runtime = runtime_of(request)
    form = request.state.form
    agent, person = _person(runtime, form)
    if form.get("confirm", "") != person:
        # Back to the form, the mistake said beside the field (not an error page the reader
        # must come back from): nothing was erased.
        return await _shown(request, runtime, agent, person, confirm_error=True)
    erased = await runtime.services.people.erase(agent, person, actor=operator_of(request).name)
    return RedirectResponse(_page_url(agent, person, erased=str(erased.conversations)), 303)
