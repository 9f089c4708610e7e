"""The MCP Apps host's pure rules: which declared domains a view's policy may hold, the
policy itself, which requests are for the apps origin, and a tool's ``_meta.ui``."""

from __future__ import annotations

import logging

import pytest

from hostcall.apps.csp import DeclaredDomains, declared_domains, view_policy
from hostcall.apps.origin import AppsOrigin, OnApps, apps_origin
from hostcall.apps.resources import declared_ui
from hostcall.errors import StoreError

APPS = "https://apps.example.com"


def directives(policy: str) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.split(" ", 1)[1] for d in policy.split("; ")}


def test_only_https_or_loopback_origins_are_taken_from_a_declaration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    declared = {
        "connectDomains": ["https://API.example.com", "http://api.example.com", "*",
                           "https://*.example.com", "https://api.example.com/path",
                           "http://localhost:8080", "data:", 42],
        "resourceDomains": ["'unsafe-eval'", "https://cdn.example.com"],
        "frameDomains": "https://frames.example.com",
    }  # fmt: skip
    with caplog.at_level(logging.WARNING, "hostcall.apps"):
        domains = declared_domains(declared, where="the view")
    assert domains.connect == ("https://api.example.com", "http://localhost:8080")
    assert domains.resource == ("https://cdn.example.com",)
    assert domains.frame == ("https://frames.example.com",)
    assert "http://api.example.com" in domains.dropped and "'unsafe-eval'" in domains.dropped
    assert "dropped" in caplog.text and "https://*.example.com" in caplog.text


def test_a_view_with_nothing_declared_reaches_nothing() -> None:
    policy = directives(view_policy(declared_domains(None, where="v"), ancestors=[APPS]))
    assert policy["default-src"] == "'none'"
    assert policy["connect-src"] == "'none'" and policy["frame-src"] == "'none'"
    assert policy["script-src"] == "'self' 'unsafe-inline'"
    assert policy["frame-ancestors"] == APPS
    assert policy["base-uri"] == "'none'" and policy["form-action"] == "'none'"


def test_declared_domains_go_to_their_directives_only() -> None:
    domains = DeclaredDomains(connect=("https://api.example.com",),
                              resource=("https://cdn.example.com",),
                              frame=("https://maps.example.com",))  # fmt: skip
    policy = directives(view_policy(domains, ancestors=[APPS, "https://chat.example.com"]))
    assert policy["connect-src"] == "https://api.example.com"
    for name in ("script-src", "style-src", "img-src", "font-src", "media-src"):
        assert "https://cdn.example.com" in policy[name]
        assert "https://api.example.com" not in policy[name]
    assert policy["frame-src"] == "https://maps.example.com"
    assert policy["frame-ancestors"] == f"{APPS} https://chat.example.com"


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "serves"),
    [
        ("https://apps.example.com", "apps.example.com", "https", True),
        ("https://apps.example.com", "apps.example.com:443", "https", True),
        ("https://apps.example.com", "APPS.example.com", "https", True),
        ("https://apps.example.com", "example.com", "https", False),
        ("https://apps.example.com", "apps.example.com:8443", "https", False),
        ("http://127.0.0.1:8002", "127.0.0.1:8002", "http", True),
        ("http://127.0.0.1:8002", "127.0.0.1:8000", "http", False),
        ("http://127.0.0.1:8002", "localhost:8002", "http", False),
        ("http://127.0.0.1:8002", "127.0.0.1:bad", "http", False),
        ("http://127.0.0.1:8002", "", "http", False),
    ],
)
def test_which_requests_are_for_the_apps_origin(
    origin: str, host: str, scheme: str, serves: bool
) -> None:
    assert AppsOrigin.parse(origin).serves(host, scheme) is serves


@pytest.mark.parametrize("bad", ["apps.example.com", "https://apps.example.com/", "ftp://x",
                                 "https://*.example.com"])  # fmt: skip
def test_a_bad_apps_origin_is_refused(bad: str) -> None:
    with pytest.raises(StoreError, match="HOSTCALL_APPS_ORIGIN"):
        apps_origin(None, {"HOSTCALL_APPS_ORIGIN": bad})


TEMPLATE = "https://{server}.apps.example.com"


