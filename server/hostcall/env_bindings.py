"""What each variable of ``allowed_env`` is for, and where its value may go.

A variable an agent may have read is sent somewhere (a model key, a connection's header, an
MCP server's secret) or used to verify visitors (the identity block's HMAC secret). One pool
for every purpose let whoever writes an agent file name the identity secret as a model key, on
a host they can read, and forge any visitor with it. So ``_platform.json`` binds each variable
to one purpose and, where it is sent, one destination::

    "allowed_env": {
      "OPENAI_API_KEY": {"for": "model", "hosts": ["api.openai.com:443"]},
      "SHOP_IDENTITY_SECRET": {"for": "identity"},
      "HOLIDAYS_KEY": {"for": "connection", "connection": "holidays"},
      "CRM_TOKEN": {"for": "mcp_server", "server": "crm"}
    }

``identity`` is never sent anywhere; ``model`` only as the key of a model whose ``base_url``
is on one of its ``hosts``; ``connection`` only in that connection's headers (to its hosts);
``mcp_server`` only to that server. A binding to a connection or server the file no longer
declares is harmless (nothing may use the variable) and left alone; a misspelt one shows
itself, as the connection's own use is then refused.

The older list form (``"allowed_env": ["OPENAI_API_KEY"]``) still loads: a name listed so
serves exactly one purpose and destination, the one its uses agree on (the platform file's
own first, then an identity block, then models, by file name). A second one is refused with
the binding to write. The console never gives such a name a use no agent file has yet: the
operator, who owns ``_platform.json``, decides where a secret goes, not the designer.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from hostcall import envvars
from hostcall.blocks.http_request import host_port, parse_allowed_hosts

MODEL = "model"
IDENTITY = "identity"
CONNECTION = "connection"
MCP_SERVER = "mcp_server"
PURPOSES = (MODEL, IDENTITY, CONNECTION, MCP_SERVER)
# A list-form name's uses are ranked so that the secret's likely owner keeps it: what the
# operator's own file sends, then what verifies visitors, then model keys.
_RANK = {CONNECTION: 0, MCP_SERVER: 0, IDENTITY: 1, MODEL: 2}
# The key that names what a connection's or an MCP server's secret belongs to.
_OWNER_KEYS = {CONNECTION: "connection", MCP_SERVER: "server"}
_SHAPE = (
    "{NAME: {'for': 'model', 'hosts': ['host:port', ...]} | {'for': 'identity'} | "
    "{'for': 'connection', 'connection': NAME} | {'for': 'mcp_server', 'server': NAME}}"
)


@dataclass(frozen=True, slots=True)
class Use:
    """One place a variable is read: what for, where its value goes, and who said so."""

    purpose: str
    # model: the base URL's host:port; connection, mcp_server: its name; identity: "".
    destination: str
    # The file and field, as a problem line starts ("shop.json: model: 'api_key_env'").
    where: str

    def same_as(self, other: Use) -> bool:
        return (self.purpose, self.destination) == (other.purpose, other.destination)

    def describe(self) -> str:
        if self.purpose == MODEL:
            return f"the key of a model on {self.destination}"
        if self.purpose == IDENTITY:
            return "an identity block's secret"
        if self.purpose == CONNECTION:
            return f"a header of connection {self.destination!r}"
        return f"a secret of MCP server {self.destination!r}"

    def binding(self) -> dict[str, Any]:
        """The ``allowed_env`` entry that binds a variable to this use."""
        if self.purpose == MODEL:
            return {"for": MODEL, "hosts": [self.destination]}
        if self.purpose == CONNECTION:
            return {"for": CONNECTION, "connection": self.destination}
        if self.purpose == MCP_SERVER:
            return {"for": MCP_SERVER, "server": self.destination}
        return {"for": IDENTITY}


@dataclass(frozen=True, slots=True)
class Binding:
    purpose: str
    # model: the host:port its key may be sent to.
    hosts: frozenset[str] = frozenset()
    # connection or mcp_server: the one it belongs to.
    owner: str = ""

    def allows(self, use: Use) -> bool:
        if use.purpose != self.purpose:
            return False
        if self.purpose == MODEL:
            return use.destination in self.hosts
        return self.purpose == IDENTITY or use.destination == self.owner

    def describe(self) -> str:
        if self.purpose == MODEL:
            return f"bound to 'model' on {', '.join(sorted(self.hosts))}"
        if self.purpose == IDENTITY:
            return "bound to 'identity' (it verifies visitors' tokens and is sent nowhere)"
        if self.purpose == CONNECTION:
            return f"bound to connection {self.owner!r}"
        return f"bound to MCP server {self.owner!r}"


def refused_by_binding(name: str, binding: Binding, use: Use) -> str:
    return (
        f"environment variable {name!r} is {binding.describe()} in {envvars.ALLOW_LIST}: "
        f"it may not be used as {use.describe()}"
    )


def refused_as_second_use(name: str, first: Use, use: Use) -> str:
    entry = json.dumps({name: first.binding()})
    return (
        f"environment variable {name!r} is listed in {envvars.ALLOW_LIST} without a purpose "
        f"and is already {first.describe()} ({first.where}): a variable serves one purpose, "
        f"so it may not also be used as {use.describe()}; bind each secret to its use, e.g. "
        f"'allowed_env': {entry}, and give this one a variable of its own"
    )


def refused_as_new_use(name: str, use: Use) -> str:
    entry = json.dumps({name: use.binding()})
    return (
        f"environment variable {name!r} is listed in {envvars.ALLOW_LIST} without a purpose, "
        f"and no agent file uses it as {use.describe()}: the console does not choose where a "
        f"secret goes; the operator binds it in _platform.json, e.g. 'allowed_env': {entry}"
    )


def parse_allowed_env(
    value: Any, where: str, problems: list[str]
) -> tuple[frozenset[str], dict[str, Binding]]:
    """Every listed name, and the bindings of the names given in the object form."""
    if isinstance(value, list):
        if not all(envvars.valid_name(v) for v in value):
            problems.append(f"{where}: 'allowed_env' must list environment variable names")
            return frozenset(), {}
        return _unreserved(value, where, problems), {}
    if not isinstance(value, dict):
        problems.append(
            f"{where}: 'allowed_env' must list environment variable names or bind each to "
            f"its use: {_SHAPE}"
        )
        return frozenset(), {}
    bindings: dict[str, Binding] = {}
    for name, raw in value.items():
        at = f"{where}: allowed_env: {name!r}"
        if not envvars.valid_name(name):
            problems.append(f"{at}: not an environment variable name")
            continue
        binding = _binding(raw, at, problems)
        if binding is not None:
            bindings[name] = binding
    names = _unreserved(list(bindings), where, problems)
    return names, {n: b for n, b in bindings.items() if n in names}


def _unreserved(names: list[str], where: str, problems: list[str]) -> frozenset[str]:
    for name in names:
        if envvars.reserved(name):
            problems.append(
                f"{where}: allowed_env: {name!r} is one of the server's own settings "
                f"({envvars.RESERVED_PREFIX}*), never given to an agent"
            )
    return frozenset(n for n in names if not envvars.reserved(n))


def _binding(raw: Any, at: str, problems: list[str]) -> Binding | None:
    if not isinstance(raw, dict) or raw.get("for") not in PURPOSES:
        problems.append(f"{at}: 'for' must be one of {', '.join(PURPOSES)} ({_SHAPE})")
        return None
    purpose = raw["for"]
    owner_key = _OWNER_KEYS.get(purpose)
    keys = {"for", *(["hosts"] if purpose == MODEL else []), *([owner_key] if owner_key else [])}
    if set(raw) != keys:
        problems.append(f"{at}: a {purpose!r} binding has exactly the keys {sorted(keys)}")
        return None
    if purpose == MODEL:
        hosts = raw["hosts"]
        try:
            listed = isinstance(hosts, list) and all(isinstance(h, str) for h in hosts)
            if not listed or not hosts:
                raise ValueError("'hosts' must list the 'host:port' its key may be sent to")
            bound = parse_allowed_hosts(hosts)
        except ValueError as exc:
            problems.append(f"{at}: {str(exc).replace('allowed_hosts', 'hosts')}")
            return None
        return Binding(MODEL, hosts=bound)
    if owner_key is None:
        return Binding(IDENTITY)
    owner = raw[owner_key]
    if not isinstance(owner, str) or not owner:
        problems.append(f"{at}: {owner_key!r} must name the {owner_key} it belongs to")
        return None
    return Binding(purpose, owner=owner)


def agent_uses(data: Any, where: str) -> list[tuple[str, Use]]:
    """The variables an agent file reads, each with its use (fields that are not well formed
    are left out: their own checks report them)."""
    if not isinstance(data, dict):
        return []
    found: list[tuple[str, Use]] = []
    identity = data.get("identity")
    if isinstance(identity, dict) and isinstance(identity.get("secret_env"), str):
        use = Use(IDENTITY, "", f"{where}: identity: 'secret_env'")
        found.append((identity["secret_env"], use))
    model = data.get("model")
    if isinstance(model, dict) and model.get("kind") == "openai":
        name, url = model.get("api_key_env"), model.get("base_url")
        if isinstance(name, str) and isinstance(url, str):
            try:
                target = host_port(url)
            except ValueError:
                return found
            found.append((name, Use(MODEL, target, f"{where}: model: 'api_key_env'")))
    return found


def second_uses(uses: Iterable[tuple[str, Use]]) -> list[tuple[str, Use, Use]]:
    """For list-form names: each use that differs from the name's first (by rank, then by
    where it is), with that first use."""
    first: dict[str, Use] = {}
    found: list[tuple[str, Use, Use]] = []
    for name, use in sorted(uses, key=lambda u: (_RANK[u[1].purpose], u[1].where)):
        earlier = first.setdefault(name, use)
        if not earlier.same_as(use):
            found.append((name, earlier, use))
    return found


def new_uses(
    before: Iterable[tuple[str, Use]], after: Iterable[tuple[str, Use]], unbound: Collection[str]
) -> list[tuple[str, Use]]:
    """The uses of list-form names (``unbound``) in ``after`` that no use in ``before`` has."""
    known = {(name, use.purpose, use.destination) for name, use in before}
    return [
        (name, use)
        for name, use in after
        if name in unbound and (name, use.purpose, use.destination) not in known
    ]
