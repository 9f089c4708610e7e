"""Installed nodes: blocks that packages provide through the ``hostcall.blocks`` entry points.

Found through ``importlib.metadata`` each time agents load (installing a package and
reloading is enough), loaded once per entry point, and run for a call with its config
rendered from the model's arguments. What an author writes is ``hostcall.blocks.node``.
Every way a node can go wrong is a ``BlockError`` the model reads, never a crashed run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.validators import validator_for

from hostcall import strictjson
from hostcall.blocks import (
    USER_PREFIX,
    AiRef,
    BlockFailed,
    InvalidValue,
    NotAuthorized,
    render_value,
    split_template,
    value_templates,
    whole_ref,
)
from hostcall.blocks.http_request import host_port, parse_allowed_hosts
from hostcall.blocks.node import Node, NodeError
from hostcall.schema_patterns import with_re2
from hostcall.schemas import pattern_problems, schema_problem

GROUP = "hostcall.blocks"
NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\Z")
_FORMATS = FormatChecker()
log = logging.getLogger("hostcall.blocks")


@dataclass(frozen=True, slots=True)
class InstalledBlock:
    name: str
    package: str
    version: str
    description: str
    node: Node
    config_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class BrokenBlock:
    """An entry point that could not be loaded, or is not a node: ``problem`` says why."""

    name: str
    package: str
    version: str
    problem: str


_LOADED: dict[tuple[str, str, str, str], InstalledBlock | BrokenBlock] = {}
_SCANNED: dict[tuple[tuple[str, int], ...], dict[str, InstalledBlock | BrokenBlock]] = {}


def _path_state() -> tuple[tuple[str, int], ...]:
    """The import path and when each folder last changed: installing or removing a package
    changes its folder, so the same state means the same entry points."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, -1))
    return tuple(state)


def installed_blocks() -> dict[str, InstalledBlock | BrokenBlock]:
    """Every block the installed packages declare, by name (the first of a duplicate name)."""
    # Reading every package's entry points takes ~20 ms; an agents directory asks per tool.
    state = _path_state()
    if (known := _SCANNED.get(state)) is not None:
        return dict(known)
    _SCANNED.clear()
    _SCANNED[state] = found = _scan()
    return dict(found)


def _scan() -> dict[str, InstalledBlock | BrokenBlock]:
    found: dict[str, InstalledBlock | BrokenBlock] = {}
    for entry in metadata.entry_points(group=GROUP):
        dist = entry.dist
        package, version = (dist.name, dist.version) if dist is not None else ("?", "?")
        where = str(dist.locate_file("")) if dist is not None else ""
        key = (entry.name, entry.value, f"{package} {version}", where)
        if key not in _LOADED:
            _LOADED[key] = _load(entry, package, version)
        found.setdefault(entry.name, _LOADED[key])
    return dict(sorted(found.items()))


def _load(entry: metadata.EntryPoint, package: str, version: str) -> InstalledBlock | BrokenBlock:
    def broken(problem: str) -> BrokenBlock:
        return BrokenBlock(entry.name, package, version, problem)

    if not NAME.match(entry.name):
        return broken("its name must be lowercase letters, digits and _, in dotted parts")
    try:
        target = entry.load()
    except Exception as exc:  # the package's own code: any failure is reported, not raised
        return broken(f"could not be imported ({type(exc).__name__}: {exc})")
    if isinstance(target, type) and issubclass(target, Node):
        try:
            target = target()
        except Exception as exc:
            return broken(f"could not be created ({type(exc).__name__}: {exc})")
    if not isinstance(target, Node):
        return broken(f"{entry.value} is not a hostcall.blocks.node.Node")
    description = target.description
    if not isinstance(description, str) or not description.strip():
        return broken("its 'description' must be text")
    if not inspect.iscoroutinefunction(target.run):
        return broken("its 'run' must be an async method")
    config_schema, output_schema = target.config_schema, target.output_schema
    for what, schema in (("config_schema", config_schema), ("output_schema", output_schema)):
        if schema is not None and (problem := schema_problem(dict(schema))):
            return broken(f"its {what!r} {problem}")
        if schema is not None and (found := pattern_problems(dict(schema))):
            return broken(f"its {what!r} {found[0]}")
    first_line = description.strip().splitlines()[0]
    return InstalledBlock(
        entry.name, package, version, first_line, target, config_schema, output_schema
    )


def find_block(name: str) -> InstalledBlock:
    """The installed block ``name``; ``ValueError`` saying what is installed, or what is wrong."""
    found = installed_blocks()
    block = found.get(name)
    if isinstance(block, BrokenBlock):
        raise ValueError(
            f"'block': {name!r} (from {block.package} {block.version}) {block.problem}"
        )
    if block is None:
        known = ", ".join(n for n, b in found.items() if isinstance(b, InstalledBlock))
        raise ValueError(
            f"'block': {name!r} is not installed (installed: {known or 'none'}; "
            "`hostcall blocks` lists them)"
        )
    return block


