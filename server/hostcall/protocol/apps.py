"""What a call's wire entry says of its MCP App view: the ``app`` field of ``TOOL_CALL_RESULT``
and of the snapshot's call (docs/protocol.md, "MCP Apps"), and the bodies of the view's two
requests back to Hostcall.

``app`` is one of three shapes::

    {"server", "resourceUri", "viewUrl", "proxyUrl", "prefersBorder"?}   a view to show
    {"unavailable": "apps_origin_unset" | "server_name_not_a_label"}     none offered here
    {"failed": "<AppFailure>"}                                           it could not be read
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from hostcall.errors import BadRequest


class AppUnavailable(StrEnum):
    APPS_ORIGIN_UNSET = "apps_origin_unset"
    # Under a template the server's name is its origin's first label, and this one is none.
    SERVER_NAME_NOT_A_LABEL = "server_name_not_a_label"


class AppFailure(StrEnum):
    """Why a call's view was not read (its text result stands alone)."""

    UNREACHABLE = "resource_unreachable"  # resources/read failed or timed out
    NOT_FOUND = "resource_not_found"  # the server has no such resource, or no text in it
    WRONG_MIME = "resource_wrong_mime"  # not text/html;profile=mcp-app
    TOO_LARGE = "resource_too_large"  # past the cap of one view's HTML


def view_ref(
    *,
    server: str,
    resource_uri: str,
    view_url: str,
    proxy_url: str,
    prefers_border: bool | None,
) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "server": server,
        "resourceUri": resource_uri,
        "viewUrl": view_url,
        "proxyUrl": proxy_url,
    }
    if prefers_border is not None:
        ref["prefersBorder"] = prefers_border
    return ref


def unavailable_ref(reason: AppUnavailable) -> dict[str, Any]:
    return {"unavailable": reason.value}


def failed_ref(reason: AppFailure | str) -> dict[str, Any]:
    return {"failed": str(reason)}


@dataclass(frozen=True, slots=True)
class AppToolCall:
    """``POST /api/conversations/{cid}/calls/{toolCallId}/app/tools-call``: the view's
    ``tools/call``, ``name`` as its server lists it."""

    name: str
    arguments: dict[str, Any]
    # The visitor confirmed this call in the widget's own UI (a write the agent file lets
    # views ask for): the widget sets it, never the view, which cannot reach the API.
    confirmed: bool = False

    @classmethod
    def decode(cls, body: dict[str, Any]) -> AppToolCall:
        name = body.get("name")
        if not isinstance(name, str) or not name or len(name) > 128:
            raise BadRequest("field 'name' must be the server's tool name", field="name")
        arguments = body.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise BadRequest("field 'arguments' must be a JSON object", field="arguments")
        confirmed = body.get("confirmed", False)
        if not isinstance(confirmed, bool):
            raise BadRequest("field 'confirmed' must be true or false", field="confirmed")
        return cls(name, arguments, confirmed)


@dataclass(frozen=True, slots=True)
class AppContext:
    """``POST /api/conversations/{cid}/calls/{toolCallId}/app/context``: the view's
    ``ui/update-model-context``."""

    content: Any
    structured_content: Any

    @classmethod
    def decode(cls, body: dict[str, Any]) -> AppContext:
        if "content" not in body and "structuredContent" not in body:
            raise BadRequest("send 'content', 'structuredContent' or both", field="content")
        content = body.get("content")
        if content is not None and not isinstance(content, list):
            raise BadRequest("field 'content' must be a list of content blocks", field="content")
        return cls(content, body.get("structuredContent"))

    def value(self) -> dict[str, Any]:
        """The page-context entry's value, as the model reads it."""
        value: dict[str, Any] = {}
        if self.content is not None:
            value["content"] = self.content
        if self.structured_content is not None:
            value["structuredContent"] = self.structured_content
        return value
