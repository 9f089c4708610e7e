"""The demo host page: a small task board that embeds Hostcall.

It is served by its own app on its own origin (http://localhost:8001 by default) while Hostcall
runs on another (http://127.0.0.1:8000), as on a real customer's site. The page embeds the
widget with the same snippet the README documents; only the server URL and agent id are
filled in. ``?locale=``, ``?theme=``, ``?accent=`` and ``?mount=inline`` on the page's URL are
passed to the snippet's data attributes, which is handy for screenshots and tests.
"""

from __future__ import annotations

import re

from jinja2 import Environment, FileSystemLoader
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from hostcall.assets import DEMO_HOST

HOST_DIR = DEMO_HOST
_ASSETS = {
    "board.js": "text/javascript; charset=utf-8",
    "board.css": "text/css; charset=utf-8",
}
_LOCALES = ("en", "fr", "es", "ja")
_THEMES = ("light", "dark", "auto")


def create_demo_host_app(hostcall_url: str, agent_id: str = "planner") -> Starlette:
    templates = Environment(loader=FileSystemLoader(HOST_DIR), autoescape=True)
    hostcall_url = hostcall_url.rstrip("/")

    async def index(request: Request) -> Response:
        query = request.query_params
        html = templates.get_template("index.html").render(
            hostcall_url=hostcall_url,
            agent_id=agent_id,
            locale=query.get("locale") if query.get("locale") in _LOCALES else None,
            theme=query.get("theme") if query.get("theme") in _THEMES else None,
            inline=query.get("mount") == "inline",
            accent=accent
            if re.fullmatch(r"#[0-9a-fA-F]{3,8}", accent := query.get("accent", ""))
            else None,
        )
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return Response("Not found", status_code=404, media_type="text/plain")
        return Response(
            (HOST_DIR / name).read_bytes(),
            media_type=_ASSETS[name],
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    return Starlette(routes=[Route("/", index), Route("/{name}", asset)])
