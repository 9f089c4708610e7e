"""Signing in and out of the console. Sign-in attempts are rate-limited per address and per
name (``limits``), and the sign-in form carries its own CSRF token (bound to a cookie), so a
foreign page cannot sign a browser in to an account of its choosing."""

from __future__ import annotations

import secrets

from itsdangerous import BadSignature
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hostcall.console.accounts import Role, authenticate
from hostcall.console.audit import record
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
    set_cookie,
)
from hostcall.console.text import TEXT

HOME = "/console/conversations"


def _next(value: str | None) -> str:
    """Only a console path: never an absolute or protocol-relative URL (open redirect)."""
    if value and value.startswith("/console") and not value.startswith("//") and "\\" not in value:
        return value
    return HOME


def _form(request: Request, *, status: int = 200, error: str = "", name: str = "") -> Response:
    state = console_state(request)
    nonce = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(16)
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
    nonce = request.cookies.get(LOGIN_COOKIE)
    try:
        signed = state.login_csrf.loads(form.get("csrf", ""), max_age=LOGIN_FORM_MAX_AGE)
    except BadSignature:
        signed = None
    if not nonce or signed != nonce:
        return _form(request, status=403, error=text["login_expired"], name=name)
    address = request.client.host if request.client else "unknown"
    allowed = state.limiter.hit(state.per_address, "console-login", address)
    allowed = state.limiter.hit(state.per_name, "console-login-name", name.lower()) and allowed
    if not allowed:
        response = _form(request, status=429, error=text["login_limited"], name=name)
        response.headers["Retry-After"] = "60"
        return response
    user = await authenticate(state.runtime.store, name, form.get("password", ""))
    if user is None:
        await record(state.runtime.store, name or "(empty)", "login.refused", address=address)
        return _form(request, status=401, error=text["login_failed"], name=name)
    await record(state.runtime.store, user.name, "login", address=address)
    response = RedirectResponse(_next(form.get("next")), 303)
    set_cookie(
        response, request, COOKIE, state.session_cookie(user.name, user.password_hash),
        SESSION_MAX_AGE,
    )  # fmt: skip
    response.delete_cookie(LOGIN_COOKIE, path="/console")
    return response


@guarded(Role.OPERATOR)
async def logout(request: Request) -> Response:
    operator = operator_of(request)
    await record(console_state(request).runtime.store, operator.name, "logout")
    response = RedirectResponse("/console/login", 303)
    response.delete_cookie(COOKIE, path="/console")
    return response


def _lang(request: Request) -> str:
    from hostcall.console.render import preferences

    return preferences(request)[0]
