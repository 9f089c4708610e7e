"""A view's Content-Security-Policy, built from the domains its resource declares and from
nothing else (the MCP Apps ``_meta.ui.csp``: ``connectDomains``, ``resourceDomains``,
``frameDomains``).

A declared domain is kept only as an exact ``https://`` origin, or an ``http://`` one on
loopback (a server beside the host, in tests and development); anything else — a wildcard,
a path, ``http://`` on the internet, ``data:``, a keyword such as ``'unsafe-eval'`` — is
dropped with a warning in the log, never widened into the policy. What is not declared is
never allowed: with nothing declared a view may load its own inline script and style and
reach nothing at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hostcall.origins import BadOrigin, normalize_origin

log = logging.getLogger("hostcall.apps")
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
DECLARED_KEYS = ("connectDomains", "resourceDomains", "frameDomains")


@dataclass(frozen=True, slots=True)
class DeclaredDomains:
    connect: tuple[str, ...] = ()
    resource: tuple[str, ...] = ()
    frame: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {
            "connectDomains": list(self.connect),
            "resourceDomains": list(self.resource),
            "frameDomains": list(self.frame),
        }


def accepted_origin(value: Any) -> str | None:
    """``value`` as an origin a view may be allowed, or None."""
    try:
        origin = normalize_origin(value)
    except BadOrigin:
        return None
    parts = urlsplit(origin)
    if parts.scheme == "https" or parts.hostname in LOOPBACK:
        return origin
    return None


def declared_domains(csp: Any, *, where: str) -> DeclaredDomains:
    """The usable origins of a resource's ``_meta.ui.csp``; the rest logged and dropped."""
    if not isinstance(csp, Mapping):
        return DeclaredDomains()
    kept: dict[str, list[str]] = {key: [] for key in DECLARED_KEYS}
    dropped: list[str] = []
    for key in DECLARED_KEYS:
        values = csp.get(key, [])
        for value in values if isinstance(values, list) else [values]:
            origin = accepted_origin(value)
            if origin is None:
                dropped.append(str(value)[:200])
            elif origin not in kept[key]:
                kept[key].append(origin)
    if dropped:
        log.warning("%s: declared domains dropped from the view's policy (only https:// "
                    "origins, or http:// on loopback, are taken): %s", where, dropped)  # fmt: skip
    return DeclaredDomains(
        connect=tuple(kept["connectDomains"]),
        resource=tuple(kept["resourceDomains"]),
        frame=tuple(kept["frameDomains"]),
        dropped=tuple(dropped),
    )


def view_policy(domains: DeclaredDomains, *, ancestors: Sequence[str]) -> str:
    """The view's ``Content-Security-Policy`` header. ``ancestors``: every origin that may
    frame it, at any depth (the proxy's, the widget's, the pages embedding the widget):
    ``frame-ancestors`` holds for the whole chain, not the parent alone."""

    def sources(*base: str, extra: Sequence[str]) -> str:
        listed = [*base, *extra]
        return " ".join(listed) if listed else "'none'"

    resource = domains.resource
    own = ("'self'", "'unsafe-inline'")
    media = ("'self'", "data:")
    return "; ".join([
        "default-src 'none'",
        "script-src " + sources(*own, extra=resource),
        "style-src " + sources(*own, extra=resource),
        "img-src " + sources(*media, extra=resource),
        "font-src " + sources(*media, extra=resource),
        "media-src " + sources(*media, extra=resource),
        "connect-src " + sources(extra=domains.connect),
        "frame-src " + sources(extra=domains.frame),
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors " + " ".join(dict.fromkeys(ancestors)),
    ])  # fmt: skip
