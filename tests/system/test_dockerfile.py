"""The Dockerfile, checked without a container engine (none on CI or here; the image itself
has not been built by these tests): what its build stage copies is enough to build the wheel,
the image installs that wheel and nothing from the source tree, runs as a non-root user, and
its command and health check are real ``hostcall`` arguments and a real route.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hostcall.cli import _parser
from hostcall.qa.servers import HostcallServer, free_port, start_hostcall
from hostcall.settings import ROOT

DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@dataclass
class Stage:
    name: str
    steps: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, arguments)

    def all(self, instruction: str) -> list[str]:
        return [args for ins, args in self.steps if ins == instruction]


def stages() -> list[Stage]:
    """The Dockerfile's stages: continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            found.append(Stage(args.split(" AS ")[-1] if " AS " in args else args))
        found[-1].steps.append((instruction.upper(), args.strip()))
    return found


def exec_form(args: str) -> list[str]:
    argv = json.loads(args)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), args
    return argv


def test_the_build_stage_copies_exactly_what_building_the_wheel_needs(tmp_path: Path) -> None:
    build, _ = stages()
    context = tmp_path / "context"
    # The build context as the .dockerignore leaves it: only the paths it lets through.
    allowed = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}  # fmt: skip
    for copy in build.all("COPY"):
        *sources, dest = shlex.split(copy)
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
            assert source in allowed, f"COPY {source}: .dockerignore leaves it out of the context"
            # Where the build stage's WORKDIR gets it (`COPY a b ./` keeps the names).
            target = context / dest / Path(source).name if dest.endswith("/") else context / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / source).is_dir():
                ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
                shutil.copytree(ROOT / source, target, ignore=ignore)
            else:
                shutil.copy(ROOT / source, target)
    # What pyproject.toml builds from must be inside what was copied.
    package_dirs = PYPROJECT["tool"]["setuptools"]["package-dir"].values()
    project = PYPROJECT["project"]
    for needed in [project["readme"], *project["license-files"], *package_dirs]:
        assert (context / needed).exists(), (
            f"the wheel needs {needed}; the Dockerfile does not copy it"
        )
    [run] = build.all("RUN")
    assert run.startswith("pip wheel") and run.endswith(" .")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet",
                    "wheel", "--no-deps", "-w", str(dist), str(context)], check=True)  # fmt: skip
    [wheel] = dist.glob("hostcall-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = ["hostcall/widget/loader.js", "hostcall/widget/toolcalls.js",
               "hostcall/widget/calls.css", "hostcall/widget/embed.d.ts",
               "hostcall/demo/agents/planner.json",
               "hostcall/demo/host/index.html", "hostcall/templates/widget.html",
               "hostcall/console/static/console.js"]  # fmt: skip
    for name in shipped:
        assert name in names, f"{name} is not in the wheel the image installs"


def test_the_image_installs_the_wheel_and_no_source_tree_and_runs_as_a_non_root_user() -> None:
    _, image = stages()
    copies = image.all("COPY")
    assert copies and all(c.startswith("--from=build ") for c in copies), copies
    assert any("pip install" in run and ".whl" in run for run in image.all("RUN"))
    [user] = image.all("USER")
    assert user not in ("root", "0")
    assert any("useradd" in run and user in run for run in image.all("RUN"))
    steps = [ins for ins, _ in image.steps]
    assert steps.index("USER") < steps.index("CMD"), "the command must run as that user"
    assert image.all("VOLUME") == ['["/data"]']


def test_the_command_is_a_real_hostcall_command_on_the_exposed_port() -> None:
    _, image = stages()
    [cmd] = image.all("CMD")
    argv = exec_form(cmd)
    assert argv[0] in PYPROJECT["project"]["scripts"], "the console script the wheel installs"
    args = _parser().parse_args(argv[1:])  # argparse exits (a test failure) on a wrong one
    assert args.command == "serve" and args.host == "0.0.0.0"
    assert args.db.startswith("/data/"), "the database lives on the volume"
    assert image.all("EXPOSE") == [str(args.port)]
    assert str(args.port) in image.all("HEALTHCHECK")[0]
    # And the installed command accepts it: `hostcall serve --help`.
    shown = subprocess.run([sys.executable, "-m", "hostcall", argv[1], "--help"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert all(opt in shown.stdout for opt in argv[2:] if opt.startswith("--"))


def test_the_compose_file_runs_the_same_command_in_the_image() -> None:
    compose = (ROOT / "deploy" / "compose.yaml").read_text()
    block = compose.split("command: >", 1)[1].split("\n  environment:", 1)[0]
    argv = shlex.split(" ".join(line.strip() for line in block.splitlines()))
    assert argv[0] == "hostcall", "the image has no source tree for `python -m hostcall`"
    args = _parser().parse_args(argv[1:])
    assert args.command == "serve" and args.host == "0.0.0.0"
    # The balancer is the one trusted proxy: its fixed address, and no other.
    balancer = compose.split("\n  balancer:", 1)[1]
    address = balancer.split("ipv4_address:", 1)[1].split()[0]
    assert args.forwarded_allow_ips == address, (args.forwarded_allow_ips, address)


@pytest.fixture
def hostcall_on_a_port(tmp_path: Path) -> Iterator[HostcallServer]:
    server = start_hostcall(tmp_path, command="serve")
    yield server
    server.stop()


def test_the_health_check_passes_on_a_running_server_and_fails_without_one(
    hostcall_on_a_port: HostcallServer,
) -> None:
    _, image = stages()
    [check] = image.all("HEALTHCHECK")
    argv = exec_form(check.split(" CMD ", 1)[1])
    assert argv[:2] == ["python", "-c"]
    script = argv[2]
    assert "http://127.0.0.1:8000/healthz" in script

    def run_on(port: int) -> int:
        here = script.replace(":8000/", f":{port}/")
        return subprocess.run(
            [sys.executable, "-c", here], capture_output=True, timeout=30
        ).returncode

    assert run_on(hostcall_on_a_port.port) == 0
    assert run_on(free_port()) != 0
