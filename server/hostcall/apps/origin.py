"""The apps origin: where views run, and the one door that keeps its routes apart.

The same process answers two origins. On the apps origin only ``/apps/…`` exists; on any
other (the widget's, the console's) ``/apps/…`` does not. Which origin a request is for is
read from its ``Host`` header against the setting, so a view can never reach the widget's
API with the browser's credentials of the apps origin (it has none), and the widget's pages
are never served where views run.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from hostcall.errors import NotFound, StoreError
from hostcall.origins import DEFAULT_PORTS, BadOrigin, normalize_origin
from hostcall.responses import error_response

#: The environment variable that names the apps origin (docs/deploy.md, "The apps origin").
APPS_ORIGIN_VARIABLE = "HOSTCALL_APPS_ORIGIN"
PREFIX = "/apps/"


@dataclass(frozen=True, slots=True)
class AppsOrigin:
    """``https://apps.example.com``, or ``http://127.0.0.1:8002`` beside a local server."""

    origin: str

    @classmethod
    def parse(cls, value: str) -> AppsOrigin:
        try:
            return cls(normalize_origin(value.strip()))
        except BadOrigin as exc:
            raise StoreError(
                f"{APPS_ORIGIN_VARIABLE}: {exc}", target=APPS_ORIGIN_VARIABLE
            ) from None

    @property
    def host(self) -> str:
        """``host:port`` as a ``Host`` header names it, the port always written."""
        parts = urlsplit(self.origin)
        return f"{parts.hostname}:{parts.port or DEFAULT_PORTS[parts.scheme]}"

    def serves(self, host_header: str, scheme: str) -> bool:
        """Whether a request with this ``Host`` (and scheme) is for the apps origin."""
        return _host_port(host_header, scheme) == self.host

    def url(self, path: str) -> str:
        return f"{self.origin}{path}"


def apps_origin(setting: str | None, environ: dict[str, str]) -> AppsOrigin | None:
    """The apps origin the settings give, else ``HOSTCALL_APPS_ORIGIN``; None if neither."""
    value = setting or environ.get(APPS_ORIGIN_VARIABLE, "").strip()
    return AppsOrigin.parse(value) if value else None


def _host_port(header: str, scheme: str) -> str:
    header = header.strip().lower()
    try:
        parts = urlsplit(f"//{header}")
        port = parts.port
    except ValueError:
        return ""
    return f"{parts.hostname}:{port or DEFAULT_PORTS.get(scheme, 80)}"


class AppsHost:
    """``/apps/…`` on the apps origin only, and nothing else there: any other path is
    ``404`` on the apps origin, and ``/apps/…`` is ``404`` on every other origin (and
    everywhere when no apps origin is set)."""

    def __init__(self, app: ASGIApp, *, apps: AppsOrigin | None) -> None:
        self.app = app
        self.apps = apps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
        on_apps = self.apps is not None and self.apps.serves(host, scope.get("scheme", "http"))
        if on_apps != path.startswith(PREFIX):
            where = "the apps origin" if on_apps else "this origin"
            response = error_response(NotFound(f"{path} is not served on {where}"))
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
