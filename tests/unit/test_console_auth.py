"""The console's doors: accounts, sign-in, sessions, CSRF and roles.

Every console route is tried without a session, with a session of too low a role, and with
a missing or wrong CSRF token; each is refused and nothing in the store or on disk changes.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from hostcall.console import console_routes
from hostcall.console.accounts import AccountError, Role, add_user, authenticate
from hostcall.console.render import CSP
from tests.support.harness import BOARD, Harness
from tests.unit.console_client import PASSWORD, ConsoleClient, csrf_of, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

# The role each console route needs; a new route must be added here (the test checks).
NEEDS = {
    "/console": Role.OPERATOR,
    "/console/logout": Role.OPERATOR,
    "/console/conversations": Role.OPERATOR,
    "/console/conversations/{conversation_id}": Role.OPERATOR,
    "/console/api/conversations": Role.OPERATOR,
    "/console/api/conversations/{conversation_id}": Role.OPERATOR,
    "/console/api/calls/{call_id}/answer": Role.OPERATOR,
    "/console/api/calls/{call_id}/decision": Role.OPERATOR,
    "/console/api/calls/{call_id}/expire": Role.OPERATOR,
    "/console/api/runs/{run_id}/cancel": Role.OPERATOR,
    "/console/audit": Role.ADMIN,
    "/console/agents": Role.DESIGNER,
    "/console/agents/{agent_id}": Role.DESIGNER,
    "/console/agents/{agent_id}/duplicate": Role.DESIGNER,
    "/console/agents/{agent_id}/disable": Role.DESIGNER,
    "/console/agents/{agent_id}/enable": Role.DESIGNER,
    "/console/agents/{agent_id}/versions": Role.DESIGNER,
    "/console/agents/{agent_id}/rollback": Role.DESIGNER,
    "/console/api/agents/{agent_id}/check": Role.DESIGNER,
    "/console/api/agents/{agent_id}": Role.DESIGNER,
    "/console/agents/{agent_id}/try": Role.DESIGNER,
}
OPEN = {"/console/login", "/console/static/{name}"}


def _routes() -> list[tuple[str, str]]:
    found = []
    for route in console_routes():
        assert isinstance(route, Route)
        if route.path in OPEN:
            continue
        for method in sorted((route.methods or set()) - {"HEAD"}):
            found.append((method, route.path))
    return found


ROUTES = _routes()


def test_every_console_route_is_listed_with_the_role_it_needs() -> None:
    assert {path for _, path in ROUTES} <= set(NEEDS)


@pytest.fixture
def pending(harness: Harness) -> dict[str, str]:
    """A conversation with a call waiting for a person, and its ids."""
    conv = harness.conversation()
    run_id = harness.say(conv, "what should I work on next?")
    call = harness.open_call(conv)
    return {
        "conversation_id": conv.id,
        "call_id": call["toolCallId"],
        "run_id": run_id,
        "agent_id": "planner",
    }


def _url(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path)


def _state(harness: Harness) -> tuple[Any, ...]:
    """Everything a console action could change: the store's rows and the agent files."""
    store = harness.runtime.store
    files = sorted(
        (str(p.relative_to(harness.agents_dir)), hashlib.sha256(p.read_bytes()).hexdigest())
        for p in harness.agents_dir.rglob("*.json")
    )

    async def rows() -> tuple[Any, ...]:
        summaries = await store.list_conversations(_everything())
        conversations = [c.conversation.id for c in summaries]
        calls = [
            (c.id, c.state, c.outcome) for cid in conversations for c in await store.list_calls(cid)
        ]
        runs = [(r.id, r.status) for cid in conversations for r in await store.list_runs(cid)]
        return (
            calls,
            runs,
            [(e.actor, e.action) for e in await store.list_audit(limit=10_000)],
            await store.list_agent_versions("planner"),
            [u.name for u in await store.list_users()],
        )

    return (files, *harness.call(rows), sorted(harness.runtime.agents))


