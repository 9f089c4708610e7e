"""Environments and connections: constraints the server enforces, whatever an agent says.

Read from ``_platform.json`` in the agents directory (optional)::

    {"environments": {"production": {"protected": true, "allowed_hosts": ["api.example.com:443"]}},
     "allowed_env": ["HOLIDAYS_KEY", "OPENAI_API_KEY"],
     "connections": {"holidays": {"hosts": ["api.example.com:443"],
                                  "headers": {"X-Api-Key": {"env": "HOLIDAYS_KEY"}}}}}

and ``"mcp_servers": {"crm": {"url": ..., "headers": {...}}}`` (hostcall/blocks/mcp/servers.py),
which an environment allows by name (``"mcp_servers": ["crm"]``).

An agent names its ``environment`` (default ``"default"``: not protected, no hosts): its HTTP
tools and its model may reach only that environment's ``allowed_hosts``. ``allowed_env`` lists
the environment variables agents (a model's ``api_key_env``) and connections may read; the
server's own (``HOSTCALL_*``) are refused even if listed. A connection's header values come
from a listed variable (``{"env": NAME}``) or a secrets file (``{"file": PATH}``); they are
added by the server to requests to the connection's ``hosts`` only, and never shown to the
model, the widget or the event log. The platform is read live: tightening it applies to runs
in flight, unlike agent definitions, which are frozen per run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostcall import envvars
from hostcall.blocks.http_request import parse_allowed_hosts
from hostcall.blocks.mcp.servers import McpServer, parse_servers
from hostcall.errors import AgentConfigError

PLATFORM_FILE = "_platform.json"
DEFAULT_ENVIRONMENT = "default"
SOURCE_SHAPE = "{'env': NAME} or {'file': PATH}"


@dataclass(frozen=True, slots=True)
class Environment:
    name: str
    protected: bool = False
    allowed_hosts: frozenset[str] = frozenset()
    # The MCP servers (names in ``mcp_servers``) its agents may use.
    mcp_servers: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Connection:
    # The only targets its headers are sent to (host:port, as in allowed_hosts).
    hosts: frozenset[str]
    # header name -> secret value (resolved at load; never serialised)
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Platform:
    environments: Mapping[str, Environment] = field(
        default_factory=lambda: {DEFAULT_ENVIRONMENT: Environment(DEFAULT_ENVIRONMENT)}
    )
    connections: Mapping[str, Connection] = field(default_factory=dict)
    # The environment variables agents may name (never HOSTCALL_*: refused at load).
    allowed_env: frozenset[str] = frozenset()
    mcp_servers: Mapping[str, McpServer] = field(default_factory=dict)

    def environment(self, name: str) -> Environment:
        return self.environments.get(name) or Environment(name, protected=True)


def load_platform(directory: Path, environ: Mapping[str, str]) -> Platform:
    path = directory / PLATFORM_FILE
    if not path.exists():
        return Platform()
    where = path.name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AgentConfigError([f"{where}: not valid JSON: {exc}"]) from None
    problems: list[str] = []
    if not isinstance(data, dict):
        raise AgentConfigError([f"{where}: must hold a JSON object"])
    for key in sorted(set(data) - {"environments", "connections", "allowed_env", "mcp_servers"}):
        problems.append(f"{where}: unknown key {key!r}")
    allowed_env = _allowed_env(data.get("allowed_env", []), where, problems)
    environments = {DEFAULT_ENVIRONMENT: Environment(DEFAULT_ENVIRONMENT)}
    for name, raw in _mapping(data.get("environments", {}), f"{where}: environments", problems):
        environments[name] = _environment(name, raw, f"{where}: environment {name!r}", problems)
    connections: dict[str, Connection] = {}
    for name, raw in _mapping(data.get("connections", {}), f"{where}: connections", problems):
        connections[name] = _connection(
            raw, f"{where}: connection {name!r}", environ, allowed_env, problems
        )
    servers = parse_servers(
        data.get("mcp_servers", {}),
        where,
        lambda source, at: _secret(source, at, environ, allowed_env, problems),
        problems,
    )
    for env in environments.values():
        for name in sorted(env.mcp_servers - set(servers)):
            problems.append(
                f"{where}: environment {env.name!r}: MCP server {name!r} is not declared "
                "in 'mcp_servers'"
            )
    if problems:
        raise AgentConfigError(problems)
    return Platform(environments, connections, allowed_env, servers)


def _allowed_env(value: Any, where: str, problems: list[str]) -> frozenset[str]:
    if not isinstance(value, list) or not all(envvars.valid_name(v) for v in value):
        problems.append(f"{where}: 'allowed_env' must list environment variable names")
        return frozenset()
    for name in value:
        if envvars.reserved(name):
            problems.append(
                f"{where}: allowed_env: {name!r} is one of the server's own settings "
                f"({envvars.RESERVED_PREFIX}*), never given to an agent"
            )
    return frozenset(v for v in value if not envvars.reserved(v))


def _mapping(value: Any, where: str, problems: list[str]) -> list[tuple[str, Any]]:
    if not isinstance(value, dict):
        problems.append(f"{where}: must be a JSON object")
        return []
    return list(value.items())


def _environment(name: str, raw: Any, where: str, problems: list[str]) -> Environment:
    if not isinstance(raw, dict) or set(raw) - {"protected", "allowed_hosts", "mcp_servers"}:
        problems.append(
            f"{where}: must be {{'protected': bool, 'allowed_hosts': [...], 'mcp_servers': [...]}}"
        )
        return Environment(name, protected=True)
    protected = raw.get("protected", False)
    if not isinstance(protected, bool):
        problems.append(f"{where}: 'protected' must be true or false")
    hosts = raw.get("allowed_hosts", [])
    try:
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ValueError("'allowed_hosts' must list 'host:port' entries")
        allowed = parse_allowed_hosts(hosts)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        allowed = frozenset()
    servers = raw.get("mcp_servers", [])
    if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
        problems.append(f"{where}: 'mcp_servers' must list names of 'mcp_servers'")
        servers = []
    return Environment(name, protected is True, allowed, frozenset(servers))


def _connection(
    raw: Any,
    where: str,
    environ: Mapping[str, str],
    allowed_env: frozenset[str],
    problems: list[str],
) -> Connection:
    if (
        not isinstance(raw, dict)
        or set(raw) != {"hosts", "headers"}
        or not isinstance(raw["headers"], dict)
    ):
        problems.append(
            f"{where}: must be {{'hosts': ['host:port', ...], "
            f"'headers': {{name: {{'env' | 'file': ...}}}}}}"
        )
        return Connection(frozenset())
    hosts = raw["hosts"]
    try:
        if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
            raise ValueError("'hosts' must list the 'host:port' its headers may be sent to")
        bound = parse_allowed_hosts(hosts)
    except ValueError as exc:
        problems.append(f"{where}: {str(exc).replace('allowed_hosts', 'hosts')}")
        bound = frozenset()
    headers: dict[str, str] = {}
    for header, source in raw["headers"].items():
        value = _secret(source, f"{where}: header {header!r}", environ, allowed_env, problems)
        if value is not None:
            headers[header] = value
    return Connection(bound, headers)


def _secret(
    source: Any,
    where: str,
    environ: Mapping[str, str],
    allowed_env: frozenset[str],
    problems: list[str],
) -> str | None:
    """A secret's value from ``{"env": NAME}`` (a listed variable) or ``{"file": PATH}``."""
    if not isinstance(source, dict) or len(source) != 1 or not {"env", "file"} & set(source):
        problems.append(f"{where} must be {{'env': NAME}} or {{'file': PATH}}")
        return None
    if "env" in source:
        why = envvars.refusal(str(source["env"]), allowed_env)
        if why is not None:
            problems.append(f"{where}: {why}")
            return None
        value = environ.get(str(source["env"]))
        if value is None:
            problems.append(f"{where} reads ${source['env']}, which is not set")
        return value
    try:
        return Path(str(source["file"])).read_text(encoding="utf-8").strip()
    except OSError as exc:
        problems.append(f"{where}: cannot read secrets file: {exc}")
        return None
