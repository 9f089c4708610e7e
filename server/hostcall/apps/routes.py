"""The apps origin's routes: the sandbox proxy page the widget frames, its script, and the
views themselves (hostcall/apps/origin.py keeps them on that origin only).

``GET /apps/proxy?host=<widget origin>`` serves a static page whose policy lets only the
widget's origin frame it and only its own script run; ``GET /apps/view/<token>`` serves one
call's view, under a policy built from the domains its resource declared
(hostcall/apps/csp.py). A view's token binds the conversation, the call and the resource,
and lives ten minutes: a snapshot mints a new one whenever it is read. A bad, expired or
foreign token is a plain 404, saying nothing of why — and so is a token of one server's
view on another server's origin (under a template, each server's views have their own).
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.apps.csp import declared_domains, view_policy
from hostcall.apps.origin import AppsOrigin, OnApps, on_apps
from hostcall.errors import BadRequest, HostcallError, NotFound
from hostcall.origins import BadOrigin, normalize_origin
from hostcall.protocol.codes import ErrorCode
from hostcall.runtime import runtime_of
from hostcall.tokens import Purpose

HERE = Path(__file__).resolve().parent
_PROXY_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; frame-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}"
)
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    # Never one agent cluster with a sibling origin: document.domain cannot make two
    # servers' origins (a.apps.example.com, b.apps.example.com) one.
    "Origin-Agent-Cluster": "?1",
}
_STATIC = {
    "proxy.js": "text/javascript; charset=utf-8",
    "proxy.css": "text/css; charset=utf-8",
}


def apps_routes() -> list[BaseRoute]:
    return [
        Route("/apps/proxy", proxy_page, methods=["GET"]),
        Route("/apps/proxy/{agent_id}", proxy_page, methods=["GET"]),
        Route("/apps/proxy.js", proxy_asset, methods=["GET"]),
        Route("/apps/proxy.css", proxy_asset, methods=["GET"]),
        Route("/apps/view/{token}", view_page, methods=["GET"]),
    ]


def _host(request: Request, apps: AppsOrigin, *, required: bool = True) -> str | None:
    """``?host=``: the widget's origin, the proxy's parent (and the view's grandparent)."""
    raw = request.query_params.get("host")
    if raw is None and not required:
        return None
    try:
        host = normalize_origin(raw or "")
    except BadOrigin as exc:
        raise BadRequest(f"host: {exc}", field="host") from None
    scheme, _, netloc = host.partition("://")
    if apps.serves(netloc, scheme):
        # The proxy's parent is the widget, on another origin; never a view of its own.
        raise BadRequest("host must be the widget's origin, not an apps origin", field="host")
    return host


async def proxy_page(request: Request) -> Response:
    runtime = runtime_of(request)
    on = on_apps(request.scope)
    assert runtime.apps is not None, "apps routes exist on the apps origins only"
    host = _host(request, runtime.apps)
    assert host is not None
    ancestors = [host]
    if (agent_id := request.path_params.get("agent_id")) is not None:
        # The widget's own ancestors are the proxy's too: the pages allowed to embed it.
        agent = runtime.agents.get(agent_id)
        if agent is None:
            raise NotFound(f"no agent {agent_id[:80]!r}", code=ErrorCode.UNKNOWN_AGENT)
        if on.server is not None and on.server not in {b.server for b in agent.mcp}:
            raise NotFound(f"agent {agent_id[:80]!r} uses no MCP server {on.server!r}",
                           code=ErrorCode.NO_APP)  # fmt: skip
        ancestors += agent.allowed_origins
    body = (HERE / "proxy.html").read_bytes()
    policy = _PROXY_CSP.format(ancestors=" ".join(dict.fromkeys(ancestors)))
    headers = {**_HEADERS, "Content-Security-Policy": policy}
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)


async def proxy_asset(request: Request) -> Response:
    name = request.url.path.rsplit("/", 1)[-1]
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "public, max-age=300"}
    return Response((HERE / name).read_bytes(), media_type=_STATIC[name], headers=headers)


async def view_page(request: Request) -> Response:
    runtime = runtime_of(request)
    on = on_apps(request.scope)
    assert runtime.apps is not None, "apps routes exist on the apps origins only"
    try:
        claims = runtime.tokens.verify(Purpose.APP_VIEW, request.path_params["token"])
    except HostcallError:
        raise _no_view() from None
    if claims.call_id is None or claims.tool is None:
        raise _no_view()
    app = await runtime.services.apps.view(claims.conversation_id, claims.call_id, claims.tool)
    if app is None or app.html is None or not _its_origin(on, app.server):
        raise _no_view()
    domains = declared_domains(app.meta.get("csp"), where=f"the view {app.resource_uri!r}")
    # Framed by the proxy, in the widget (the proxy names it: ?host=), in a page that embeds
    # the widget: each is an ancestor that frame-ancestors must name.
    own = runtime.apps.origin_of(app.server)
    assert own is not None, "_its_origin() matched it"
    ancestors = [own]
    if (host := _host(request, runtime.apps, required=False)) is not None:
        ancestors.append(host)
    agent_id = await runtime.agent_of_conversation(app.conversation_id)
    agent = runtime.agents.get(agent_id) if agent_id else None
    ancestors += agent.allowed_origins if agent is not None else ()
    policy = view_policy(domains, ancestors=ancestors)
    headers = {**_HEADERS, "Content-Security-Policy": policy}
    return Response(app.html.encode(), media_type="text/html; charset=utf-8", headers=headers)


def _its_origin(on: OnApps, server: str) -> bool:
    """Whether a view of ``server`` may be served where the request came: on its own
    server's origin under a template (a token of one server's view is nothing on another
    server's origin), anywhere on a plain one."""
    return on.server is None or on.server == server


def _no_view() -> NotFound:
    return NotFound("no such view", code=ErrorCode.NO_APP)
