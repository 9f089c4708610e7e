"""Environment variables an agent may have the server read: only those the operator lists
(``allowed_env`` in ``_platform.json``), and never the server's own settings.

An agent file names variables (a model's ``api_key_env``, a connection's ``{"env": NAME}``)
whose values the server sends to a host; whoever can write an agent file could otherwise name
``HOSTCALL_SECRET_KEYS`` and have the signing keys sent to a server of theirs.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# The server's own settings (HOSTCALL_SECRET_KEYS, HOSTCALL_DATABASE_URL, ...): refused even
# when listed, case-insensitively (names are case-insensitive on some systems).
RESERVED_PREFIX = "HOSTCALL_"
ALLOW_LIST = "'allowed_env' of _platform.json"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def reserved(name: str) -> bool:
    return name.upper().startswith(RESERVED_PREFIX)


def valid_name(name: object) -> bool:
    return isinstance(name, str) and _NAME.match(name) is not None


def refusal(name: str, allowed: Collection[str] | None) -> str | None:
    """Why ``name`` may not be read for an agent, or None if it may. ``allowed`` None: no
    list to check against (a model built directly, not from an agents directory)."""
    if reserved(name):
        return (
            f"environment variable {name!r} is one of the server's own settings "
            f"({RESERVED_PREFIX}*), never given to an agent"
        )
    if allowed is not None and name not in allowed:
        return f"environment variable {name!r} is not listed in {ALLOW_LIST}"
    return None
