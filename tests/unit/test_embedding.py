"""Embed mistakes said exactly: the operator's log and ``GET /embed/check`` tell
an unknown agent from an origin the agent does not allow; a light accent gets dark text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hostcall.pages import accent_text
from tests.support.harness import Harness

BOARD_ORIGIN = "http://localhost:8001"  # the demo agent's allowed origin


def widget_config(html: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="hc-config">(.*?)</script>', html)
    assert found, html[:500]
    return dict(json.loads(found.group(1)))


def test_check_says_the_agent_is_unknown(harness: Harness) -> None:
    r = harness.http.get("/embed/check", params={"agent": "plannr", "origin": BOARD_ORIGIN})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.json()["code"] == "unknown_agent"
    assert "no agent 'plannr'" in r.json()["message"]
    assert "data-agent" in r.json()["message"]


def test_check_says_the_origin_is_not_allowed(harness: Harness) -> None:
    r = harness.http.get(
        "/embed/check", params={"agent": "planner", "origin": "https://shop.test/"}
    )
    assert r.json()["code"] == "origin_not_allowed"
    message = r.json()["message"]
    assert "https://shop.test is not an allowed origin of the agent 'planner'" in message
    assert "allowed_origins" in message
    # The public check does not list the origins that are allowed.
    assert BOARD_ORIGIN not in message


def test_check_is_ok_for_an_allowed_origin(harness: Harness) -> None:
    r = harness.http.get("/embed/check", params={"agent": "planner", "origin": BOARD_ORIGIN})
    assert r.json() == {"ok": True}


@pytest.mark.parametrize("origin", ["https://shop.test; script-src *", "javascript:alert(1)", ""])
def test_check_refuses_what_is_not_an_origin(harness: Harness, origin: str) -> None:
    r = harness.http.get("/embed/check", params={"agent": "planner", "origin": origin})
    assert r.json()["code"] == "origin_not_allowed"


def test_refused_widget_pages_are_logged_with_the_exact_mistake(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    unknown = harness.http.get("/widget/plannr", params={"origin": BOARD_ORIGIN})
    assert unknown.status_code == 404
    refused = harness.http.get("/widget/planner", params={"origin": "https://shop.test"})
    assert refused.status_code == 403
    lines = [r.getMessage() for r in caplog.records if r.name == "hostcall.embed"]
    assert lines[0].startswith("widget refused: unknown_agent: agent=plannr origin=http://local")
    assert lines[1].startswith(
        "widget refused: origin_not_allowed: agent=planner origin=https://shop.test"
    )


def test_a_refused_check_is_logged_with_the_exact_mistake(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The loader asks before drawing anything: the operator learns it from the check."""
    harness.http.get("/embed/check", params={"agent": "plannr", "origin": BOARD_ORIGIN})
    harness.http.get("/embed/check", params={"agent": "planner", "origin": BOARD_ORIGIN})
    lines = [r.getMessage() for r in caplog.records if r.name == "hostcall.embed"]
    assert len(lines) == 1, lines  # an allowed page is not logged
    assert lines[0].startswith("widget refused: unknown_agent: agent=plannr origin=http://local")


@pytest.mark.parametrize(
    ("accent", "text"),
    [("#facc15", "#000"), ("#fde68a", "#000"), ("#ffffff", "#000"), ("#4f46e5", "#fff"),
     ("#0f766e", "#fff"), ("#000", "#fff"), ("#facc1580", "#000"), ("#fc1", "#000")],
)  # fmt: skip
def test_accent_text_is_the_higher_contrast_of_black_and_white(accent: str, text: str) -> None:
    assert accent_text(accent) == text


def test_widget_page_passes_the_accent_text_colour(harness: Harness) -> None:
    page = harness.http.get("/widget/planner", params={"origin": BOARD_ORIGIN, "accent": "#facc15"})
    config = widget_config(page.text)
    assert config["accent"] == "#facc15" and config["accentText"] == "#000"
    plain = widget_config(harness.http.get("/widget/planner", params={"origin": BOARD_ORIGIN}).text)
    assert plain["accentText"] is None


def test_the_page_api_types_are_served_beside_the_loader(harness: Harness) -> None:
    r = harness.http.get("/embed.d.ts")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/typescript")
    assert "interface HostcallApi" in r.text and "HandlerContext" in r.text


def test_the_widget_page_frames_no_apps_origin_without_mcp_servers_or_a_setting(
    tmp_path: Path, agents_dir: Path, harness: Harness, made: list[Harness]
) -> None:
    # None set: no frame of any origin (default-src 'none' holds for frames too).
    unset = harness.http.get("/widget/planner", params={"origin": BOARD_ORIGIN})
    assert "frame-src" not in unset.headers["content-security-policy"]
    # Set, for an agent that uses no MCP server: no view to frame, so no frame either (the
    # origins of an agent's servers: tests/system/test_apps_origins.py).
    made.append(h := Harness(tmp_path / "apps", agents_dir, apps_origin="http://127.0.0.1:8010"))
    csp = h.http.get("/widget/planner", params={"origin": BOARD_ORIGIN}).headers[
        "content-security-policy"
    ]
    assert "frame-src" not in csp and f"frame-ancestors {BOARD_ORIGIN}" in csp
