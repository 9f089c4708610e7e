"""Where a view comes from: the tool's ``_meta.ui`` at listing, and its ``ui://`` resource,
read from the same server after the call.

At listing (blocks/mcp/pool.py), a tool whose ``_meta.ui.resourceUri`` (or the older flat
``_meta["ui/resourceUri"]``) is a ``ui://`` URI gets it in the run's frozen definition, and
``_meta.ui.visibility == ["app"]`` marks the tool as its views' alone: the model is never
offered it (``Tool.app_only``), a view of that server may call it. After a successful call
the resource is read with ``resources/read`` on the server's pooled session: text of the
MCP Apps type ``text/html;profile=mcp-app``, at most ``MAX_VIEW_BYTES``; anything else is a
failure with a code (protocol/apps.py's ``AppFailure``), which the model is never told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hostcall.protocol.apps import AppFailure

if TYPE_CHECKING:
    from hostcall.blocks.mcp.pool import McpPool
    from hostcall.blocks.mcp.servers import McpServer
    from hostcall.models.base import Message
    from hostcall.store.records import CallApp
    from hostcall.tools import Tool

MIME_TYPE = "text/html;profile=mcp-app"
SCHEME = "ui://"
MAX_URI_CHARS = 512
# One view's HTML: a page with its script inlined, not a site. It is kept with the call.
MAX_VIEW_BYTES = 512 * 1024
READ_SECONDS = 10.0
# What of a resource's ``_meta.ui`` is kept with the call: its declared domains and border.
KEPT_META = ("csp", "prefersBorder")


@dataclass(frozen=True, slots=True)
class DeclaredUi:
    """A listed tool's ``_meta.ui``: its view's resource, and whether only views call it."""

    resource_uri: str | None = None
    app_only: bool = False


def declared_ui(meta: Mapping[str, Any] | None) -> DeclaredUi:
    if not isinstance(meta, Mapping):
        return DeclaredUi()
    ui = meta.get("ui")
    ui = ui if isinstance(ui, Mapping) else {}
    uri = ui.get("resourceUri", meta.get("ui/resourceUri"))
    if not isinstance(uri, str) or not uri.startswith(SCHEME) or len(uri) > MAX_URI_CHARS:
        uri = None
    visibility = ui.get("visibility")
    app_only = isinstance(visibility, list) and visibility == ["app"]
    return DeclaredUi(uri, app_only)


@dataclass(frozen=True, slots=True)
class AppResource:
    server: str
    resource_uri: str


def app_resource(tool: Tool | None) -> AppResource | None:
    """The view a tool's calls show, if its block is an MCP tool that declared one."""
    from hostcall.blocks.kinds.mcp import McpBlock

    block = tool.block if tool is not None else None
    if not isinstance(block, McpBlock) or block.app_resource is None:
        return None
    return AppResource(block.server, block.app_resource)


def app_only(tool: Tool | None) -> bool:
    """Whether the tool is its server's views' alone (``_meta.ui.visibility == ["app"]``):
    never offered to the model, and refused if the model names it all the same."""
    from hostcall.blocks.kinds.mcp import McpBlock

    block = tool.block if tool is not None else None
    return isinstance(block, McpBlock) and block.app_only


def has_views(tools: Sequence[Tool]) -> bool:
    """Whether any of the tools shows an MCP App view: only then has a conversation views'
    context to read (a step of any other agent sends no statement for it)."""
    from hostcall.blocks.kinds.mcp import McpBlock

    return any(isinstance(t.block, McpBlock) and t.block.app_resource for t in tools)


@dataclass(frozen=True, slots=True)
class ReadView:
    """A resource read for a call: its HTML and kept ``_meta.ui``, or why there is none."""

    html: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    failed: AppFailure | None = None


async def read_view(pool: McpPool, server: McpServer, uri: str) -> ReadView:
    from hostcall.blocks.mcp.pool import McpRefused, McpUnavailable

    try:
        async with asyncio.timeout(READ_SECONDS):
            contents = await pool.read_resource(server, uri)
    except McpRefused:
        return ReadView(failed=AppFailure.NOT_FOUND)
    except (McpUnavailable, TimeoutError):
        return ReadView(failed=AppFailure.UNREACHABLE)
    item = next((c for c in contents if getattr(c, "uri", None) == uri), None)
    if item is None and len(contents) == 1:
        item = contents[0]
    text = getattr(item, "text", None)
    if item is None or not isinstance(text, str):
        return ReadView(failed=AppFailure.NOT_FOUND)
    mime = (getattr(item, "mime_type", None) or "").replace(" ", "").lower()
    if mime != MIME_TYPE:
        return ReadView(failed=AppFailure.WRONG_MIME)
    if len(text.encode("utf-8")) > MAX_VIEW_BYTES:
        return ReadView(failed=AppFailure.TOO_LARGE)
    meta = getattr(item, "meta", None) or {}
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    kept = {k: ui[k] for k in KEPT_META if isinstance(ui, Mapping) and k in ui}
    return ReadView(html=text, meta=kept)


def with_views_context(history: list[Message], views: Sequence[CallApp]) -> list[Message]:
    """The model's history with what views last said (``ui/update-model-context``) in the
    page context of its latest visitor message, as ``app:<server>`` entries (the latest
    view of a server wins): the model reads them as it reads the page's, as data."""
    entries = {f"app:{v.server}": v.context for v in views if v.context is not None}
    latest = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), None)
    if not entries or latest is None:
        return history
    message = history[latest]
    merged = {**(message.context or {}), **entries}
    return [*history[:latest], replace(message, context=merged), *history[latest + 1 :]]
