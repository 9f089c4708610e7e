"""A real MCP server with MCP Apps views, for the server's tests, built with the SDK's own
``MCPServer`` over streamable HTTP on loopback: tools that declare a ``ui://`` view
(``_meta.ui.resourceUri``, and the older flat key), an app-only tool, a write, and
resources that are what a view must be, or are not (the wrong type, too large, missing).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

MIME = "text/html;profile=mcp-app"
VIEW_HTML = "<!doctype html><title>Tasks</title><p id=tasks>the board's tasks</p>"
CSP = {
    "connectDomains": ["https://api.example.com", "http://tracker.example.net", "*"],
    "resourceDomains": ["https://cdn.example.com", "http://127.0.0.1:9", "'unsafe-eval'"],
    "frameDomains": [],
}
READ = ToolAnnotations(read_only_hint=True)
# A view that speaks: it says ui/initialize to its parent (the sandbox proxy, which relays
# it), echoes back whatever it is sent, and reports what it could and could not reach.
ECHO_HTML = """<!doctype html><title>Echo</title><p>echo</p><script>
const report = (method, params) => parent.postMessage({jsonrpc: "2.0", method, params}, "*");
window.addEventListener("message", (e) => {
  if (e.source === parent) report("echo", {got: e.data});
});
const tries = {};
try { tries.top = String(top.document.title); } catch (err) { tries.top = "refused"; }
try { localStorage.setItem("k", "v"); tries.storage = localStorage.getItem("k"); }
catch (err) { tries.storage = "refused"; }
document.addEventListener("securitypolicyviolation", (e) => {
  report("violation", {directive: e.effectiveDirective, blocked: e.blockedURI});
});
fetch(UNDECLARED).then(() => report("fetched", {}), () => report("fetch_failed", {}));
parent.postMessage({jsonrpc: "2.0", id: 1, method: "ui/initialize", params: tries}, "*");
</script>"""


class Task(BaseModel):
    id: str
    title: str


class Tasks(BaseModel):
    tasks: list[Task]


def _ui(uri: str, **more: object) -> dict[str, object]:
    return {"ui": {"resourceUri": uri, **more}}


def build(*, undeclared: str = "http://127.0.0.1:9/") -> MCPServer:
    """``undeclared``: an address on loopback the echo view tries to fetch, undeclared."""
    server = MCPServer("test-apps", log_level="WARNING")

    @server.tool(annotations=READ, meta=_ui("ui://board/tasks.html"))
    def show_tasks() -> Tasks:
        """Shows the board's tasks in a view."""
        return Tasks(tasks=[Task(id="t1", title="Write release notes")])

    @server.tool(annotations=READ, meta=_ui("ui://board/tasks.html", visibility=["app"]))
    def task_details(task_id: str) -> Task:
        """The view's own: one task's details."""
        return Task(id=task_id, title=f"details of {task_id}")

    # App-only with no view of its own: what lets a view ask for it is the binding alone.
    @server.tool(meta={"ui": {"visibility": ["app"]}})
    def delete_task(task_id: str) -> str:
        """A write a view asks for: deletes a task."""
        return f"deleted {task_id}"

    @server.tool(annotations=READ, meta={"ui/resourceUri": "ui://board/tasks.html"})
    def flat_tasks() -> Tasks:
        """Declares its view with the older flat key."""
        return Tasks(tasks=[])

    @server.tool(annotations=READ, meta=_ui("ui://board/plain.html"))
    def plain_view() -> str:
        """Its view is plain HTML, not an MCP App's."""
        return "plain"

    @server.tool(annotations=READ, meta=_ui("ui://board/huge.html"))
    def huge_view() -> str:
        """Its view is past what one view may weigh."""
        return "huge"

    @server.tool(annotations=READ, meta=_ui("ui://board/missing.html"))
    def missing_view() -> str:
        """Its view does not exist."""
        return "missing"

    @server.tool(annotations=READ, meta=_ui("https://board.example.com/view.html"))
    def web_view() -> str:
        """Declares a view that is not a ui:// resource."""
        return "web"

    @server.resource("ui://board/tasks.html", mime_type=MIME,
                     meta={"ui": {"csp": CSP, "prefersBorder": True}})  # fmt: skip
    def tasks_view() -> str:
        return VIEW_HTML

    @server.tool(annotations=READ, meta=_ui("ui://board/echo.html"))
    def echo_view() -> str:
        """Shows a view that echoes what it is sent."""
        return "echo"

    @server.resource("ui://board/echo.html", mime_type=MIME)
    def echo_resource() -> str:
        # Undeclared: the view's policy declares no connect domain at all.
        return ECHO_HTML.replace("UNDECLARED", repr(undeclared))

    @server.resource("ui://board/plain.html", mime_type="text/html")
    def plain_resource() -> str:
        return "<p>plain</p>"

    @server.resource("ui://board/huge.html", mime_type=MIME)
    def huge_resource() -> str:
        return "<p>" + "x" * (600 * 1024) + "</p>"

    return server


@contextmanager
def http_server(*, undeclared: str = "http://127.0.0.1:9/") -> Iterator[str]:
    """The server over streamable HTTP on loopback; yields its URL."""
    from hostcall.qa.servers import serve_in_thread

    app = build(undeclared=undeclared).streamable_http_app()
    with serve_in_thread(app, lifespan="on") as port:
        yield f"http://127.0.0.1:{port}/mcp"