# ---- the config ------------------------------------------------------------------------------


def config_problems(block: InstalledBlock, config: Any, keys: Collection[str]) -> list[str]:
    """What is wrong with a tool's ``config``, each naming the field; a value that is a
    ``$fromAI`` reference is checked when the call renders it, the rest now."""
    if not isinstance(config, dict):
        return ["'config' must be a JSON object"]
    problems: list[str] = []
    for where, text, is_name in value_templates(config, "config"):
        if is_name and ("{{" in text or "}}" in text):
            problems.append(f"'config' field {where!r}: names are fixed; {text!r} holds one")
            continue
        try:
            split_template(text, repr(where), keys)
        except ValueError as exc:
            problems.append(f"'config' field {exc}")
    if problems:
        return problems
    validator = _validator(block)
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path))):
        if _from_the_model(error):
            continue
        problems.append(f"'config' {_field(error)}{error.message}")
    return problems


def _validator(block: InstalledBlock) -> Any:
    # Patterns in RE2, in linear time: a value the model chose meets them (hostcall/patterns.py).
    schema = dict(block.config_schema)
    cls = with_re2(validator_for(schema, default=Draft202012Validator))
    return cls(schema, format_checker=_FORMATS)


def _from_the_model(error: ValidationError) -> bool:
    """An error about a value the model will give: judged when it is given."""
    value = error.instance
    return isinstance(value, str) and (whole_ref(value) is not None or "{{" in value)


def _field(error: ValidationError) -> str:
    path = ".".join(str(p) for p in error.path)
    return f"field 'config.{path}': " if path else ""


def config_user_keys(config: Any) -> frozenset[str]:
    """The ``$user.…`` values a config's templates name (hostcall/blocks/__init__.py)."""
    return frozenset(
        part.key
        for where, text, is_name in value_templates(config, "config")
        if not is_name
        for part in split_template(text, where)
        if isinstance(part, AiRef) and part.key.startswith(USER_PREFIX)
    )


def render_config(block: InstalledBlock, config: Any, arguments: Mapping[str, Any]) -> Any:
    """The config a call runs with; ``InvalidValue`` if the arguments do not fit it."""
    rendered = render_value(config, arguments)
    error = next(iter(_validator(block).iter_errors(rendered)), None)
    if error is not None:
        raise InvalidValue(f"The arguments do not fit the block: {_field(error)}{error.message}")
    return rendered


def targets_of(block: InstalledBlock, config: Any, *, placed: bool) -> list[str]:
    """The ``host:port`` the node says ``config`` reaches; ``ValueError`` saying what is wrong
    with what it said. Before the call's values are ``placed``, a target still holding a
    reference is left for the call to judge."""
    try:
        said = [str(t) for t in block.node.targets(config)]
    except Exception as exc:  # the package's own code
        if not placed and "{{" in strictjson.dumps(config):
            return []  # it may need the call's values: judged with them
        raise ValueError(f"its targets() raised {type(exc).__name__}") from None
    found: list[str] = []
    for target in said:
        if not placed and "{{" in target:
            continue
        try:
            found += [host_port(target)] if "://" in target else parse_allowed_hosts([target])
        except ValueError:
            raise ValueError(f"its target {target[:200]!r} is not a URL or host:port") from None
    return found


# ---- a call ----------------------------------------------------------------------------------


async def run_block(
    block: InstalledBlock,
    config: Any,
    arguments: Mapping[str, Any],
    *,
    allowed_hosts: Collection[str],
    timeout: float,
) -> Any:
    """The node's result for one call, as strict JSON; a ``BlockError`` for anything else.
    Every host the node says it will reach must be allowed: refused before it runs."""
    rendered = render_config(block, config, arguments)
    try:
        targets = targets_of(block, rendered, placed=True)
    except ValueError as exc:
        raise BlockFailed(str(exc), subject="The block") from None
    for target in targets:
        if target not in allowed_hosts:
            raise NotAuthorized(target)
    try:
        async with asyncio.timeout(timeout):
            result = await block.node.run(rendered)
    except TimeoutError:
        raise BlockFailed(f"timeout after {timeout:g} s", subject="The block") from None
    except NodeError as exc:
        raise BlockFailed(str(exc.message), subject="The block") from None
    except Exception as exc:
        # Its text may hold anything (a credential, a path): the operator's log has it.
        log.warning("block %s raised", block.name, exc_info=True)
        raise BlockFailed(f"it raised {type(exc).__name__}", subject="The block") from None
    try:
        # Through the strict reader: a NaN, a set, an object or absurd nesting never reaches
        # the conversation.
        return strictjson.loads(strictjson.dumps(result))
    except (TypeError, ValueError, RecursionError):
        raise BlockFailed("it returned something that is not JSON", subject="The block") from None
