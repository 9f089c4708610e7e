"""A visitor's files (docs/protocol.md "Attachments"): ``POST
/api/conversations/{id}/attachments?name=…`` takes one file's bytes as the body, ``GET
…/attachments/{attachmentId}`` gives them back. Both with the conversation's session token,
as every conversation route; an upload goes through the door and the visitor's limits.

The upload's ``Content-Type`` is the browser's guess and decides nothing: the content does
(hostcall/attachments/sniff.py). The body is read only up to the largest size the agent
takes, and not a byte past it.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.attachments.admission import check_name, too_large
from hostcall.attachments.wire import shown
from hostcall.errors import NotFound, Unprocessable
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.reading import read_bytes
from hostcall.protocol.responses import AttachmentSaved
from hostcall.responses import WireResponse
from hostcall.runtime import runtime_of
from hostcall.visitors.session_requests import client_of, session_conversation

# Do not "fix" these into something friendlier: the bytes are a visitor's, so a browser
# must never run them or guess them to be a page (nosniff, a sandbox with no source
# allowed), only save them (attachment) or draw them as an <img> (which ignores the
# disposition). Private: no shared cache keeps one visitor's file.
_DOWNLOAD_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "private, max-age=3600",
    "Cross-Origin-Resource-Policy": "same-origin",
}


async def upload(request: Request) -> Response:
    runtime = runtime_of(request)
    runtime.door.admit()  # before the session's read: it would wait for the same connections
    conversation = await session_conversation(request, runtime)
    agent = runtime.agents.get(conversation.agent_id)
    if agent is None:
        raise NotFound(
            f"agent {conversation.agent_id!r} is no longer loaded", code=ErrorCode.UNKNOWN_AGENT
        )
    policy = agent.attachments
    if policy is None:
        raise Unprocessable(
            f"the agent {agent.id!r} takes no attachments (its file has no attachments block)",
            code=ErrorCode.ATTACHMENTS_NOT_ALLOWED,
        )
    name = check_name(request.query_params.get("name"))
    await runtime.quotas.new_upload(agent.id, agent.limits, conversation.id, client_of(request))
    data = await read_bytes(request, policy.largest())
    if data is None:
        raise too_large(name, policy.largest())
    attachment = await runtime.services.attachments.upload(conversation, policy, name, data)
    return WireResponse(AttachmentSaved(shown(conversation.id, attachment.ref())), 201)


async def download(request: Request) -> Response:
    runtime = runtime_of(request)
    conversation = await session_conversation(request, runtime)
    attachment_id = request.path_params["attachment_id"]
    # ``?thumb=1`` is the same bytes: the widget scales an image with CSS.
    attachment, data = await runtime.services.attachments.read(conversation, attachment_id)
    headers = {
        **_DOWNLOAD_HEADERS,
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(attachment.name, safe='')}",
    }
    return Response(data, media_type=attachment.type, headers=headers)


def attachment_routes() -> list[BaseRoute]:
    return [
        Route("/api/conversations/{conversation_id}/attachments", upload, methods=["POST"]),
        Route(
            "/api/conversations/{conversation_id}/attachments/{attachment_id}",
            download,
            methods=["GET"],
        ),
    ]
