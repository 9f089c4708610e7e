"""The floor app of bench/floor_app.py, plus the browser bench's pages, in one process.

``GET /pages/host.html`` is a host page (``?snippet=1&hc=<Hostcall URL>`` pastes the README
snippet in, from ``pages/snippet.html``, for agent ``bench`` or ``&agent=<id>``; ``&webmcp=1``,
before it, ``pages/webmcp.html``: a tool the page registers with WebMCP);
``GET /pages/floor.html`` is the floor's browser
side. The floor's routes are untouched. ``python bench/browser_apps.py --port N [--ping 15]``,
with floor_app's uvicorn settings.
"""

from __future__ import annotations

import re
from pathlib import Path

import floor_app
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

PAGES = Path(__file__).resolve().parent / "pages"
HOSTCALL_URL = re.compile(r"http://127\.0\.0\.1:\d{1,5}")
AGENT_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")


async def page(request: Request) -> Response:
    name, query = request.path_params["name"], request.query_params
    if name not in ("host", "floor"):
        return Response("Not found", status_code=404, media_type="text/plain")
    html = (PAGES / f"{name}.html").read_text()
    if query.get("snippet") == "1" and HOSTCALL_URL.fullmatch(query.get("hc", "")):
        snippet = (PAGES / "snippet.html").read_text().replace("{{HOSTCALL}}", query["hc"])
        agent = query.get("agent", "bench")
        if AGENT_ID.fullmatch(agent):
            snippet = snippet.replace('data-agent="bench"', f'data-agent="{agent}"')
        if query.get("webmcp") == "1":  # the page's own WebMCP tool, before the snippet
            snippet = (PAGES / "webmcp.html").read_text() + snippet
        html = html.replace("<!--SNIPPET-->", snippet)
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


def main() -> None:
    floor_app.main([Route("/pages/{name}.html", page)])


if __name__ == "__main__":
    main()
