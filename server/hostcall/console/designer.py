"""The agent designer (designers): the list of agents; create, duplicate, disable, edit;
versions with a diff and roll back. Validation is ``hostcall check``'s own (agent_files.py)."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from hostcall.console.accounts import Role
from hostcall.console.agent_files import AgentFiles, agent_files, diff
from hostcall.console.audit import record
from hostcall.console.designer_mcp import allowed_servers, mcp_routes
from hostcall.console.designer_nodes import installed_for_designer
from hostcall.console.render import page
from hostcall.console.session import form_of, guarded, operator_of
from hostcall.errors import BadRequest, NotFound
from hostcall.protocol.console import AgentProblems, AgentSaved
from hostcall.protocol.numbers import whole_number
from hostcall.protocol.reading import read_json
from hostcall.responses import WireResponse
from hostcall.runtime import runtime_of
from hostcall.tools import APPROVALS, EFFECTS

_AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def designer_routes() -> list[BaseRoute]:
    return [
        Route("/console/agents", agents_page, methods=["GET"]),
        Route("/console/agents", create_agent, methods=["POST"]),
        Route("/console/agents/{agent_id}", editor_page, methods=["GET"]),
        Route("/console/agents/{agent_id}/duplicate", duplicate_agent, methods=["POST"]),
        Route("/console/agents/{agent_id}/disable", disable_agent, methods=["POST"]),
        Route("/console/agents/{agent_id}/enable", enable_agent, methods=["POST"]),
        Route("/console/agents/{agent_id}/versions", versions_page, methods=["GET"]),
        Route("/console/agents/{agent_id}/rollback", rollback_agent, methods=["POST"]),
        Route("/console/api/agents/{agent_id}/check", check_agent, methods=["POST"]),
        Route("/console/api/agents/{agent_id}", save_agent, methods=["POST"]),
        *mcp_routes(),
    ]


def _files(request: Request) -> AgentFiles:
    return AgentFiles(runtime_of(request))


def _new_id(value: str | None) -> str:
    value = (value or "").strip()
    if not _AGENT_ID.fullmatch(value):
        raise BadRequest(
            f"agent id {value[:80]!r} must be 1-64 letters, digits, - and _", field="id"
        )
    return value


@guarded(Role.DESIGNER)
async def agents_page(request: Request) -> Response:
    runtime = runtime_of(request)
    rows = [
        {
            "id": f.id,
            "name": str(f.data.get("name", f.id)),
            "enabled": f.enabled,
            "loaded": f.id in runtime.agents,
            "tools": len(f.data.get("tools", []) if isinstance(f.data.get("tools"), list) else []),
            "versions": len(await runtime.services.agent_versions.list(f.id)),
        }
        for f in agent_files(runtime.settings.agents_dir).values()
    ]
    return page(
        request, "agents.html", operator_of(request), agents=rows, csrf=operator_of(request).csrf
    )


@guarded(Role.DESIGNER)
async def create_agent(request: Request) -> Response:
    form = form_of(request)
    agent_id = _new_id(form.get("id"))
    who = operator_of(request).name
    await _files(request).create(agent_id, form.get("name", "").strip()[:200], author=who)
    runtime = runtime_of(request)
    await record(runtime.services.audit, runtime.clock, who, "agent.create", agent_id=agent_id)
    return RedirectResponse(f"/console/agents/{agent_id}", 303)


@guarded(Role.DESIGNER)
async def duplicate_agent(request: Request) -> Response:
    source = request.path_params["agent_id"]
    new_id = _new_id(form_of(request).get("id"))
    who = operator_of(request).name
    await _files(request).duplicate(source, new_id, author=who)
    runtime = runtime_of(request)
    await record(
        runtime.services.audit,
        runtime.clock,
        who,
        "agent.duplicate",
        agent_id=new_id,
        source=source,
    )
    return RedirectResponse(f"/console/agents/{new_id}", 303)


async def _set_enabled(request: Request, enabled: bool) -> Response:
    agent_id = request.path_params["agent_id"]
    _files(request).set_enabled(agent_id, enabled)
    action = "agent.enable" if enabled else "agent.disable"
    runtime, who = runtime_of(request), operator_of(request).name
    await record(runtime.services.audit, runtime.clock, who, action, agent_id=agent_id)
    return RedirectResponse("/console/agents", 303)


@guarded(Role.DESIGNER)
async def disable_agent(request: Request) -> Response:
    return await _set_enabled(request, False)


@guarded(Role.DESIGNER)
async def enable_agent(request: Request) -> Response:
    return await _set_enabled(request, True)


@guarded(Role.DESIGNER)
async def editor_page(request: Request) -> Response:
    runtime = runtime_of(request)
    found = _files(request).get(request.path_params["agent_id"])
    platform = runtime.platform
    versions = await runtime.services.agent_versions.list(found.id)
    data = {
        "agent": found.data,
        "enabled": found.enabled,
        "loaded": found.id in runtime.agents,
        "version": versions[0].version if versions else None,
        "environments": sorted(platform.environments),
        # What a server-side tool may reach, by environment (the platform file decides).
        "allowedTargets": {
            name: sorted(env.allowed_hosts) for name, env in platform.environments.items()
        },
        "connections": sorted(platform.connections),
        "mcpServers": allowed_servers(platform),
        "blocks": installed_for_designer(),
        "effects": list(EFFECTS),
        "approvals": list(APPROVALS),
    }
    return page(request, "agent.html", operator_of(request), data=data, agent_id=found.id)


async def _agent_body(request: Request) -> Any:
    body = await read_json(request, runtime_of(request).settings.max_body_bytes)
    if "agent" not in body:
        raise BadRequest("field 'agent' is required (the agent file's JSON)", field="agent")
    return body


@guarded(Role.DESIGNER)
async def check_agent(request: Request) -> Response:
    """Live validation: the problems ``hostcall check`` would print, changing nothing."""
    body = await _agent_body(request)
    problems = _files(request).problems(request.path_params["agent_id"], body["agent"])
    return WireResponse(AgentProblems(tuple(problems)))


@guarded(Role.DESIGNER)
async def save_agent(request: Request) -> Response:
    agent_id = request.path_params["agent_id"]
    body = await _agent_body(request)
    who = operator_of(request).name
    files = _files(request)
    files.get(agent_id)  # saving never creates: creating is its own action
    note = str(body.get("note") or "")[:200]
    version = await files.save(agent_id, body["agent"], author=who, note=note)
    runtime = runtime_of(request)
    await record(runtime.services.audit, runtime.clock, who, "agent.save", agent_id=agent_id,
                 version=version.version)  # fmt: skip
    return WireResponse(AgentSaved(version.version))


@guarded(Role.DESIGNER)
async def versions_page(request: Request) -> Response:
    runtime = runtime_of(request)
    agent_id = request.path_params["agent_id"]
    _files(request).get(agent_id)
    versions = await runtime.services.agent_versions.list(agent_id)
    lines: list[tuple[str, str]] = []
    chosen: tuple[int, int] | None = None
    params = request.query_params
    if params.get("from") and params.get("to"):
        old, new = (whole_number(params.get(k), k, low=1) for k in ("from", "to"))
        a = await runtime.services.agent_versions.get(agent_id, old)
        b = await runtime.services.agent_versions.get(agent_id, new)
        if a is None or b is None:
            raise NotFound(f"{agent_id!r} has no version {old if a is None else new}")
        lines, chosen = diff(a, b), (old, new)
    elif len(versions) >= 2:
        lines, chosen = diff(versions[1], versions[0]), (versions[1].version, versions[0].version)
    return page(
        request,
        "versions.html",
        operator_of(request),
        agent_id=agent_id,
        versions=versions,
        lines=lines,
        chosen=chosen,
        csrf=operator_of(request).csrf,
    )


@guarded(Role.DESIGNER)
async def rollback_agent(request: Request) -> Response:
    import json

    runtime = runtime_of(request)
    agent_id = request.path_params["agent_id"]
    number = whole_number(form_of(request).get("version"), "version", low=1)
    old = await runtime.services.agent_versions.get(agent_id, number)
    if old is None:
        raise NotFound(f"{agent_id!r} has no version {number}")
    who = operator_of(request).name
    saved = await _files(request).save(
        agent_id, json.loads(old.body), author=who, note=f"roll back to version {number}"
    )
    await record(runtime.services.audit, runtime.clock, who, "agent.rollback", agent_id=agent_id,
                 to=number, version=saved.version)  # fmt: skip
    return RedirectResponse(f"/console/agents/{agent_id}/versions", 303)
