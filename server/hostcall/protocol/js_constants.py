"""Writes the widget's copy of the wire's names and limits, in three modules, so that each
loads with the code that reads it (the open widget's weight): protocol.js, what the idle
widget speaks (the page's messages, the limits); protocol-events.js, the stream's event
names, read by the code a conversation loads; protocol-codes.js, the states and codes only
the tool calls' code reads.

    python -m hostcall.protocol.js_constants > widget/protocol.js
    python -m hostcall.protocol.js_constants protocol-events.js > widget/protocol-events.js
    python -m hostcall.protocol.js_constants protocol-codes.js > widget/protocol-codes.js

The output is committed (the widget has no build step); tests/unit/test_protocol.py fails
when it differs from what this module generates now, so the two cannot drift.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from hostcall.calls.transitions import OPEN_STATES, CallState
from hostcall.errors import SURFACE_ERROR_CODES
from hostcall.protocol import limits
from hostcall.protocol.codes import RunErrorCode
from hostcall.protocol.events import CustomName, EventType

# postMessage types between the widget (widget/app.js) and the embed loader (widget/loader.js).
# The loader, a classic script within a 3 KB budget, builds the same names from the words;
# the test checks its word list too.
# The hello goes to window.parent with the exact parent origin and carries one end of a
# MessageChannel; everything after it goes over that channel:
#   hello     widget -> page: I am up; tell me your handlers (with the page's port)
#   handlers  page -> widget: {tools: [names], token, pageTools: JSON text of the page's
#             WebMCP tools}, again whenever they change
#   ready     widget -> page: started (its conversation resumed, or none yet): send away
#   call      widget -> page: {callId, toolName, input, inputSchema, outputSchema, deadline,
#             pageTool}: a page tool runs through WebMCP's executeTool
#   result    page -> widget: {callId, output} | {callId, error: {message}} | {callId, noHandler}
#   cancel    widget -> page: {callId}: settled elsewhere or expired; abort ctx.signal
#   send      page -> widget: {text}: send as the user
#   focus     page -> widget: the panel opened; focus the composer
#   close     widget -> page: close the panel (close button, Escape)
#   event     widget -> page: {event, detail} for Hostcall('on', ...)
#   active    page -> widget: the person typed, clicked or focused on the host page (outside
#             the frame)
#   identity  page -> widget: the page's identity token for its visitor ("" after logout,
#             docs/identity.md)
#   attention widget -> page: a reply, or a card that now needs the person (the closed
#             launcher's badge counts them)
#   context   page -> widget: {key, value} of Hostcall('context', …), one entry (null
#             removes it; `clone`: why the page could not copy the value), each again
#             after a hello; the widget checks it against the agent's caps
MESSAGES = ("hello", "handlers", "ready", "call", "result", "cancel", "send", "focus", "close",
            "event", "active", "identity", "attention", "context")  # fmt: skip


LIMITS = ("MAX_BODY_BYTES", "MAX_MESSAGE_CHARS", "MAX_REASON_CHARS", "MAX_ERROR_MESSAGE_CHARS")


def _map(name: str, pairs: Iterable[tuple[str, object]]) -> str:
    body = "".join(f"  {key}: {json.dumps(value, ensure_ascii=False)},\n" for key, value in pairs)
    return f"export const {name} = Object.freeze({{\n{body}}})\n"


def _list(name: str, values: Iterable[str]) -> str:
    return f"export const {name} = Object.freeze({json.dumps(list(values))})\n"


def _header(name: str) -> str:
    args = "" if name == "protocol.js" else f" {name}"
    return (
        "// Generated from hostcall/protocol/ by `python -m hostcall.protocol.js_constants"
        f"{args} >\n"
        f"// widget/{name}`. Do not edit: change the Python and run the command again.\n"
    )


def _protocol() -> list[str]:
    return [
        "/** Sizes the server allows: `_BYTES` are UTF-8 bytes, `_CHARS` code points. */\n"
        + _map("LIMITS", ((name, getattr(limits, name)) for name in LIMITS)),
        "/** postMessage types between the widget and the embed loader. */\n"
        + _map("MSG", ((m.upper(), f"hostcall:{m}") for m in MESSAGES)),
    ]


def _events() -> list[str]:
    return [
        "/** AG-UI event types (the JSON's `type`, and the SSE `event:` name). */\n"
        + _map("EVENT", ((t.name, t.value) for t in EventType)),
        "/** Names of Hostcall's own events (AG-UI CUSTOM; also their SSE `event:` name). */\n"
        + _map("CUSTOM", ((n.name, n.value) for n in CustomName)),
    ]


def _codes() -> list[str]:
    terminal = [s.value for s in CallState if s not in OPEN_STATES]
    return [
        "/** A tool call's states (docs/protocol.md). */\n"
        + _map("CALL_STATE", ((s.name, s.value) for s in CallState)),
        _list("TERMINAL_STATES", terminal),
        "/** Why a run stopped: the `code` of `RUN_ERROR` (docs/protocol.md). */\n"
        + _map("RUN_ERROR_CODE", ((c.name, c.value) for c in RunErrorCode)),
        "/** Error codes a surface may send instead of a result. */\n"
        + _list("SURFACE_ERROR_CODES", sorted(SURFACE_ERROR_CODES)),
    ]


#: widget/<name> -> its constants.
MODULES = {"protocol.js": _protocol, "protocol-events.js": _events, "protocol-codes.js": _codes}


def generate(name: str = "protocol.js") -> str:
    return "\n".join([_header(name), *MODULES[name]()])


if __name__ == "__main__":
    import sys

    print(generate(*sys.argv[1:2]), end="")
