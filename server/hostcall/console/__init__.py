"""The operator console, served at ``/console`` by the same process.

    /console/login, /console/logout          signing in and out         (login.py)
    /console/conversations[/{id}]            instance management        (instances.py)
    /console/agents[/{id}...]                the agent designer         (designer.py)
    /console/audit                           the audit log              (audit_page.py)
    /console/usage                           tokens and cost            (usage_page.py)
    /console/people[/export|/erase]          a person's data            (people.py)
    /console/api/...                         the JSON the pages call

Every route but the login form goes through ``session.guarded``: anonymous requests get 401
(pages: a redirect to the login page), under-privileged ones 403, and state-changing ones
without this session's CSRF token 403.
"""

from __future__ import annotations

import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

from hostcall.console import (
    audit_page,
    designer,
    handoffs,
    instances,
    login,
    people,
    usage_page,
)

STATIC = Path(__file__).resolve().parent / "static"
_STATIC_NAME = re.compile(r"[a-z][a-z0-9_-]*\.(js|css)")


async def static_file(request: Request) -> Response:
    name = request.path_params["name"]
    path = STATIC / name
    if not _STATIC_NAME.fullmatch(name) or not path.is_file():
        return Response("Not found", status_code=404, media_type="text/plain")
    return FileResponse(
        path, headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    )


def console_routes() -> list[BaseRoute]:
    i, d = instances, designer
    return [
        Route("/console", i.home, methods=["GET"]),
        Route("/console/login", login.login_page, methods=["GET"]),
        Route("/console/login", login.login, methods=["POST"]),
        Route("/console/logout", login.logout, methods=["POST"]),
        Route("/console/static/{name}", static_file, methods=["GET"]),
        Route("/console/conversations", i.conversations_page, methods=["GET"]),
        Route("/console/conversations/{conversation_id}", i.conversation_page, methods=["GET"]),
        Route("/console/api/conversations", i.conversations_json, methods=["GET"]),
        Route("/console/api/conversations/{conversation_id}", i.conversation_json, methods=["GET"]),
        Route("/console/api/calls/{call_id}/answer", i.answer_call, methods=["POST"]),
        Route("/console/api/calls/{call_id}/decision", i.decide_call, methods=["POST"]),
        Route("/console/api/calls/{call_id}/expire", i.expire_call, methods=["POST"]),
        Route("/console/api/runs/{run_id}/cancel", i.cancel_run, methods=["POST"]),
        Route(
            "/console/api/conversations/{conversation_id}/take-over",
            handoffs.take_over,
            methods=["POST"],
        ),
        Route(
            "/console/api/conversations/{conversation_id}/hand-back",
            handoffs.hand_back,
            methods=["POST"],
        ),
        Route(
            "/console/api/conversations/{conversation_id}/messages",
            handoffs.say,
            methods=["POST"],
        ),
        Route("/console/audit", audit_page.audit_page, methods=["GET"]),
        Route("/console/usage", usage_page.usage_page, methods=["GET"]),
        Route("/console/people", people.person_page, methods=["GET"]),
        Route("/console/people/export", people.export, methods=["POST"]),
        Route("/console/people/erase", people.erase, methods=["POST"]),
        *d.designer_routes(),
    ]