def _everything() -> Any:
    from hostcall.store.records import ConversationQuery

    return ConversationQuery(limit=10_000)


def _body_for(path: str) -> dict[str, Any]:
    """A body that would succeed with the right credentials, so refusals prove the guard."""
    if path.endswith("/answer"):
        return {"output": BOARD}
    if path.endswith("/decision"):
        return {"decision": "reject"}
    if path.startswith("/console/api/agents"):
        return {"agent": {"id": "planner"}}
    return {}


def test_anonymous_requests_are_refused_and_change_nothing(
    harness: Harness, pending: dict[str, str]
) -> None:
    anonymous = TestClient(harness.app, follow_redirects=False)
    before = _state(harness)
    for method, path in ROUTES:
        url = _url(path, pending)
        r = anonymous.request(method, url, json=_body_for(path))
        if method == "GET" and not path.startswith("/console/api/"):
            assert r.status_code == 303, (method, url, r.status_code)
            assert r.headers["location"].startswith("/console/login?next=/console"), url
        else:
            assert r.status_code == 401, (method, url, r.status_code, r.text)
            if path.startswith("/console/api/"):
                assert r.json()["error"]["code"] == "not_signed_in"
    assert _state(harness) == before


def test_a_forged_or_foreign_session_cookie_is_anonymous(harness: Harness) -> None:
    other = Harness(harness.tmp_path / "other", harness.agents_dir)
    try:
        foreign = ConsoleClient(other.app, other.runtime, "ada", "admin")
        cookie = foreign.http.cookies.get("hc_console")
        assert cookie
    finally:
        other.stop()
    # Another server's secret keys: the same name means nothing here.
    harness.call(add_user, harness.runtime.store, "ada", "admin", PASSWORD)
    stranger = TestClient(harness.app, follow_redirects=False, cookies={"hc_console": cookie})
    assert stranger.get("/console/api/conversations").status_code == 401
    stranger.cookies.set("hc_console", "not.a.cookie")
    assert stranger.get("/console/api/conversations").status_code == 401


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.DESIGNER])
def test_under_privileged_sessions_are_refused_and_change_nothing(
    harness: Harness, pending: dict[str, str], role: Role
) -> None:
    person = ConsoleClient(harness.app, harness.runtime, f"user-{role}", role.value)
    before = _state(harness)
    tried = 0
    for method, path in ROUTES:
        if role.allows(NEEDS[path]):
            continue
        tried += 1
        url = _url(path, pending)
        r = person.http.request(
            method, url, json=_body_for(path), headers={"X-CSRF-Token": person.csrf}
        )
        assert r.status_code == 403, (method, url, r.status_code)
        if path.startswith("/console/api/"):
            assert r.json()["error"]["code"] == "role_required"
        else:
            assert "role" in r.text and r.headers["content-type"].startswith("text/html")
    assert tried >= (10 if role is Role.OPERATOR else 1)
    assert _state(harness) == before


def test_state_changing_requests_without_the_right_csrf_token_are_refused(
    harness: Harness, pending: dict[str, str]
) -> None:
    admin = ConsoleClient(harness.app, harness.runtime, "ada", "admin")
    other = ConsoleClient(harness.app, harness.runtime, "bob", "admin")
    before = _state(harness)
    posts = [(m, p) for m, p in ROUTES if m == "POST"]
    assert len(posts) >= 12
    for _, path in posts:
        url = _url(path, pending)
        for token in ("", "forged-token", other.csrf):  # missing, wrong, another session's
            r = admin.http.post(url, json=_body_for(path), headers={"X-CSRF-Token": token})
            assert r.status_code == 403, (url, token, r.status_code)
            r = admin.http.post(url, data={"csrf": token, "id": "copy", "version": "1"})
            assert r.status_code == 403, (url, token, r.status_code)
    assert _state(harness) == before