@pytest.mark.parametrize(
    ("template", "host", "server"),
    [
        (TEMPLATE, "board.apps.example.com", "board"),
        (TEMPLATE, "BOARD.apps.example.com:443", "board"),
        (TEMPLATE, "crm-2.apps.example.com", "crm-2"),
        (TEMPLATE, "apps.example.com", None),  # the template's own suffix names no server
        (TEMPLATE, "a.b.apps.example.com", None),  # two labels: not the template's
        (TEMPLATE, "-x.apps.example.com", None),  # no DNS label
        (TEMPLATE, "board.apps.example.com:8443", None),
        (TEMPLATE, "board.example.com", None),
        ("http://{server}.localhost:8002", "board.localhost:8002", "board"),
        ("http://{server}.localhost:8002", "127.0.0.1:8002", None),
        ("http://{server}.localhost:8002", "localhost:8002", None),
    ],
)
def test_a_template_gives_each_server_its_origin(
    template: str, host: str, server: str | None
) -> None:
    apps = AppsOrigin.parse(template)
    assert apps.template
    on = apps.match(host, "https" if template.startswith("https") else "http")
    assert (on.server if on else None) == server
    if server is not None:
        assert (
            apps.origin_of(server)
            == f"{template.split('{')[0]}{server}." + (template.split("}.", 1)[1])
        )


def test_a_template_is_normalised_and_names_only_dns_labels() -> None:
    apps = AppsOrigin.parse(" HTTPS://{server}.Apps.Example.com:443 ")
    assert apps == AppsOrigin(TEMPLATE, template=True)
    assert apps.origin_of("board") == "https://board.apps.example.com"
    assert apps.url("board", "/apps/proxy") == "https://board.apps.example.com/apps/proxy"
    for bad in ("Board", "crm_1", "-x", "x-", "a" * 64, "", "a.b"):
        assert apps.origin_of(bad) is None, bad
    assert apps.origin_of("a" * 63) is not None
    assert apps.frame_sources(["board", "crm_1", "board", "notes"]) == (
        "https://board.apps.example.com",
        "https://notes.apps.example.com",
    )
    plain = AppsOrigin.parse("https://apps.example.com")
    assert not plain.template and plain.origin_of("crm_1") == "https://apps.example.com"
    assert plain.frame_sources(["board", "notes"]) == ("https://apps.example.com",)
    assert plain.match("apps.example.com", "https") == OnApps(None)


@pytest.mark.parametrize(
    "bad",
    [
        "https://apps.{server}.example.com",  # not the first label
        "https://{server}-apps.example.com",  # part of a label
        "https://{server}.{server}.example.com",
        "https://{server}.apps.example.com/views",
        "{server}.apps.example.com",
        "https://{server}",
        "https://{server}.*.example.com",
    ],
)
def test_a_bad_template_is_refused(bad: str) -> None:
    with pytest.raises(StoreError, match="HOSTCALL_APPS_ORIGIN"):
        apps_origin(None, {"HOSTCALL_APPS_ORIGIN": bad})


def test_the_setting_wins_over_the_environment_and_none_means_no_views() -> None:
    assert apps_origin(None, {}) is None
    assert apps_origin(None, {"HOSTCALL_APPS_ORIGIN": "  "}) is None
    found = apps_origin("http://127.0.0.1:9", {"HOSTCALL_APPS_ORIGIN": APPS})
    assert found == AppsOrigin("http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("meta", "uri", "app_only"),
    [
        ({"ui": {"resourceUri": "ui://a/v.html"}}, "ui://a/v.html", False),
        ({"ui/resourceUri": "ui://a/v.html"}, "ui://a/v.html", False),
        ({"ui": {"resourceUri": "ui://a/v.html", "visibility": ["app"]}}, "ui://a/v.html", True),
        ({"ui": {"resourceUri": "ui://a/v.html", "visibility": ["model", "app"]}},
         "ui://a/v.html", False),
        ({"ui": {"resourceUri": "https://a.example/v.html"}}, None, False),
        ({"ui": {"resourceUri": "ui://" + "a" * 600}}, None, False),
        ({"ui": "ui://a/v.html"}, None, False),
        (None, None, False),
    ],
)  # fmt: skip
def test_a_tools_declared_view(meta: object, uri: str | None, app_only: bool) -> None:
    found = declared_ui(meta)  # type: ignore[arg-type]
    assert (found.resource_uri, found.app_only) == (uri, app_only)
