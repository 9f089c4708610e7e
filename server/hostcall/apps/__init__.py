"""MCP Apps: a tool's view, an HTML resource of its MCP server, shown in the widget's thread.

A view runs on an origin of its own (``HOSTCALL_APPS_ORIGIN``: ``origin.py``), never the
widget's, in two frames: the sandbox proxy (``proxy.html``, ``proxy.js``) the widget frames,
and inside it the view, served by ``routes.py`` with a CSP built from the resource's declared
domains only (``csp.py``). Where the view comes from — the tool's ``_meta.ui`` at listing,
the resource read after the call — is ``resources.py``; what a call's wire entry says of it,
``references.py``; the view's requests back to Hostcall (a tool of its server, its model
context) go through ``bridge.py``. docs/agents.md, "MCP Apps".
"""