def test_console_pages_are_never_framed_and_carry_no_inline_script(
    harness: Harness, pending: dict[str, str]
) -> None:
    admin = ConsoleClient(harness.app, harness.runtime, "ada", "admin")
    pages = [p for m, p in ROUTES if m == "GET" and not p.startswith("/console/api/")]
    for path in [*pages, "/console/login"]:
        r = admin.http.get(_url(path, pending))
        if r.status_code == 303:
            continue
        assert r.headers["content-security-policy"] == CSP, path
        assert "frame-ancestors 'none'" in CSP and "script-src 'self'" in CSP
        assert r.headers["x-frame-options"] == "DENY"
        assert "<script>" not in r.text and " style=" not in r.text, path


def test_console_pages_show_no_token_of_the_visitors_conversation(
    harness: Harness, pending: dict[str, str]
) -> None:
    operator = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    cid = pending["conversation_id"]
    for url in (f"/console/conversations/{cid}", f"/console/api/conversations/{cid}"):
        text = operator.http.get(url).text
        assert pending["call_id"] in text
        for word in ("resultToken", "decisionToken", "sessionToken", "streamToken", "token"):
            assert word not in text, (url, word)


# ---------------------------------------------------------------------------- accounts and login


def test_passwords_are_stored_as_argon2_hashes_and_checked(harness: Harness) -> None:
    store = harness.runtime.store
    user = harness.call(add_user, store, "ada", "designer", PASSWORD)
    assert user.password_hash.startswith("$argon2id$") and PASSWORD not in user.password_hash
    assert harness.call(authenticate, store, "ada", PASSWORD) == user
    assert harness.call(authenticate, store, "ada", PASSWORD + "!") is None
    assert harness.call(authenticate, store, "nobody", PASSWORD) is None


@pytest.mark.parametrize(
    ("name", "role", "password", "message"),
    [
        ("", "operator", PASSWORD, "user name"),
        ("../etc", "operator", PASSWORD, "user name"),
        ("ada", "root", PASSWORD, "role 'root'"),
        ("ada", "operator", "short", "10 to 1024 characters"),
    ],
)
def test_bad_accounts_are_refused_with_the_reason(
    harness: Harness, name: str, role: str, password: str, message: str
) -> None:
    with pytest.raises(AccountError, match=re.escape(message)):
        harness.call(add_user, harness.runtime.store, name, role, password)
    assert harness.call(harness.runtime.store.list_users) == []


def test_a_taken_name_is_refused_and_the_first_account_kept(harness: Harness) -> None:
    first = harness.call(add_user, harness.runtime.store, "ada", "admin", PASSWORD)
    with pytest.raises(AccountError, match="already a user"):
        harness.call(add_user, harness.runtime.store, "ada", "operator", "another password")
    assert harness.call(harness.runtime.store.list_users) == [first]


def test_login_sets_a_strict_httponly_session_cookie_and_is_audited(harness: Harness) -> None:
    harness.call(add_user, harness.runtime.store, "ada", "operator", PASSWORD)
    browser = TestClient(harness.app, follow_redirects=False)
    form = browser.get("/console/login?next=/console/audit")
    r = browser.post(
        "/console/login",
        data={"csrf": csrf_of(form.text), "name": "ada", "password": PASSWORD,
              "next": "/console/conversations?waiting=1"},
    )  # fmt: skip
    assert r.status_code == 303
    assert r.headers["location"] == "/console/conversations?waiting=1"
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and "hc_console=" in v)
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
    assert [(e.actor, e.action) for e in harness.call(harness.runtime.store.list_audit)] == [
        ("ada", "login")
    ]


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/api/x"])
def test_login_never_redirects_outside_the_console(harness: Harness, target: str) -> None:
    harness.call(add_user, harness.runtime.store, "ada", "operator", PASSWORD)
    browser = TestClient(harness.app, follow_redirects=False)
    form = browser.get("/console/login")
    r = browser.post(
        "/console/login",
        data={"csrf": csrf_of(form.text), "name": "ada", "password": PASSWORD, "next": target},
    )
    assert r.headers["location"] == "/console/conversations"


