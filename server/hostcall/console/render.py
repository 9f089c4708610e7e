"""Console pages: Jinja2 templates, the language and theme, and the headers every page gets.

The console is never framed (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``) and runs
no inline script or style; each page's data travels as JSON in a ``<script
type="application/json">`` block its module reads with ``textContent``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from hostcall.console.cookies import set_cookie
from hostcall.console.operator import Operator
from hostcall.console.text import LOCALES, TEXT, accept_language, error_sentence
from hostcall.errors import HostcallError
from hostcall.protocol.codes import ErrorCode

TEMPLATES = Path(__file__).resolve().parent / "templates"
THEMES = ("auto", "light", "dark")
LANG_COOKIE = "hc_console_lang"
THEME_COOKIE = "hc_console_theme"

# frame-src 'self': the designer's "try it" pane shows the widget of this same server.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; frame-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# Bidi embeddings, overrides and isolates: in a visitor's, a model's or a page's text they
# reverse what follows ("evil" shown as "live"). Removed from everything a template writes, as
# the pages' scripts remove them from what they draw (widget/chat.js `plain`).
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _without_bidi_controls(value: Any) -> Any:
    if isinstance(value, Markup):
        return Markup(_BIDI_CONTROLS.sub("", value))
    return _BIDI_CONTROLS.sub("", value) if isinstance(value, str) else value


_env = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=_without_bidi_controls,
)


def iso(timestamp: float) -> str:
    return (
        datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


_env.filters["iso"] = iso
# Keep the agent file's own key order in data blocks, so a save diffs only what changed.
_env.policies["json.dumps_kwargs"] = {"sort_keys": False}


def preferences(request: Request) -> tuple[str, str, bool]:
    """The page's language and theme (query, else cookie, else the browser), and whether the
    query set them (then they are remembered in cookies)."""
    query = request.query_params
    lang = query.get("lang") or request.cookies.get(LANG_COOKIE) or ""
    theme = query.get("theme") or request.cookies.get(THEME_COOKIE) or "auto"
    lang = lang if lang in LOCALES else accept_language(request.headers.get("accept-language", ""))
    theme = theme if theme in THEMES else "auto"
    return lang, theme, "lang" in query or "theme" in query


def page(
    request: Request,
    template: str,
    operator: Operator | None,
    *,
    status: int = 200,
    data: Any = None,
    **context: Any,
) -> HTMLResponse:
    lang, theme, remember = preferences(request)
    html = _env.get_template(template).render(
        t=TEXT[lang],
        lang=lang,
        theme=theme,
        themes=THEMES,
        locales=LOCALES,
        operator=operator,
        path=request.url.path,
        data=data,
        **context,
    )
    response = HTMLResponse(html, status_code=status, headers=HEADERS)
    if remember:
        set_cookie(response, request, LANG_COOKIE, lang, 365 * 24 * 3600)
        set_cookie(response, request, THEME_COOKIE, theme, 365 * 24 * 3600)
    return response


def error_page(request: Request, operator: Operator | None, error: HostcallError) -> Response:
    """The error in the reader's language (the server's English message if it has none); an
    agent file's problems also as ``hostcall check`` words them, verbatim, like the designer,
    and a refused field's rule as the server words it: the translated sentence names the
    field, only the server's says what the field must hold."""
    lang, _, _ = preferences(request)
    said = error_sentence(lang, error.code.value, error.details) or error.message
    verbatim = error.code in (ErrorCode.AGENT_INVALID, ErrorCode.BAD_REQUEST)
    checked = verbatim and said != error.message
    detail = error.message if checked else ""
    return page(request, "error.html", operator, status=error.status, message=said, detail=detail)
