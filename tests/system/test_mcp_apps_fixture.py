"""The MCP Apps fixture (tests/fixtures/mcp_apps/server.mjs), built with the official SDKs,
read with the protocol's official Python client: the tools say which view they have and who
sees them, and each view is the HTML profile with its declared CSP and the App bundle inlined
(so a view loads nothing from the network)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from tests.support.apps_fixture import AppsServer, apps_server

MIME = "text/html;profile=mcp-app"


@pytest.fixture(scope="module")
def fixture() -> Iterator[AppsServer]:
    with apps_server() as running:
        yield running


def dump(value: Any) -> dict[str, Any]:
    data: dict[str, Any] = value.model_dump(by_alias=True, exclude_none=True)
    return data


async def listing(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    async with Client(url) as client:
        tools = {t.name: dump(t) for t in (await client.list_tools()).tools}
        views = {}
        for uri in ("ui://tasks/view.html", "ui://hostile/view.html"):
            views[uri] = dump((await client.read_resource(uri)).contents[0])
        return tools, views


def test_tools_name_their_views_and_the_app_only_tool_says_so(fixture: AppsServer) -> None:
    tools, _ = asyncio.run(listing(fixture.url))
    assert sorted(tools) == ["refresh_tasks", "show_hostile", "show_tasks"]
    assert tools["show_tasks"]["_meta"]["ui"]["resourceUri"] == "ui://tasks/view.html"
    assert "visibility" not in tools["show_tasks"]["_meta"]["ui"]
    assert tools["refresh_tasks"]["_meta"]["ui"] == {
        "resourceUri": "ui://tasks/view.html",
        "visibility": ["app"],
    }
    assert tools["show_hostile"]["_meta"]["ui"]["resourceUri"] == "ui://hostile/view.html"


def test_views_are_the_app_profile_with_their_own_origin_as_only_domain(
    fixture: AppsServer,
) -> None:
    _, views = asyncio.run(listing(fixture.url))
    for uri, content in views.items():
        assert content["uri"] == uri
        assert content["mimeType"] == MIME
        assert content["_meta"]["ui"]["csp"] == {"connectDomains": [fixture.origin]}
        html = content["text"]
        assert html.startswith("<!doctype html>")
        # The App class is inlined: no script from anywhere.
        assert "const McpApps={" in html and "<script src" not in html
        assert "ui/notifications/initialized" in html
    assert views["ui://tasks/view.html"]["_meta"]["ui"]["prefersBorder"] is True


def test_show_tasks_answers_structured_tasks_and_is_recorded(fixture: AppsServer) -> None:
    async def call() -> Any:
        async with Client(fixture.url) as client:
            return await client.call_tool("show_tasks", {"filter": "pricing"})

    result = asyncio.run(call())
    assert result.structured_content == {
        "tasks": [{"id": "T-2", "title": "Review the pricing page", "done": True}]
    }
    assert {"name": "show_tasks", "arguments": {"filter": "pricing"}} in fixture.calls()
