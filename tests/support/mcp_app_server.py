"""An MCP server with a view (MCP Apps), built with the SDK's own ``MCPServer``, for the
widget's host-side tests: ``show_board`` declares ``ui://board/view.html``, a hand-made view
(``app_view.html``) that a test drives step by step; ``add_task`` is a write its view may
ask for. The official SDK's views are
tests/fixtures/mcp_apps' (its e2e suite)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

VIEW_URI = "ui://board/view.html"
VIEW_MIME = "text/html;profile=mcp-app"
VIEW = Path(__file__).with_name("app_view.html")


class Task(BaseModel):
    id: str
    title: str


class Board(BaseModel):
    column: str
    tasks: list[Task]


def build(show: str = "show_board") -> MCPServer:
    """``show``: the name of the tool that shows the board (two such servers in one agent
    need two names)."""
    server = MCPServer("test-board", log_level="WARNING")

    read = ToolAnnotations(read_only_hint=True)

    @server.tool(name=show, title="Show the board", annotations=read,
                 meta={"ui": {"resourceUri": VIEW_URI}})  # fmt: skip
    def show_board(column: str) -> Board:
        """Shows a column of the board, in its view."""
        tasks = [Task(id="T-1", title="Ship it"), Task(id="T-2", title="Write release notes")]
        return Board(column=column, tasks=tasks)

    # App-only, with no view of its own: a view's write is allowed by the binding alone.
    @server.tool(meta={"ui": {"visibility": ["app"]}})
    def add_task(title: str) -> Task:
        """Adds a task (a write, callable by the view only)."""
        return Task(id="T-3", title=title)

    border = {"ui": {"prefersBorder": True}}

    @server.resource(VIEW_URI, name="board-view", mime_type=VIEW_MIME, meta=border)
    def board_view() -> str:
        return VIEW.read_text()

    return server


@contextmanager
def http_server(show: str = "show_board") -> Iterator[str]:
    """The server over streamable HTTP on loopback; yields its URL."""
    from hostcall.qa.servers import serve_in_thread

    with serve_in_thread(build(show).streamable_http_app(), lifespan="on") as port:
        yield f"http://127.0.0.1:{port}/mcp"
