"""Signing in and out of the console. Sign-in attempts are rate-limited per address and per
name (``limits``), before any password is hashed; the address is the one Starlette gives
(``request.client``: the proxy's, unless uvicorn trusts it and reads ``X-Forwarded-For``),
never a header read here. The sign-in form carries its own CSRF token (bound to a cookie),
and a sign-in the browser says comes from another origin is refused, so a foreign page, or
a neighbour on another port of this host that planted the cookie, cannot sign a browser in
to an account of its choosing."""

from __future__ import annotations

import secrets
import unicodedata

from itsdangerous import BadSignature
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hostcall.console.accounts import Role, authenticate
from hostcall.console.audit import record
from hostcall.console.cookies import delete_private_cookie, read_private_cookie
from hostcall.console.cookies import set_private_cookie as set_cookie
from hostcall.console.render import page
from hostcall.console.session import (
    COOKIE,
    LOGIN_COOKIE,
    LOGIN_FORM_MAX_AGE,
    SESSION_MAX_AGE,
    console_state,
    guarded,
    operator_of,
    read_form,
)
from hostcall.console.text import TEXT

HOME = "/console/conversations"
# Who a refused or limited sign-in is recorded as: the name typed is the attacker's choice
# (it may be a real user's, or a forged line), so it is a bounded, sanitized detail only.
ANONYMOUS = "anonymous"
MAX_AUDITED_NAME = 64


def audited_name(name: str) -> str:
    """The typed name as the audit log keeps it: no control or format characters, bounded."""
    kept = "".join("?" if unicodedata.category(c)[0] == "C" else c for c in name)
    return kept[:MAX_AUDITED_NAME]


def _foreign(request: Request) -> bool:
    """Whether the browser says this request comes from a page of another origin. A page on
    another port of this host is "same-site" (sites ignore ports), not "same-origin"; a
    browser too old for ``Sec-Fetch-Site`` still sends ``Origin`` on a form post. Clients
    that send neither are not browsers, and cannot be tricked into signing in."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return False
    return origin != f"{request.url.scheme}://{request.url.netloc}"


def _next(value: str | None) -> str:
    """Only a console path: never an absolute or protocol-relative URL (open redirect)."""
    if value and value.startswith("/console") and not value.startswith("//") and "\\" not in value:
        return value
    return HOME


def _form(request: Request, *, status: int = 200, error: str = "", name: str = "") -> Response:
    state = console_state(request)
    nonce = read_private_cookie(request, LOGIN_COOKIE) or secrets.token_urlsafe(16)
    response = page(
        request,
        "login.html",
        None,
        status=status,
        error=error,
        name=name,
        next=_next(request.query_params.get("next")),
        csrf=state.login_csrf.dumps(nonce),
    )
    set_cookie(response, request, LOGIN_COOKIE, nonce, LOGIN_FORM_MAX_AGE)
    return response


async def login_page(request: Request) -> Response:
    if await console_state(request).operator(request) is not None:
        return RedirectResponse(_next(request.query_params.get("next")), 303)
    return _form(request)


async def login(request: Request) -> Response:
    state = console_state(request)
    text = TEXT[_lang(request)]
    form = await read_form(request)
    name = form.get("name", "").strip()[:64]
    nonce = read_private_cookie(request, LOGIN_COOKIE)
    try:
        signed = state.login_csrf.loads(form.get("csrf", ""), max_age=LOGIN_FORM_MAX_AGE)
    except BadSignature:
        signed = None
    if not nonce or signed != nonce or _foreign(request):
        return _form(request, status=403, error=text["login_expired"], name=name)
    services, clock = state.runtime.services, state.runtime.clock
    # The address Starlette gives: behind a proxy uvicorn trusts, the client's own.
    address = request.client.host if request.client else "unknown"
    allowed = state.limiter.hit(state.per_address, "console-login", address)
    allowed = state.limiter.hit(state.per_name, "console-login-name", name.lower()) and allowed
    if not allowed:
        # Recorded once a minute per address and name, so a flood cannot fill the log.
        if state.limiter.hit(state.audit_limited, "console-login-audit", address, name.lower()):
            await record(
                services.audit,
                clock,
                ANONYMOUS,
                "login.limited",
                name=audited_name(name),
                address=address,
            )
        response = _form(request, status=429, error=text["login_limited"], name=name)
        response.headers["Retry-After"] = "60"
        return response
    user = await authenticate(services.operators, name, form.get("password", ""))
    if user is None:
        await record(
            services.audit,
            clock,
            ANONYMOUS,
            "login.refused",
            name=audited_name(name),
            address=address,
        )
        return _form(request, status=401, error=text["login_failed"], name=name)
    await record(services.audit, clock, user.name, "login", address=address)
    response = RedirectResponse(_next(form.get("next")), 303)
    set_cookie(response, request, COOKIE, await state.start_session(user), SESSION_MAX_AGE)
    delete_private_cookie(response, request, LOGIN_COOKIE)
    return response


@guarded(Role.OPERATOR)
async def logout(request: Request) -> Response:
    operator = operator_of(request)
    state = console_state(request)
    # Ended on the server: a copy of the cookie (kept, or stolen) no longer signs anyone in.
    await state.end_session(operator)
    await record(state.runtime.services.audit, state.runtime.clock, operator.name, "logout")
    response = RedirectResponse("/console/login", 303)
    delete_private_cookie(response, request, COOKIE)
    return response


def _lang(request: Request) -> str:
    from hostcall.console.render import preferences

    return preferences(request)[0]
