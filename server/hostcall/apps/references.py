"""What a settled call's wire entry says of its view (protocol/apps.py's ``app`` field), on
``TOOL_CALL_RESULT`` and in every snapshot, which mints a fresh view URL each time it is
read: the view's token lives ten minutes, a conversation much longer."""

from __future__ import annotations

from typing import Any

from hostcall.apps.origin import AppsOrigin
from hostcall.apps.resources import app_resource
from hostcall.protocol.apps import (
    AppUnavailable,
    failed_ref,
    unavailable_ref,
    view_ref,
)
from hostcall.store.interfaces import CallApps
from hostcall.store.records import Call
from hostcall.tokens import Claims, Purpose, Tokens
from hostcall.tools import Tool


class AppReferences:
    def __init__(self, tokens: Tokens, apps: AppsOrigin | None, *, store: CallApps) -> None:
        self.tokens = tokens
        self.apps = apps
        self.store = store

    async def ref(self, call: Call, tool: Tool | None) -> dict[str, Any] | None:
        """The ``app`` field of a settled call whose tool declares a view; None for any
        other call, and for one that did not succeed (an error has no view to show)."""
        declared = app_resource(tool)
        if declared is None or call.outcome is None or "output" not in call.outcome:
            return None
        if self.apps is None:
            return unavailable_ref(AppUnavailable.APPS_ORIGIN_UNSET)
        stored = await self.store.get_call_app(call.id)
        if stored is None:
            return None  # read before an apps origin was set, or not yet
        if stored.failed is not None:
            return failed_ref(stored.failed)
        claims = Claims(call.conversation_id, call.id, tool=stored.resource_uri)
        token = self.tokens.sign(Purpose.APP_VIEW, claims)
        border = stored.meta.get("prefersBorder")
        return view_ref(
            server=stored.server,
            resource_uri=stored.resource_uri,
            view_url=self.apps.url(f"/apps/view/{token}"),
            proxy_url=self.apps.url("/apps/proxy"),
            prefers_border=border if isinstance(border, bool) else None,
        )