def test_wrong_password_is_refused_without_a_session_and_audited(harness: Harness) -> None:
    harness.call(add_user, harness.runtime.store, "ada", "operator", PASSWORD)
    browser = TestClient(harness.app, follow_redirects=False)
    form = browser.get("/console/login")
    r = browser.post(
        "/console/login", data={"csrf": csrf_of(form.text), "name": "ada", "password": "nope"}
    )
    assert r.status_code == 401 and "Wrong name or password." in r.text
    assert "hc_console" not in browser.cookies
    assert browser.get("/console/api/conversations").status_code == 401
    assert [e.action for e in harness.call(harness.runtime.store.list_audit)] == ["login.refused"]


def test_login_without_its_form_token_is_refused(harness: Harness) -> None:
    harness.call(add_user, harness.runtime.store, "ada", "operator", PASSWORD)
    browser = TestClient(harness.app, follow_redirects=False)
    browser.get("/console/login")
    for token in ("", "forged"):
        r = browser.post(
            "/console/login", data={"csrf": token, "name": "ada", "password": PASSWORD}
        )
        assert r.status_code == 403 and "hc_console" not in browser.cookies
    fresh = TestClient(harness.app, follow_redirects=False)  # a token, but not its cookie
    token = csrf_of(browser.get("/console/login").text)
    r = fresh.post("/console/login", data={"csrf": token, "name": "ada", "password": PASSWORD})
    assert r.status_code == 403
    assert harness.call(harness.runtime.store.list_audit) == []


def test_login_attempts_are_rate_limited_per_name(harness: Harness) -> None:
    harness.call(add_user, harness.runtime.store, "ada", "operator", PASSWORD)
    browser = TestClient(harness.app, follow_redirects=False)
    token = csrf_of(browser.get("/console/login").text)
    for _ in range(5):
        r = browser.post("/console/login", data={"csrf": token, "name": "ada", "password": "x"})
        assert r.status_code == 401
    # The right password, too late: refused without even checking it.
    r = browser.post("/console/login", data={"csrf": token, "name": "ada", "password": PASSWORD})
    assert r.status_code == 429 and r.headers["retry-after"] == "60"
    assert "hc_console" not in browser.cookies
    assert [e.action for e in harness.call(harness.runtime.store.list_audit)].count("login") == 0


def test_logout_ends_the_session_in_this_browser(harness: Harness) -> None:
    operator = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    r = operator.form("/console/logout", {})
    assert r.status_code == 303 and r.headers["location"] == "/console/login"
    assert operator.http.get("/console/api/conversations").status_code == 401


def test_a_role_is_read_from_the_store_not_the_cookie(harness: Harness, tmp_path: Path) -> None:
    person = ConsoleClient(harness.app, harness.runtime, "ada", "admin")
    assert person.http.get("/console/audit").status_code == 200
    db = harness.runtime.store._db  # type: ignore[attr-defined]
    db.execute("UPDATE users SET role = 'operator' WHERE name = 'ada'")
    assert person.http.get("/console/audit").status_code == 403


def test_every_language_has_every_console_string_with_the_same_placeholders() -> None:
    from hostcall.console.text import TEXT

    english = TEXT["en"]
    for lang, words in TEXT.items():
        assert set(words) == set(english), lang
        for key, text in words.items():
            wanted = set(re.findall(r"\{\w+\}", english[key]))
            assert set(re.findall(r"\{\w+\}", text)) == wanted, (lang, key)


def test_console_static_files_are_served_by_bare_name_only(harness: Harness) -> None:
    anonymous = TestClient(harness.app)
    r = anonymous.get("/console/static/console.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert r.headers["x-content-type-options"] == "nosniff"
    for bad in ("../session.py", "..%2Fsession.py", "Console.js", "missing.js", "x.html"):
        assert anonymous.get(f"/console/static/{bad}").status_code == 404, bad
