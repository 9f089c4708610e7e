"""The apps origins: where views run, one per MCP server, and the one door that keeps their
routes apart.

The same process answers the widget's origin and the apps origins. On an apps origin only
``/apps/…`` exists; on any other (the widget's, the console's) ``/apps/…`` does not. Which
origin a request is for is read from its ``Host`` header against the setting, so a view can
never reach the widget's API with the browser's credentials of an apps origin (it has none),
and the widget's pages are never served where views run.

The setting is a template, ``https://{server}.apps.example.com``: each MCP server's views
run on an origin of their own, its name the first DNS label. Views of two servers open in
one chat are then cross-origin to each other: a view that walks the widget's frames reaches
the other server's proxy and view as windows, never as documents — it cannot read them,
inject script into them, or speak through their proxy for the other server. A plain origin
(``https://apps.example.com``) puts every server's views on that one origin: they can reach
each other, so ``hostcall check`` warns when two servers with views share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from hostcall.errors import NotFound, StoreError
from hostcall.origins import DEFAULT_PORTS, BadOrigin, normalize_origin
from hostcall.responses import error_response

#: The environment variable that names the apps origin (docs/deploy.md, "The apps origin").
APPS_ORIGIN_VARIABLE = "HOSTCALL_APPS_ORIGIN"
PREFIX = "/apps/"
#: Where a template names the server: the first label of its host.
SERVER = "{server}"
#: The scope key under which ``AppsHost`` leaves what it matched (``OnApps``).
SCOPE_KEY = "hostcall.apps"
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def is_label(name: str) -> bool:
    """Whether ``name`` is a DNS label as a host holds it: lowercase letters, digits and
    inner hyphens, at most 63 characters (an MCP server's name must be, under a template)."""
    return _LABEL.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class OnApps:
    """A request for an apps origin: the server whose origin it is, or None on a plain
    origin (every server's)."""

    server: str | None


@dataclass(frozen=True, slots=True)
class AppsOrigin:
    """``https://{server}.apps.example.com`` (a template: ``template`` is true), or a plain
    ``https://apps.example.com``; beside a local server ``http://{server}.localhost:8002``."""

    origin: str
    template: bool = False

    @classmethod
    def parse(cls, value: str) -> AppsOrigin:
        value = value.strip()
        try:
            if SERVER not in value:
                return cls(normalize_origin(value))
            rest = value.partition("://")[2]
            if value.count(SERVER) != 1 or not rest.startswith(SERVER + "."):
                raise BadOrigin(value, f"{SERVER} must be the first label of the host, once "
                                "(https://{server}.apps.example.com)")  # fmt: skip
            sample = normalize_origin(value.replace(SERVER, "x"))
        except BadOrigin as exc:
            raise StoreError(
                f"{APPS_ORIGIN_VARIABLE}: {exc}", target=APPS_ORIGIN_VARIABLE
            ) from None
        return cls(sample.replace("://x.", f"://{SERVER}.", 1), template=True)

    def origin_of(self, server: str) -> str | None:
        """The origin of ``server``'s views; None under a template for a name that is not
        a DNS label (its views are not shown: ``hostcall check`` says so)."""
        if not self.template:
            return self.origin
        return self.origin.replace(SERVER, server, 1) if is_label(server) else None

    def url(self, server: str, path: str) -> str | None:
        origin = self.origin_of(server)
        return None if origin is None else f"{origin}{path}"

    def frame_sources(self, servers: list[str] | tuple[str, ...]) -> tuple[str, ...]:
        """The origins a widget whose agent uses ``servers`` may frame."""
        found = [o for s in servers if (o := self.origin_of(s)) is not None]
        return tuple(dict.fromkeys(found))

    def match(self, host_header: str, scheme: str) -> OnApps | None:
        """Whether a request with this ``Host`` (and scheme) is for an apps origin, and
        for which server's."""
        hostname, port = _host_port(host_header, scheme)
        parts = urlsplit(self.origin.replace(SERVER, "x"))
        if not hostname or port != (parts.port or DEFAULT_PORTS[parts.scheme]):
            return None
        if not self.template:
            return OnApps(None) if hostname == parts.hostname else None
        label, _, rest = hostname.partition(".")
        suffix = (parts.hostname or "").partition(".")[2]
        return OnApps(label) if rest == suffix and is_label(label) else None

    def serves(self, host_header: str, scheme: str) -> bool:
        """Whether a request with this ``Host`` (and scheme) is for an apps origin."""
        return self.match(host_header, scheme) is not None


def apps_origin(setting: str | None, environ: dict[str, str]) -> AppsOrigin | None:
    """The apps origin the settings give, else ``HOSTCALL_APPS_ORIGIN``; None if neither."""
    value = setting or environ.get(APPS_ORIGIN_VARIABLE, "").strip()
    return AppsOrigin.parse(value) if value else None


def _host_port(header: str, scheme: str) -> tuple[str, int]:
    header = header.strip().lower()
    try:
        parts = urlsplit(f"//{header}")
        port = parts.port
    except ValueError:
        return "", 0
    return parts.hostname or "", port or DEFAULT_PORTS.get(scheme, 80)


class AppsHost:
    """``/apps/…`` on the apps origins only, and nothing else there: any other path is
    ``404`` on an apps origin, and ``/apps/…`` is ``404`` on every other origin (and
    everywhere when no apps origin is set). What matched is left in the scope
    (``SCOPE_KEY``) for the routes: a view is served on its own server's origin only."""

    def __init__(self, app: ASGIApp, *, apps: AppsOrigin | None) -> None:
        self.app = app
        self.apps = apps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        on = None
        if self.apps is not None:  # else no origin is one: the Host header cannot matter
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
            on = self.apps.match(host, scope.get("scheme", "http"))
        if (on is not None) != path.startswith(PREFIX):
            where = "an apps origin" if on is not None else "this origin"
            response = error_response(NotFound(f"{path} is not served on {where}"))
            await response(scope, receive, send)
            return
        if on is not None:
            scope[SCOPE_KEY] = on
        await self.app(scope, receive, send)


def on_apps(scope: Scope) -> OnApps:
    """What ``AppsHost`` matched for a request of an apps route."""
    found = scope.get(SCOPE_KEY)
    assert isinstance(found, OnApps), "apps routes exist on the apps origins only"
    return found
