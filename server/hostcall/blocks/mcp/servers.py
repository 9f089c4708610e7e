"""MCP servers as the operator declares them in ``_platform.json``::

    "mcp_servers": {
      "crm": {"url": "http://127.0.0.1:9000/mcp", "max_message_mb": 4,
              "headers": {"Authorization": {"env": "CRM_TOKEN"}}},
      "files": {"command": ["python", "-m", "files_server"],
                "env": {"FILES_TOKEN": {"env": "FILES_TOKEN"}}, "cwd": "/srv/files",
                "max_message_mb": 16}
    }

A server is reached over streamable HTTP (``url``) or started as a local command that speaks
over stdio (``command``). Header and environment values are secrets read like a
connection's (``{"env": NAME}`` from ``allowed_env``, or ``{"file": PATH}``): they go to that
server only, and never to the model, the widget, the event log or the server's log.
``max_message_mb`` bounds one message read from the server (blocks/mcp/stdio.py, http.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from hostcall import envvars

# Reads one secret source ({"env": NAME} or {"file": PATH}); None (and a problem) if it can't.
SecretReader = Callable[[Any, str], "str | None"]
_KEYS = {"url", "headers", "command", "env", "cwd", "max_message_mb"}
# What one message from a server may weigh: far above what a tool's result passes on
# (``max_response_kb``), so only a runaway answer meets it.
MAX_MESSAGE_MB = 16.0


@dataclass(frozen=True, slots=True)
class McpServer:
    name: str
    url: str | None = None
    command: tuple[str, ...] = ()
    cwd: str | None = None
    max_message_mb: float = MAX_MESSAGE_MB
    # Secret values (resolved at load): never in a repr, a log line or an event.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    @property
    def where(self) -> str:
        """How the server is named to the model and in logs: never a secret."""
        return f"the MCP server {self.name!r}"

    def secrets(self) -> list[str]:
        """Every secret value (and a header's token after its scheme), longest first."""
        values = {
            s for v in (*self.headers.values(), *self.env.values()) for s in (v, *v.split()[1:])
        }
        return sorted((s for s in values if len(s) >= 4), key=len, reverse=True)

    def identity(self) -> str:
        """What a pooled session is for: a changed declaration gets a new session."""
        text = json.dumps(
            [
                self.name,
                self.url,
                self.command,
                self.cwd,
                self.max_message_mb,
                dict(self.headers),
                dict(self.env),
            ],
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()


def parse_servers(
    value: Any, where: str, read: SecretReader, problems: list[str]
) -> dict[str, McpServer]:
    if not isinstance(value, dict):
        problems.append(f"{where}: 'mcp_servers' must be a JSON object")
        return {}
    return {
        name: _server(name, raw, f"{where}: mcp server {name!r}", read, problems)
        for name, raw in value.items()
    }


def _server(name: str, raw: Any, where: str, read: SecretReader, problems: list[str]) -> McpServer:
    shape = (
        "must be {'url': 'http://host:port/path', 'headers': {...}, 'max_message_mb': 16} or "
        "{'command': ['program', 'arg', ...], 'env': {...}, 'cwd': PATH, 'max_message_mb': 16}"
    )
    if not isinstance(raw, dict) or set(raw) - _KEYS or ("url" in raw) == ("command" in raw):
        problems.append(f"{where}: {shape}")
        return McpServer(name)
    if not envvars.valid_name(name.replace("-", "_")):
        problems.append(f"{where}: a server's name is letters, digits, _ and -")
    if "url" in raw:
        if set(raw) - {"url", "headers", "max_message_mb"}:
            problems.append(
                f"{where}: a server reached by 'url' takes only 'headers' and 'max_message_mb'"
            )
        url = raw["url"]
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"{where}: 'url' must be an absolute http:// or https:// URL")
        elif "@" in parts.netloc:
            problems.append(f"{where}: credentials in the URL are not allowed; use 'headers'")
        headers = _secrets(raw.get("headers", {}), f"{where}: header", read, problems)
        return McpServer(
            name,
            url=url if isinstance(url, str) else None,
            headers=headers,
            max_message_mb=_message_mb(raw, where, problems),
        )
    if set(raw) - {"command", "env", "cwd", "max_message_mb"}:
        problems.append(
            f"{where}: a server started by 'command' takes only 'env', 'cwd' and 'max_message_mb'"
        )
    command = raw["command"]
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(c, str) and c and "\0" not in c for c in command)
    ):
        problems.append(f"{where}: 'command' must list the program and its arguments")
        command = []
    cwd = raw.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        problems.append(f"{where}: 'cwd' must be a directory path")
        cwd = None
    env = _secrets(raw.get("env", {}), f"{where}: env", read, problems)
    for variable in env:
        if not envvars.valid_name(variable):
            problems.append(f"{where}: env {variable!r} is not a variable name")
    return McpServer(
        name,
        command=tuple(command),
        cwd=cwd,
        env=env,
        max_message_mb=_message_mb(raw, where, problems),
    )


def _message_mb(raw: dict[str, Any], where: str, problems: list[str]) -> float:
    size = raw.get("max_message_mb", MAX_MESSAGE_MB)
    if isinstance(size, bool) or not isinstance(size, int | float) or not 0 < size <= 1024:
        problems.append(f"{where}: 'max_message_mb' must be a number above 0, at most 1024")
        return MAX_MESSAGE_MB
    return float(size)


def _secrets(raw: Any, where: str, read: SecretReader, problems: list[str]) -> dict[str, str]:
    if not isinstance(raw, dict):
        problems.append(f"{where}s must be an object of {{'env': NAME}} or {{'file': PATH}}")
        return {}
    found: dict[str, str] = {}
    for key, source in raw.items():
        value = read(source, f"{where} {key!r}")
        if value is not None:
            found[key] = value
    return found
