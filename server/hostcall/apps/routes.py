"""The apps origin's routes: the sandbox proxy page the widget frames, its script, and the
views themselves (hostcall/apps/origin.py keeps them on that origin only).

``GET /apps/proxy?host=<widget origin>`` serves a static page whose policy lets only the
widget's origin frame it and only its own script run; ``GET /apps/view/<token>`` serves one
call's view, under a policy built from the domains its resource declared
(hostcall/apps/csp.py). A view's token binds the conversation, the call and the resource,
and lives ten minutes: a snapshot mints a new one whenever it is read. A bad, expired or
foreign token is a plain 404, saying nothing of why.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.apps.csp import declared_domains, view_policy
from hostcall.errors import BadRequest, HostcallError, NotFound
from hostcall.origins import BadOrigin, normalize_origin
from hostcall.protocol.codes import ErrorCode
from hostcall.runtime import runtime_of
from hostcall.tokens import Purpose

HERE = Path(__file__).resolve().parent
_PROXY_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; frame-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors {host}"
)
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}
_STATIC = {
    "proxy.js": "text/javascript; charset=utf-8",
    "proxy.css": "text/css; charset=utf-8",
}


def apps_routes() -> list[BaseRoute]:
    return [
        Route("/apps/proxy", proxy_page, methods=["GET"]),
        Route("/apps/proxy.js", proxy_asset, methods=["GET"]),
        Route("/apps/proxy.css", proxy_asset, methods=["GET"]),
        Route("/apps/view/{token}", view_page, methods=["GET"]),
    ]


async def proxy_page(request: Request) -> Response:
    runtime = runtime_of(request)
    assert runtime.apps is not None, "apps routes exist on the apps origin only"
    raw = request.query_params.get("host", "")
    try:
        host = normalize_origin(raw)
    except BadOrigin as exc:
        raise BadRequest(f"host: {exc}", field="host") from None
    if host == runtime.apps.origin:
        # The proxy's parent is the widget, on another origin; never a view of its own.
        raise BadRequest("host must be the widget's origin, not the apps origin", field="host")
    body = (HERE / "proxy.html").read_bytes()
    headers = {**_HEADERS, "Content-Security-Policy": _PROXY_CSP.format(host=host)}
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)


async def proxy_asset(request: Request) -> Response:
    name = request.url.path.rsplit("/", 1)[-1]
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "public, max-age=300"}
    return Response((HERE / name).read_bytes(), media_type=_STATIC[name], headers=headers)


async def view_page(request: Request) -> Response:
    runtime = runtime_of(request)
    assert runtime.apps is not None, "apps routes exist on the apps origin only"
    try:
        claims = runtime.tokens.verify(Purpose.APP_VIEW, request.path_params["token"])
    except HostcallError:
        raise _no_view() from None
    if claims.call_id is None or claims.tool is None:
        raise _no_view()
    app = await runtime.services.apps.view(claims.conversation_id, claims.call_id, claims.tool)
    if app is None or app.html is None:
        raise _no_view()
    domains = declared_domains(app.meta.get("csp"), where=f"the view {app.resource_uri!r}")
    headers = {
        **_HEADERS,
        "Content-Security-Policy": view_policy(domains, apps_origin=runtime.apps.origin),
    }
    return Response(app.html.encode(), media_type="text/html; charset=utf-8", headers=headers)


def _no_view() -> NotFound:
    return NotFound("no such view", code=ErrorCode.NO_APP)
