"""Hostcall's QA kit: a pytest plugin (``pytest11`` entry point ``hostcall``) with fixtures
that start a real Hostcall server, serve a host page with the snippet on another origin, and
drive the widget in Chromium through Playwright. Documented in docs/testing.md.

    servers.py   free ports, a Hostcall subprocess, a host page in a thread (no Playwright)
    widget.py    ``Widget``: send, wait_for_call, approve, edit, reject, fill_form, …
    plugin.py    the fixtures

Playwright is imported only by the fixtures that need it, so the plugin loads (and does
nothing) in a project that installed Hostcall without its ``[test]`` extra.
"""

from hostcall.qa.servers import HostcallServer, HostPage, free_port, start_hostcall

__all__ = ["HostPage", "HostcallServer", "free_port", "start_hostcall"]
