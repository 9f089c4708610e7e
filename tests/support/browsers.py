"""A browser for unit tests: the resume key its page keeps and the HttpOnly cookies the server
set, sent back as a browser sends them (TestClient's own jar never sends a ``Secure`` cookie
to its plain http base URL)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.harness import ORIGIN, Conv, Harness

# The embedding page (in the demo agent's allowed_origins): it names the resume cookie.
PARENT = "http://localhost:8001"


@dataclass
class Browser:
    key: str | None  # None: a page that keeps no storage
    jar: dict[str, str] = field(default_factory=dict)
    parent: str = PARENT

    def body(self) -> dict[str, str]:
        return {"parentOrigin": self.parent, **({"resumeKey": self.key} if self.key else {})}

    def cookies(self) -> dict[str, str]:
        return {"Cookie": "; ".join(f"{n}={v}" for n, v in self.jar.items())} if self.jar else {}

    def keep(self, response: Any) -> None:
        """Keep the cookies a response set, as the browser's jar does."""
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            self.jar[name] = rest.partition(";")[0]


def opened(body: dict[str, Any]) -> Conv:
    return Conv(body["conversationId"], body["sessionToken"], body["streamToken"])


def started(h: Harness, browser: Browser, agent: str = "planner", **headers: str) -> Conv:
    """A conversation a widget started in ``browser`` (``headers``: an identity token)."""
    r = h.http.post(
        f"/api/agents/{agent}/conversations",
        json=browser.body(),
        headers=ORIGIN | browser.cookies() | headers,
    )
    assert r.status_code == 201, r.text
    browser.keep(r)
    return opened(r.json())
