"""Agent files on disk as the designer edits them: checked by the validator ``hostcall
check`` runs, written atomically, reloaded as SIGHUP reloads them, and versioned in the store.

A disabled agent's file moves to ``<agents dir>/disabled/``, which the loader does not read
(it reads ``*.json`` of the directory itself), so disabling is reversible and loses nothing.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcall.agents import load_agents
from hostcall.env_bindings import agent_uses, new_uses, refused_as_new_use
from hostcall.errors import AgentConfigError, Conflict, NotFound, Unprocessable
from hostcall.platform import load_platform
from hostcall.protocol.codes import ErrorCode
from hostcall.runtime import Runtime
from hostcall.store.console_records import AgentVersion

DISABLED = "disabled"
FOUND_ON_DISK = "as found on disk"


@dataclass(frozen=True, slots=True)
class AgentFile:
    id: str
    path: Path
    enabled: bool
    data: Any


class AgentRejected(Unprocessable):
    """The validator found problems; ``details["problems"]`` holds its lines, verbatim."""

    code = ErrorCode.AGENT_INVALID


def agent_files(directory: Path) -> dict[str, AgentFile]:
    """Every agent file, enabled or not, by agent id (files that are not JSON objects with
    an id are left out: ``hostcall check`` reports them)."""
    found: dict[str, AgentFile] = {}
    for enabled, folder in ((True, directory), (False, directory / DISABLED)):
        for path in sorted(folder.glob("*.json")):
            if path.name.startswith("_"):
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                found.setdefault(data["id"], AgentFile(data["id"], path, enabled, data))
    return found


def text_of(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def problems_with(directory: Path, environ: dict[str, str], name: str, data: Any) -> list[str]:
    """What ``hostcall check`` would print if ``name`` in ``directory`` held ``data``: the same
    ``load_agents`` call, on a staged copy of the directory, so the messages are the same;
    first, any secret the change would send somewhere new (``new_secret_uses``)."""
    problems = new_secret_uses(directory, environ, name, data)
    with tempfile.TemporaryDirectory(prefix="hostcall-check-") as tmp:
        staged = Path(tmp)
        for path in directory.glob("*.json"):
            if path.name != name:
                shutil.copyfile(path, staged / path.name)
        (staged / name).write_text(text_of(data), encoding="utf-8")
        try:
            load_agents(staged, environ)
        except AgentConfigError as exc:
            problems += [p for p in exc.problems if p not in problems]
    return problems


def new_secret_uses(directory: Path, environ: dict[str, str], name: str, data: Any) -> list[str]:
    """A variable listed in ``allowed_env`` without a purpose, given by ``data`` a use no
    agent file (enabled or disabled) gives it now. On disk, the files' uses must agree
    (``hostcall check``); a designer could first edit or disable the files that use it, so
    the console holds it to the uses it has: a new one is the operator's to bind."""
    try:
        platform = load_platform(directory, environ)
    except AgentConfigError:
        return []  # the staged load reports the platform file's problems
    before = [use for f in agent_files(directory).values() for use in agent_uses(f.data, "")]
    return [
        f"{use.where}: {refused_as_new_use(variable, use)}"
        for variable, use in new_uses(before, agent_uses(data, name), platform.unbound())
    ]


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one (rename is atomic)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class AgentFiles:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.directory = runtime.settings.agents_dir
        self.environ = runtime.settings.environ

    def get(self, agent_id: str) -> AgentFile:
        found = agent_files(self.directory).get(agent_id)
        if found is None:
            raise NotFound(f"no agent file for {agent_id!r}", code=ErrorCode.UNKNOWN_AGENT)
        return found

    def problems(self, agent_id: str, data: Any) -> list[str]:
        existing = agent_files(self.directory).get(agent_id)
        name = existing.path.name if existing else f"{agent_id}.json"
        return problems_with(self.directory, self.environ, name, data)

    def _reload(self) -> None:
        self.runtime.reload_agents()

    async def save(self, agent_id: str, data: Any, *, author: str, note: str = "") -> AgentVersion:
        """Check, write atomically, reload, and record a version; refuses with the checker's
        lines (``AgentRejected``) and changes nothing if there is any problem."""
        if not isinstance(data, dict) or data.get("id") != agent_id:
            raise Unprocessable(
                f"the agent's id must stay {agent_id!r} (duplicate it to make another)",
                code=ErrorCode.AGENT_ID_CHANGED,
            )
        existing = agent_files(self.directory).get(agent_id)
        path = existing.path if existing else self.directory / f"{agent_id}.json"
        problems = problems_with(self.directory, self.environ, path.name, data)
        if problems:
            raise AgentRejected(problems[0], problems=problems)
        versions = self.runtime.services.agent_versions
        clock = self.runtime.clock
        if existing and not await versions.list(agent_id):
            await versions.add(
                AgentVersion(agent_id, 0, path.read_text(encoding="utf-8"), "", clock(),
                             FOUND_ON_DISK)
            )  # fmt: skip
        before = path.read_text(encoding="utf-8") if path.exists() else None
        write_atomically(path, text_of(data))
        if existing is None or existing.enabled:
            try:
                self._reload()
            except AgentConfigError as exc:  # another file changed meanwhile: undo ours
                if before is None:
                    path.unlink()
                else:
                    write_atomically(path, before)
                raise AgentRejected(exc.problems[0], problems=exc.problems) from None
        return await versions.add(AgentVersion(agent_id, 0, text_of(data), author, clock(), note))

    async def create(self, agent_id: str, name: str, *, author: str) -> AgentVersion:
        if agent_id in agent_files(self.directory):
            raise Conflict(f"there is already an agent {agent_id!r}", code=ErrorCode.AGENT_EXISTS)
        data = {
            "id": agent_id,
            "name": name or agent_id,
            "greeting": "",
            "instructions": "",
            "allowed_origins": [],
            "model": {"kind": "scripted", "rules": []},
            "tools": [],
        }
        return await self.save(agent_id, data, author=author, note="created")

    async def duplicate(self, source_id: str, new_id: str, *, author: str) -> AgentVersion:
        source = self.get(source_id)
        if new_id in agent_files(self.directory):
            raise Conflict(f"there is already an agent {new_id!r}", code=ErrorCode.AGENT_EXISTS)
        data = {**source.data, "id": new_id, "name": f"{source.data.get('name', source_id)} 2"}
        return await self.save(new_id, data, author=author, note=f"duplicate of {source_id}")

    def set_enabled(self, agent_id: str, enabled: bool) -> None:
        found = self.get(agent_id)
        if found.enabled == enabled:
            return
        if enabled:
            problems = problems_with(self.directory, self.environ, found.path.name, found.data)
            if problems:
                raise AgentRejected(problems[0], problems=problems)
            target = self.directory / found.path.name
        else:
            (self.directory / DISABLED).mkdir(exist_ok=True)
            target = self.directory / DISABLED / found.path.name
        if target.exists():
            raise Conflict(
                f"{target.name} already exists in {target.parent}", code=ErrorCode.AGENT_EXISTS
            )
        os.replace(found.path, target)
        try:
            self._reload()
        except AgentConfigError as exc:
            os.replace(target, found.path)
            raise AgentRejected(exc.problems[0], problems=exc.problems) from None


def diff(old: AgentVersion, new: AgentVersion) -> list[tuple[str, str]]:
    """A unified diff of two versions as (kind, line): kind is '+', '-', '@' or ' '."""
    lines = difflib.unified_diff(
        old.body.splitlines(), new.body.splitlines(),
        f"version {old.version}", f"version {new.version}", lineterm="", n=3,
    )  # fmt: skip
    return [(line[:1] if line[:1] in "+-@" else " ", line) for line in list(lines)[2:]]
