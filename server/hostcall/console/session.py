"""Who is signed in to the console, and the guard every console route goes through.

The session is a signed cookie (``HttpOnly``, ``SameSite=Strict``; ``__Host-`` over https,
else path ``/console``) that names the user and a random session id, and binds a fingerprint
of the user's password hash. The session id is also kept in the store (as a digest), and a
cookie whose session is not there is anonymous: signing out, a new password, a new role or
the user's removal ends it on the server, not only in the browser that held it. The role is
read from the store on each request, never from the cookie. Each state-changing request
carries a CSRF token signed over the session id (header ``X-CSRF-Token``, or the form field
``csrf``).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from itsdangerous import BadSignature, URLSafeTimedSerializer
from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hostcall.console.accounts import Role
from hostcall.console.cookies import read_private_cookie
from hostcall.console.cookies import set_cookie as set_cookie  # login.py takes it from here
from hostcall.console.operator import Operator
from hostcall.console.render import error_page
from hostcall.errors import BadRequest, Forbidden, HostcallError, PayloadTooLarge, Unauthorized
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.reading import NOT_UTF8, refuse_unstorable, unstorable_text
from hostcall.runtime import Runtime, runtime_of
from hostcall.settings import load_secret_keys
from hostcall.store.console_records import ConsoleSession, User

COOKIE = "hc_console"
LOGIN_COOKIE = "hc_console_login"
SESSION_MAX_AGE = 12 * 3600
LOGIN_FORM_MAX_AGE = 3600
MAX_FORM_BYTES = 16 * 1024
API_PREFIX = "/console/api/"

Handler = Callable[[Request], Awaitable[Response]]


class ConsoleState:
    """Per-app console state: the signers and the login rate limiter."""

    def __init__(self, runtime: Runtime) -> None:
        settings = runtime.settings
        keys = list(settings.secret_keys or load_secret_keys(settings.db_path, settings.environ))
        self.runtime = runtime
        self.sessions = URLSafeTimedSerializer(keys, salt="hostcall.console-session")
        self.csrf = URLSafeTimedSerializer(keys, salt="hostcall.console-csrf")
        self.login_csrf = URLSafeTimedSerializer(keys, salt="hostcall.console-login")
        # In memory, per process: a login limit is a brake on guessing, not an accounting.
        self.limiter = MovingWindowRateLimiter(MemoryStorage())
        self.per_address = parse("20/minute")
        self.per_name = parse("5/minute")
        self.audit_limited = parse("1/minute")

    async def operator(self, request: Request) -> Operator | None:
        raw = read_private_cookie(request, COOKIE)
        if not raw:
            return None
        try:
            payload = self.sessions.loads(raw, max_age=SESSION_MAX_AGE)
        except BadSignature:
            return None
        if not isinstance(payload, dict):
            return None
        user = await self.runtime.services.operators.get_user(str(payload.get("u", "")))
        if user is None or payload.get("p") != fingerprint(user.password_hash):
            return None
        sid = str(payload.get("s", ""))
        holder = await self.runtime.services.operators.session_user(
            session_digest(sid), self.runtime.clock()
        )
        if holder != user.name:
            return None  # signed out, or ended by a change to the user
        return Operator(user.name, Role(user.role), sid, self.csrf.dumps(sid))

    async def start_session(self, user: User) -> str:
        """A new session of ``user``, stored; returns the cookie's value."""
        sid = secrets.token_urlsafe(32)
        now = self.runtime.clock()
        await self.runtime.services.operators.add_session(
            ConsoleSession(session_digest(sid), user.name, now, now + SESSION_MAX_AGE)
        )
        payload = {"u": user.name, "s": sid, "p": fingerprint(user.password_hash)}
        return self.sessions.dumps(payload)

    async def end_session(self, operator: Operator) -> None:
        await self.runtime.services.operators.end_session(session_digest(operator.sid))

    def csrf_ok(self, operator: Operator, token: str | None) -> bool:
        if not token:
            return False
        try:
            return bool(self.csrf.loads(token, max_age=SESSION_MAX_AGE) == operator.sid)
        except BadSignature:
            return False


def session_digest(sid: str) -> str:
    return hashlib.sha256(b"hostcall.console-session:" + sid.encode()).hexdigest()


def fingerprint(password_hash: str) -> str:
    return hashlib.sha256(password_hash.encode()).hexdigest()[:24]


def console_state(request: Request) -> ConsoleState:
    state = getattr(request.app.state, "console", None)
    if state is None:
        state = request.app.state.console = ConsoleState(runtime_of(request))
    assert isinstance(state, ConsoleState)
    return state


async def read_form(request: Request) -> dict[str, str]:
    """A urlencoded body (first value of each field), capped before parsing."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise PayloadTooLarge(f"the form is {len(body)} bytes; the limit is {MAX_FORM_BYTES}")
    if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
        return {}
    try:
        # Strict UTF-8 for the percent-encoded bytes too: a lone surrogate is not UTF-8.
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=50, errors="strict")
    except UnicodeDecodeError:
        raise unstorable_text("the form", NOT_UTF8) from None
    except ValueError:
        raise BadRequest("the form could not be read") from None
    form = {k: v[0] for k, v in fields.items()}
    # A NUL in a field (a sign-in name, say) would reach the store: refused here, for all.
    refuse_unstorable(form, "the form")
    return form


def guarded(role: Role) -> Callable[[Handler], Handler]:
    """Refuse anonymous (401, or a redirect to the login page for a page), under-privileged
    (403) and, for anything but GET, requests without this session's CSRF token (403)."""

    def wrap(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            is_page = not request.url.path.startswith(API_PREFIX)
            state = console_state(request)
            try:
                operator = await state.operator(request)
                if operator is None:
                    if is_page and request.method == "GET":
                        target = quote(request.url.path + _query(request), safe="/?=&")
                        return RedirectResponse(f"/console/login?next={target}", 303)
                    raise Unauthorized("sign in to the console first", code=ErrorCode.NOT_SIGNED_IN)
                if not operator.role.allows(role):
                    raise Forbidden(
                        f"this needs the {role.value} role; {operator.name} is "
                        f"{operator.role.value}",
                        code=ErrorCode.ROLE_REQUIRED,
                        role=role.value,
                        account=operator.name,
                        current=operator.role.value,
                    )
                if request.method != "GET":
                    form = await read_form(request)
                    token = request.headers.get("x-csrf-token") or form.get("csrf")
                    if not state.csrf_ok(operator, token):
                        raise Forbidden(
                            "the CSRF token is missing or wrong; reload the page",
                            code=ErrorCode.CSRF_FAILED,
                        )
                    request.state.form = form
                request.state.operator = operator
                return await handler(request)
            except HostcallError as exc:
                if not is_page:
                    raise
                who = getattr(request.state, "operator", None)
                return error_page(request, who, exc)

        endpoint.__name__ = handler.__name__
        endpoint.__doc__ = handler.__doc__
        return endpoint

    return wrap


def _query(request: Request) -> str:
    return f"?{request.url.query}" if request.url.query else ""


def operator_of(request: Request) -> Operator:
    operator: Operator = request.state.operator
    return operator


def form_of(request: Request) -> dict[str, Any]:
    form: dict[str, Any] = request.state.form
    return form
