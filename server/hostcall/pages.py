"""Page routes: the embed loader, the widget page and the widget's static files.

The widget page is the security boundary between a host page and Hostcall. It trusts
exactly one parent origin — the ``origin`` query parameter, and only when it is one of the
agent's allowed origins — and says so to the browser with ``frame-ancestors <origin>``, so
a page of any other origin that frames it gets nothing. Opened without ``origin`` it runs
standalone (top level, or inside this server's own pages — the console's "try it" pane:
``frame-ancestors 'self'``, never another origin) and every client-side tool is
answered through the form. The page carries no inline script or style: its configuration is
a ``<script type="application/json">`` block the widget reads with ``textContent``.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from hostcall.agents import Agent
from hostcall.assets import WIDGET_DIR
from hostcall.embedding import embed_problem, embed_routes, log_refusal
from hostcall.errors import NotFound
from hostcall.origins import normalize_origin
from hostcall.runtime import runtime_of
from hostcall.suggestions import widget_config
from hostcall.views.spec import SELF

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

LOCALES = ("en", "fr", "es", "ja")
THEMES = ("light", "dark", "auto")
MODES = ("bubble", "inline")
#: Modules the widget page preloads, so the browser fetches them in parallel with app.js.
#: Not the tool-call modules (toolcalls.js, cards.js, calls.js, form.js, protocol-codes.js):
#: app.js imports them when the first call appears (the weight budget); nor control.js (Stop
#: and Retry, a failed run), nor restart.js (↻'s question), imported when first needed.
WIDGET_MODULES = ("protocol.js", "chat.js", "drawing.js", "api.js")

# Bounded: a long name must be a 404, not an OSError from the file system.
_STATIC_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}\.(js|css|d\.ts)")
_CONTENT_TYPES = {
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "d.ts": "application/typescript; charset=utf-8",
}
_ACCENT = re.compile(r"#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})")

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:{images};{frames} base-uri 'none'; form-action 'none'; "
    "frame-ancestors {ancestors}"
)
_SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

_templates = Environment(
    loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True, trim_blocks=True, lstrip_blocks=True
)


def page_routes() -> list[BaseRoute]:
    return [
        Route("/embed.js", embed_js, methods=["GET"]),
        Route("/embed.d.ts", embed_types, methods=["GET"]),
        Route("/widget/{agent_id}", widget_page, methods=["GET"]),
        Route("/static/{name:path}", static_file, methods=["GET"]),
        *embed_routes(),
    ]


# ----------------------------------------------------------------------------- static files


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    gzipped: bytes
    content_type: str
    etag: str


_assets: dict[str, tuple[int, _Asset]] = {}


def _asset(name: str) -> _Asset | None:
    """A file of widget/ by bare name; anything else (paths, dotfiles, other types) is None.

    Read again whenever the file changes, so an edited widget is served without a restart;
    compressed once per version (the widget's size budget is counted gzipped).
    """
    match = _STATIC_NAME.fullmatch(name)
    path = WIDGET_DIR / name
    if match is None or not path.is_file():
        return None
    mtime = path.stat().st_mtime_ns
    cached = _assets.get(name)
    if cached is None or cached[0] != mtime:
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        asset = _Asset(body, gzip.compress(body, 9), _CONTENT_TYPES[match.group(1)], etag)
        cached = _assets[name] = (mtime, asset)
    return cached[1]


def _asset_response(request: Request, asset: _Asset, *, max_age: int) -> Response:
    headers = {
        "ETag": asset.etag,
        "Cache-Control": f"public, max-age={max_age}",
        "Vary": "Accept-Encoding",
        "X-Content-Type-Options": "nosniff",
    }
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return Response(asset.gzipped, media_type=asset.content_type, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


async def embed_js(request: Request) -> Response:
    asset = _asset("loader.js")
    assert asset is not None, "widget/loader.js is part of the package"
    # Short cache: owners pick up a new loader within minutes; the ETag makes revalidation cheap.
    return _asset_response(request, asset, max_age=300)


async def embed_types(request: Request) -> Response:
    """The page API's TypeScript declarations (widget/embed.d.ts), beside the loader."""
    asset = _asset("embed.d.ts")
    assert asset is not None, "widget/embed.d.ts is part of the package"
    return _asset_response(request, asset, max_age=300)


async def static_file(request: Request) -> Response:
    asset = _asset(request.path_params["name"])
    if asset is None:
        raise NotFound(f"no static file {request.path_params['name'][:80]!r}")
    return _asset_response(request, asset, max_age=300)


# ----------------------------------------------------------------------------- widget page


def accent_text(accent: str) -> str:
    """Black or white: whichever has the higher WCAG contrast ratio on ``accent`` (#rgb[a] or
    #rrggbb[aa]; alpha ignored). A light accent such as #facc15 gets black text."""
    digits = accent.lstrip("#")
    if len(digits) in (3, 4):
        digits = "".join(c * 2 for c in digits)
    channels = [int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    # Contrast with black is (L + 0.05) / 0.05, with white 1.05 / (L + 0.05).
    return "#000" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "#fff"


def _accept_language(header: str) -> str:
    """The first supported language of an Accept-Language header, else English."""
    for part in header.split(","):
        lang = part.split(";")[0].strip()[:2].lower()
        if lang in LOCALES:
            return lang
    return "en"


def _pick(value: str | None, allowed: tuple[str, ...], default: str) -> str:
    value = (value or "").strip().lower()
    return value if value in allowed else default


def _page(
    request: Request,
    status: int,
    ancestors: str,
    context: dict[str, Any],
    images: tuple[str, ...] = (),
    frames: str | None = None,
) -> HTMLResponse:
    html = _templates.get_template("widget.html").render(
        base=request.scope.get("root_path", ""), **context
    )
    headers = {
        "Content-Security-Policy": _CSP.format(
            ancestors=ancestors,
            images="".join(f" {o}" for o in images),
            frames=f" frame-src {frames};" if frames else "",
        ),
        "Cache-Control": "no-store",
        **_SECURITY_HEADERS,
    }
    if ancestors == "'none'":
        headers["X-Frame-Options"] = "DENY"
    elif ancestors == "'self'":
        headers["X-Frame-Options"] = "SAMEORIGIN"
    headers["Vary"] = "Accept-Encoding"
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return HTMLResponse(gzip.compress(html.encode(), 6), status_code=status, headers=headers)
    return HTMLResponse(html, status_code=status, headers=headers)


def _error(request: Request, status: int, locale: str, title: str, message: str) -> HTMLResponse:
    context = {
        "locale": locale or "en",
        "theme": "auto",
        "error": {"title": title, "message": message},
    }
    return _page(request, status, "'none'", context)


async def widget_page(request: Request) -> HTMLResponse:
    runtime = runtime_of(request)
    agent_id = request.path_params["agent_id"]
    query = request.query_params
    locale = _pick((query.get("locale") or "")[:2], LOCALES, "")
    theme = _pick(query.get("theme"), THEMES, "auto")

    origin = query.get("origin")
    if origin is not None:
        origin = origin.rstrip("/")
    problem = embed_problem(runtime.agents, agent_id, origin)
    if problem is not None:
        # The operator's log says which mistake it is; the page's loader asks /embed/check.
        log_refusal(problem, agent_id, origin)
    agent = runtime.agents.get(agent_id)
    if agent is None:
        return _error(
            request,
            404,
            locale,
            "Unknown agent",
            f"There is no agent called “{agent_id[:100]}” on this server.",
        )

    if problem is not None and origin is not None:
        allowed = ", ".join(dict.fromkeys(agent.allowed_origins)) or "none"
        return _error(
            request,
            403,
            locale,
            "This site may not embed this chat",
            f"The page at {origin[:200]} is not one of the origins allowed to embed the agent "
            f"“{agent.name}” (allowed: {allowed}). The site owner can add it to the agent's "
            "allowed origins.",
        )

    accent = query.get("accent")
    config = {
        "agentId": agent.id,
        "agentName": agent.name,
        "greeting": agent.greeting,
        "parentOrigin": origin,
        "mode": _pick(query.get("mode"), MODES, "bubble") if origin else "standalone",
        "locale": locale,
        "theme": theme,
        "accent": accent if accent and _ACCENT.fullmatch(accent) else None,
        "accentText": accent_text(accent) if accent and _ACCENT.fullmatch(accent) else None,
        # Simulated runs (seed 003): tools return their simulation result; for trying an
        # agent out standalone (the console's "try it" pane), never for an embedded widget.
        "simulate": origin is None and query.get("simulate") == "1",
        "apiBase": request.scope.get("root_path", ""),
        "maxBodyBytes": runtime.settings.max_body_bytes,
        # The page's handlers can answer client-side tools only (server-side ones run a block).
        "tools": [
            {"name": tool.name, "description": tool.description, "title": tool.title or tool.name}
            for tool in agent.tools
            if getattr(tool, "kind", "client") == "client"
        ],
        # What the page's context may weigh (hostcall/page_context.py), so the widget refuses
        # early what the server would; null: the agent admits none.
        "pageContext": agent.page_context.to_wire() if agent.page_context else None,
        # Which tools the page may register (hostcall/page_tools.py); null: none, and the
        # page-tools code is never loaded.
        "pageTools": agent.page_tools.to_wire() if agent.page_tools else None,
        # The built-in person tool's calls read "Asking for a person…", not its id and input.
        "personTools": [tool.name for tool in agent.tools if getattr(tool, "kind", "") == "person"],
        # Starters, follow-ups and when to ask for a rating (hostcall/suggestions.py); null:
        # the widget loads none of it.
        "suggest": widget_config(agent.suggestions, agent.rating),
        # Which files the visitor may attach, so the widget refuses early what the server
        # would (hostcall/attachments/policy.py); null: no attach button.
        "attachments": agent.attachments.to_wire() if agent.attachments else None,
    }
    # The widget picks the language (snippet, else the browser's languages); preload the
    # strings it will most likely ask for.
    likely = locale or _accept_language(request.headers.get("accept-language", ""))
    context = {
        "locale": likely,
        "theme": theme,
        "mode": config["mode"],
        "title": agent.name,
        "config": config,
        "modules": (*WIDGET_MODULES, f"locale-{likely}.js"),
    }
    # MCP Apps' views run in frames of the apps origins (hostcall/apps/), and only there: no
    # frame at all when none is set (default-src 'none'). Under a template, the origins of
    # this agent's MCP servers by name, not the template's wildcard: the widget frames no
    # other server's origin.
    servers = [b.server for b in agent.mcp]
    sources = runtime.apps.frame_sources(servers) if runtime.apps is not None else ()
    apps = " ".join(sources) or None
    return _page(request, 200, origin or "'self'", context, _image_origins(agent), apps)


def _image_origins(agent: Agent) -> tuple[str, ...]:
    """The origins the agent's result views may show images from (docs/agents.md "Views"):
    the browser holds the widget to them too, whatever a result's address says."""
    # The visitor's attached images are fetched with the session token and drawn from
    # object URLs (an <img> cannot send the token): blob: is the page's own bytes.
    own = ("blob:",) if agent.attachments is not None else ()
    views = [t.view for t in agent.tools if t.view is not None]
    listed = [o for v in views for o in v.image_hosts if o != SELF]
    for binding in agent.mcp:  # a server's tools are read when a run starts; their views now
        for override in binding.overrides.values():
            view = override.get("view")
            hosts = view.get("image_hosts", []) if isinstance(view, dict) else []
            listed += [normalize_origin(o) for o in hosts if o != SELF]
    return tuple(dict.fromkeys([*own, *listed]))
