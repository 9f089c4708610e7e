"""Hostcall's QA kit: a pytest plugin (``pytest11`` entry point ``hostcall``) with fixtures
that start a real Hostcall server, serve a host page with the snippet on another origin, and
drive the widget in Chromium through Playwright. Documented in docs/testing.md.

    servers.py   free ports, a Hostcall subprocess, a host page in a thread (no Playwright)
    widget.py    ``Widget``: send, wait_for_call, approve, edit, reject, fill_form, …
    plugin.py    the fixtures

Playwright is imported only by the fixtures that need it, and by ``Widget`` when it is first
named (``from hostcall.qa import Widget``), so the plugin loads (and does nothing) in a project
that installed Hostcall without its ``[test]`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hostcall.qa.servers import HostcallServer, HostPage, free_port, start_hostcall

if TYPE_CHECKING:
    from hostcall.qa.widget import Widget

__all__ = ["HostPage", "HostcallServer", "Widget", "free_port", "start_hostcall"]


def __getattr__(name: str) -> Any:
    if name == "Widget":
        from hostcall.qa.widget import Widget

        return Widget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
