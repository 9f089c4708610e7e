"""What a settled call's wire entry says of its view (protocol/apps.py's ``app`` field), on
``TOOL_CALL_RESULT`` and in every snapshot, which mints a fresh view URL each time it is
read: the view's token lives ten minutes, a conversation much longer. Both addresses are on
the origin of the view's own server (hostcall/apps/origin.py)."""

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
from hostcall.runs.agents import RunAgents
from hostcall.store.interfaces import CallApps
from hostcall.store.records import Call
from hostcall.tokens import Claims, Purpose, Tokens
from hostcall.tools import Tool


class AppReferences:
    def __init__(
        self, tokens: Tokens, apps: AppsOrigin | None, *, store: CallApps, agents: RunAgents
    ) -> None:
        self.tokens = tokens
        self.apps = apps
        self.store = store
        self.agents = agents

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
        origin = self.apps.origin_of(stored.server)
        if origin is None:
            # Under a template, a server whose name is no DNS label has no origin of its
            # own; hostcall check says so, and its views are not shown anywhere else.
            return unavailable_ref(AppUnavailable.SERVER_NAME_NOT_A_LABEL)
        claims = Claims(call.conversation_id, call.id, tool=stored.resource_uri)
        token = self.tokens.sign(Purpose.APP_VIEW, claims)
        border = stored.meta.get("prefersBorder")
        # The proxy's path names the agent: the pages allowed to embed its widget are the
        # proxy's ancestors too, and its policy must name them (frame-ancestors).
        agent = await self.agents.agent_of_run(call.run_id)
        return view_ref(
            server=stored.server,
            resource_uri=stored.resource_uri,
            view_url=f"{origin}/apps/view/{token}",
            proxy_url=f"{origin}/apps/proxy/{agent.id}",
            prefers_border=border if isinstance(border, bool) else None,
        )
