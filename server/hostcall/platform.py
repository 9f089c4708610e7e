"""Environments and connections: constraints the server enforces, whatever an agent says.

Read from ``_platform.json`` in the agents directory (optional)::

    {"environments": {"production": {"protected": true, "allowed_hosts": ["api.example.com:443"]}},
     "allowed_env": {"HOLIDAYS_KEY": {"for": "connection", "connection": "holidays"},
                     "OPENAI_API_KEY": {"for": "model", "hosts": ["api.openai.com:443"]}},
     "connections": {"holidays": {"hosts": ["api.example.com:443"],
                                  "headers": {"X-Api-Key": {"env": "HOLIDAYS_KEY"}}}}}

and ``"mcp_servers": {"crm": {"url": ..., "headers": {...}}}`` (hostcall/blocks/mcp/servers.py),
which an environment allows by name (``"mcp_servers": ["crm"]``).

An agent names its ``environment`` (default ``"default"``: not protected, no hosts): its HTTP
tools and its model may reach only that environment's ``allowed_hosts``. ``allowed_env`` lists
the environment variables agents (a model's ``api_key_env``, an identity block's
``secret_env``), connections and MCP servers may read, each bound to that one purpose and
destination (hostcall/env_bindings.py); the server's own (``HOSTCALL_*``) are refused even if
listed. A connection's header values come from a listed variable (``{"env": NAME}``) or a
secrets file (``{"file": PATH}``); they are added by the server to requests to the
connection's ``hosts`` only, and never shown to the model, the widget or the event log. The
platform is read live: tightening it applies to runs in flight, unlike agent definitions,
which are frozen per run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostcall import envvars
from hostcall.blocks.http_request import parse_allowed_hosts
from hostcall.blocks.mcp.servers import McpServer, parse_servers
from hostcall.env_bindings import (
    CONNECTION,
    MCP_SERVER,
    Binding,
    Use,
    agent_uses,
    parse_allowed_env,
    refused_as_second_use,
    refused_by_binding,
    second_uses,
)
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
    # What the names given in allowed_env's object form are for; the others are list-form.
    bindings: Mapping[str, Binding] = field(default_factory=dict)
    # The use this file itself gives a list-form name (a connection's or MCP server's):
    # that name then serves it alone.
    platform_uses: Mapping[str, Use] = field(default_factory=dict)

    def environment(self, name: str) -> Environment:
        return self.environments.get(name) or Environment(name, protected=True)

    def unbound(self) -> frozenset[str]:
        """The list-form names no use of this file has claimed: agent files' uses decide."""
        return self.allowed_env - set(self.bindings) - set(self.platform_uses)

    def use_refusal(self, name: str, use: Use) -> str | None:
        """Why listed variable ``name`` may not serve ``use``, or None if it may."""
        binding = self.bindings.get(name)
        if binding is not None:
            return None if binding.allows(use) else refused_by_binding(name, binding, use)
        first = self.platform_uses.get(name)
        if first is not None and not first.same_as(use):
            return refused_as_second_use(name, first, use)
        return None

    def secret_problems(self, agent: Any, where: str) -> list[str]:
        """The variables an agent file reads for a use their entry does not allow (one not
        listed at all is reported by the field's own check)."""
        problems = []
        for name, use in agent_uses(agent, where):
            if name in self.allowed_env and (why := self.use_refusal(name, use)):
                problems.append(f"{use.where}: {why}")
        return problems


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
    allowed_env, bindings = parse_allowed_env(data.get("allowed_env", []), where, problems)
    uses: list[tuple[str, Use]] = []
    environments = {DEFAULT_ENVIRONMENT: Environment(DEFAULT_ENVIRONMENT)}
    for name, raw in _mapping(data.get("environments", {}), f"{where}: environments", problems):
        environments[name] = _environment(name, raw, f"{where}: environment {name!r}", problems)
    connections: dict[str, Connection] = {}
    for name, raw in _mapping(data.get("connections", {}), f"{where}: connections", problems):
        at = f"{where}: connection {name!r}"
        reader = _reader(CONNECTION, name, environ, allowed_env, uses, problems)
        connections[name] = _connection(raw, at, reader, problems)
    servers = _servers(data.get("mcp_servers", {}), where, environ, allowed_env, uses, problems)
    for env in environments.values():
        for name in sorted(env.mcp_servers - set(servers)):
            problems.append(
                f"{where}: environment {env.name!r}: MCP server {name!r} is not declared "
                "in 'mcp_servers'"
            )
    platform_uses: dict[str, Use] = {}
    for name, use in uses:
        binding = bindings.get(name)
        if binding is not None:
            if not binding.allows(use):
                problems.append(f"{use.where}: {refused_by_binding(name, binding, use)}")
        else:
            platform_uses.setdefault(name, use)
    for name, first, use in second_uses((n, u) for n, u in uses if n not in bindings):
        problems.append(f"{use.where}: {refused_as_second_use(name, first, use)}")
    if problems:
        raise AgentConfigError(problems)
    return Platform(environments, connections, allowed_env, servers, bindings, platform_uses)


def _servers(
    value: Any,
    where: str,
    environ: Mapping[str, str],
    allowed_env: frozenset[str],
    uses: list[tuple[str, Use]],
    problems: list[str],
) -> dict[str, McpServer]:
    """The MCP servers, each read on its own so that its secrets are known to be its."""
    if not isinstance(value, dict):
        return parse_servers(value, where, lambda source, at: None, problems)
    servers: dict[str, McpServer] = {}
    for name, raw in value.items():
        reader = _reader(MCP_SERVER, name, environ, allowed_env, uses, problems)
        servers.update(parse_servers({name: raw}, where, reader, problems))
    return servers


def _reader(
    purpose: str,
    owner: str,
    environ: Mapping[str, str],
    allowed_env: frozenset[str],
    uses: list[tuple[str, Use]],
    problems: list[str],
) -> Callable[[Any, str], str | None]:
    """Reads the secrets of one connection or MCP server, noting each variable's use."""

    def read(source: Any, at: str) -> str | None:
        value = _secret(source, at, environ, allowed_env, problems)
        if value is not None and isinstance(source, dict) and "env" in source:
            uses.append((str(source["env"]), Use(purpose, owner, at)))
        return value

    return read


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
    raw: Any, where: str, read: Callable[[Any, str], str | None], problems: list[str]
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
        value = read(source, f"{where}: header {header!r}")
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
