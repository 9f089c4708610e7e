"""A tiny package of installed nodes, built for the tests: a module and its ``.dist-info``
(METADATA, entry_points.txt, RECORD), the layout pip leaves in site-packages. Put its folder
on ``sys.path`` (unit tests) or ``PYTHONPATH`` (a server subprocess) and
``importlib.metadata`` finds its ``hostcall.blocks`` entry points like any installed one.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PACKAGE = "acme-nodes"
VERSION = "1.2.0"
MODULE = "acme_nodes_for_tests"
BLOCKS = {
    "acme.crm_lookup": "CrmLookup",
    "acme.explode": "Explode",
    "acme.hang": "Hang",
    "acme.junk": "Junk",
    "acme.fetch": "Fetch",
    "acme.coded": "Coded",
    "acme.broken": "NotANode",
    "acme.sync_run": "SyncRun",
    "acme.bad_schema": "BadSchema",
    "acme.missing": "MissingClass",
    "Acme.Upper": "CrmLookup",
}

SOURCE = '''
"""Nodes for Hostcall's tests; each records the configs it ran with in CALLS (and, for a
server in another process, as a JSON line in the file $ACME_NODES_LOG names)."""

import asyncio
import json
import os

from hostcall.blocks.node import Node, NodeError


class Calls(list):
    def append(self, item):
        super().append(item)
        if path := os.environ.get("ACME_NODES_LOG"):
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(item) + "\\n")


CALLS = Calls()
CUSTOMERS = {
    "ada@example.com": {"name": "Ada Lovelace", "plan": "gold", "email": "ada@example.com"},
}


class CrmLookup(Node):
    """Look up a customer in the CRM by e-mail.

    Reads the customer record; never changes it.
    """

    description = __doc__
    config_schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "minLength": 3, "description": "Whom to look up"},
            "region": {"enum": ["eu", "us"], "description": "Which CRM instance"},
            "fields": {"type": "array", "items": {"enum": ["name", "plan", "email"]}},
            "limit": {"type": "integer", "minimum": 1, "default": 1},
        },
        "required": ["email", "region"],
        "additionalProperties": False,
    }
    output_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "plan": {"type": "string"}},
    }

    async def run(self, config):
        CALLS.append(("acme.crm_lookup", config))
        found = CUSTOMERS.get(config["email"])
        if found is None:
            raise NodeError(f"no customer {config['email']} in {config['region']}")
        fields = config.get("fields") or ["name", "plan"]
        return {k: found[k] for k in fields}


class Explode(Node):
    description = "Raises with a secret in its message."
    config_schema = {"type": "object"}

    async def run(self, config):
        CALLS.append(("acme.explode", config))
        raise RuntimeError("password=hunter2-secret")


class Hang(Node):
    description = "Never answers."

    async def run(self, config):
        CALLS.append(("acme.hang", config))
        await asyncio.sleep(3600)


class Junk(Node):
    description = "Returns what its config asks for, JSON or not."
    config_schema = {
        "type": "object",
        "properties": {"what": {"enum": ["nan", "set", "object", "huge", "deep"]}},
        "required": ["what"],
    }

    async def run(self, config):
        CALLS.append(("acme.junk", config))
        what = config["what"]
        if what == "huge":
            return {"text": "x" * 200_000}
        if what == "deep":
            value = []
            for _ in range(500):
                value = [value]
            return value
        return {"nan": float("nan"), "set": {1, 2}, "object": object()}[what]


class Fetch(Node):
    """Says it reaches its config's URL (and never connects)."""

    description = __doc__
    config_schema = {
        "type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"],
    }

    def targets(self, config):
        return [config["url"]]

    async def run(self, config):
        CALLS.append(("acme.fetch", config))
        return {"reached": config["url"]}


class Coded(Node):
    """Takes a code of a's (a catastrophic pattern for a backtracking matcher)."""

    description = __doc__
    config_schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
        "required": ["code"],
    }

    async def run(self, config):
        CALLS.append(("acme.coded", config))
        return {"code": config["code"]}


class NotANode:
    description = "Not a node at all."


class SyncRun(Node):
    description = "Runs without async."

    def run(self, config):
        return {}


class BadSchema(Node):
    description = "Its config schema is not an object's."
    config_schema = {"type": "string"}

    async def run(self, config):
        return {}
'''


def build_package(root: Path) -> Path:
    """Write the package into ``root`` (a folder to put on the path); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MODULE}.py").write_text(textwrap.dedent(SOURCE).lstrip(), encoding="utf-8")
    info = root / f"{PACKAGE.replace('-', '_')}-{VERSION}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n"
        "Summary: Nodes for Hostcall's tests\n",
        encoding="utf-8",
    )
    entries = "".join(f"{name} = {MODULE}:{target}\n" for name, target in BLOCKS.items())
    (info / "entry_points.txt").write_text(f"[hostcall.blocks]\n{entries}", encoding="utf-8")
    (info / "RECORD").write_text(f"{MODULE}.py,,\n{info.name}/METADATA,,\n", encoding="utf-8")
    return root


@contextmanager
def installed(root: Path) -> Iterator[object]:
    """The package on ``sys.path`` for the block; yields its module (read ``CALLS``)."""
    build_package(root)
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(MODULE)
        module.CALLS.clear()  # type: ignore[attr-defined]
        yield module
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(MODULE, None)
        importlib.invalidate_caches()
