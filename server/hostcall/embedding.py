"""Why a page cannot embed an agent, said exactly.

A snippet with a wrong ``data-agent`` and a page whose origin an agent does not allow used to
look the same from the page: a launcher whose frame never said hello. ``GET /embed/check``
tells the page's loader before it draws anything, so a refused page shows no launcher and
its console says why; the operator's log has the same line (from the check, and from the
widget page, hostcall/pages.py, if a frame asks anyway).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.responses import EmbedAllowed, EmbedRefused
from hostcall.responses import WireResponse
from hostcall.runtime import runtime_of

log = logging.getLogger("hostcall.embed")

# An origin as browsers serialise it. Also guards the widget page's CSP header: do not relax
# this to anything that may contain ';' or spaces.
ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+")


@dataclass(frozen=True, slots=True)
class EmbedProblem:
    status: int
    code: ErrorCode  # unknown_agent | origin_not_allowed
    message: str  # for the page's developer (console) and the operator (log)


def embed_problem(
    agents: Mapping[str, Any], agent_id: str, origin: str | None
) -> EmbedProblem | None:
    """What stops ``origin`` embedding ``agent_id`` (``origin`` None: opened standalone)."""
    agent = agents.get(agent_id)
    if agent is None:
        return EmbedProblem(
            404,
            ErrorCode.UNKNOWN_AGENT,
            f"there is no agent {agent_id[:100]!r} on this server (check the snippet's data-agent)",
        )
    if origin is not None and (not ORIGIN.fullmatch(origin) or origin not in agent.allowed_origins):
        return EmbedProblem(
            403,
            ErrorCode.ORIGIN_NOT_ALLOWED,
            f"the page's origin {origin[:200]} is not an allowed origin of the agent "
            f"{agent.id!r} (add it to the agent's allowed_origins, or --allow-origin)",
        )
    return None


def log_refusal(problem: EmbedProblem, agent_id: str, origin: str | None) -> None:
    log.warning(
        "widget refused: %s: agent=%s origin=%s: %s",
        problem.code,
        agent_id[:100],
        (origin or "-")[:200],
        problem.message,
    )


async def embed_check(request: Request) -> Response:
    """``{"ok": true}`` or ``{"code", "message"}``; readable from any origin (no credentials,
    nothing secret: the loader on a misconfigured page is exactly who needs to read it)."""
    agent_id = request.query_params.get("agent", "")
    origin = (request.query_params.get("origin") or "").rstrip("/")
    problem = embed_problem(runtime_of(request).agents, agent_id, origin)
    if problem is not None:
        log_refusal(problem, agent_id, origin)
    body = EmbedAllowed(True) if problem is None else EmbedRefused(problem.code, problem.message)
    headers = {"Access-Control-Allow-Origin": "*", "Cache-Control": "no-store"}
    return WireResponse(body, headers=headers)


def embed_routes() -> list[BaseRoute]:
    return [Route("/embed/check", embed_check, methods=["GET"])]
