"""Test helpers for the operator console: accounts, and a browser-like client that signs in."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from argon2 import PasswordHasher
from starlette.testclient import TestClient

from hostcall.console import accounts
from hostcall.console.accounts import add_user

PASSWORD = "correct horse battery"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html) or re.search(
        r'name="hc-csrf" content="([^"]+)"', html
    )
    assert found, "no CSRF token in the page"
    return found.group(1)


class ConsoleClient:
    """One person's browser: its own cookies, signed in as ``name``."""

    def __init__(self, app: Any, runtime: Any, name: str, role: str) -> None:
        self.http = TestClient(app, follow_redirects=False)
        # On the event loop of the server it talks to (Harness.start keeps it on app.state),
        # not one of its own per request: the store's writer lock is an asyncio.Lock, bound
        # to the loop that first waits on it, and one waited on from two loops raised
        # "bound to a different event loop" when the console's request and the server's
        # sweeper met at it.
        portal = getattr(app.state, "test_portal", None)
        self.http.portal = portal

        async def ensure_user() -> None:
            if await runtime.store.get_user(name) is None:
                await add_user(runtime.store, name, role, PASSWORD, clock=runtime.clock)

        if portal is not None:
            portal.call(ensure_user)
        else:
            asyncio.run(ensure_user())
        self.name = name
        self.csrf = ""
        self.login()

    def login(self, password: str = PASSWORD) -> Any:
        form = self.http.get("/console/login")
        assert form.status_code == 200, form.text
        r = self.http.post(
            "/console/login",
            data={"csrf": csrf_of(form.text), "name": self.name, "password": password},
        )
        if r.status_code == 303:
            page = self.http.get("/console/conversations")
            self.csrf = csrf_of(page.text)
        return r

    def post(self, path: str, body: Any = None, *, csrf: str | None = None) -> Any:
        token = self.csrf if csrf is None else csrf
        headers = {"X-CSRF-Token": token} if token else {}
        return self.http.post(path, json=body if body is not None else {}, headers=headers)

    def form(self, path: str, fields: dict[str, str], *, csrf: str | None = None) -> Any:
        token = self.csrf if csrf is None else csrf
        return self.http.post(path, data={**fields, **({"csrf": token} if token else {})})


@pytest.fixture
def fast_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    """Argon2id with light parameters: the same algorithm and code, a fraction of the time
    (the defaults cost ~0.5 s a hash on a busy CI machine)."""
    fast = PasswordHasher(time_cost=1, memory_cost=1024)
    monkeypatch.setattr(accounts, "_hasher", fast)  # the dummy for unknown names follows it
