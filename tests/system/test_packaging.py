"""The wheel, as a new user installs it: built from the repository, installed with its
``[test]`` extra into a fresh venv outside it, then ``hostcall demo`` run from an unrelated
directory, and the QA plugin used by a project of its own.

The venv has no access to the checkout: if the widget or the demo were not package data,
``/embed.js`` or the board would fail here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

from hostcall.qa.servers import free_port
from hostcall.settings import ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel (and its dependencies) installed; returns its bin dir."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)], check=True)
    [wheel] = (tmp / "dist").glob("hostcall-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # The extra a site's QA engineer installs: the plugin's pytest and Playwright.
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", f"{wheel}[test]"],
                   check=True)  # fmt: skip
    return venv / "bin"


def _clean_env() -> dict[str, str]:
    leave = ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    env = {k: v for k, v in os.environ.items() if k not in leave}
    return {**env, "HOSTCALL_SECRET_KEYS": "wheel-test-key-0123456789abcdef"}


def test_installed_package_finds_widget_and_demo_inside_itself(
    installed: Path, tmp_path: Path
) -> None:
    probe = "import hostcall.assets as a; print(a.WIDGET_DIR); print(a.DEMO_AGENTS)"
    out = subprocess.run([str(installed / "python"), "-c", probe], cwd=tmp_path, env=_clean_env(),
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    site = str(installed.parent / "lib")
    assert all(line.startswith(site) for line in out), out
    assert not any(line.startswith(str(ROOT)) for line in out)


def test_installed_hostcall_check_reads_the_shipped_demo_agents(
    installed: Path, tmp_path: Path
) -> None:
    result = subprocess.run([str(installed / "hostcall"), "check"], cwd=tmp_path,
                            env=_clean_env(), capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "ok: planner" in result.stdout


def test_installed_demo_serves_the_loader_the_widget_and_the_board(
    installed: Path, tmp_path: Path
) -> None:
    port, host_port = free_port(), free_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(installed / "hostcall"), "demo", "--port", str(port), "--host-port",
             str(host_port), "--db", str(tmp_path / "demo.db"), "--log-level", "warning"],
            cwd=tmp_path, env=_clean_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base, board = f"http://127.0.0.1:{port}", f"http://localhost:{host_port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        embed = httpx.get(f"{base}/embed.js")
        assert embed.status_code == 200 and "Hostcall" in embed.text
        assert embed.headers["content-type"].startswith("text/javascript")
        page = httpx.get(f"{base}/widget/planner", params={"origin": board})
        assert page.status_code == 200, page.text
        assert "hc-config" in page.text
        assert "interface HostcallApi" in httpx.get(f"{base}/embed.d.ts").text
        for name in (
            "app.js",
            "bridge.js",
            "chat.js",
            "drawing.js",
            "form.js",
            "widget.css",
            "calls.css",
            "toolcalls.js",
            "cards.js",
            "locale-ja.js",
            "locale-ja-calls.js",
            "history.js",
            "history.css",
            "locale-ja-history.js",
        ):
            assert httpx.get(f"{base}/static/{name}").status_code == 200, name
        # The operator console's pages and scripts are package data too.
        login = httpx.get(f"{base}/console/login")
        assert login.status_code == 200, login.text[:300]
        assert httpx.get(f"{base}/console/static/console.css").status_code == 200
        host = httpx.get(f"{board}/")
        assert host.status_code == 200 and f"{base}/embed.js" in host.text
        assert httpx.get(f"{board}/board.js").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
    # The default database would have gone to ./var, never into site-packages.
    assert not (installed.parent / "lib" / "var").exists()


def test_the_wheel_holds_one_top_level_package_and_every_package_of_the_source() -> None:
    """``packages`` in pyproject.toml is a list: a new subpackage left out of it would be
    missing from the wheel (and only an installed Hostcall would notice)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])  # fmt: skip
    source = ROOT / "server"
    found = {".".join(p.parent.relative_to(source).parts) for p in source.rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert {name.split(".")[0] for name in listed} == {"hostcall"}


def _complete_example() -> str:
    """The Python block of docs/testing.md's "A complete example", as a user copies it."""
    doc = (ROOT / "docs" / "testing.md").read_text()
    section = doc[doc.index("## A complete example") :]
    return section[section.index("```python\n") + 10 : section.index("\n```\n")] + "\n"


def test_a_project_with_its_own_server_package_runs_the_documented_qa_example(
    installed: Path, tmp_path: Path
) -> None:
    """A site's repository often has a ``server`` package of its own: with the plugin
    installed, its pytest still starts, its ``server`` is its own, and the example from
    docs/testing.md passes in real Chromium."""
    project = tmp_path / "site"
    (project / "server").mkdir(parents=True)
    (project / "server" / "__init__.py").write_text('NAME = "the site\'s own server"\n')
    (project / "server" / "qa.py").write_text("SHADOWS = True\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_cart.py").write_text(_complete_example())
    (project / "tests" / "test_own_server.py").write_text(
        "import server\nimport server.qa\nfrom hostcall.qa import Widget\n\n\n"
        "def test_the_project_keeps_its_own_server_package():\n"
        '    assert server.NAME == "the site\'s own server" and server.qa.SHADOWS\n'
        "    assert Widget.__module__ == 'hostcall.qa.widget'\n"
    )
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    # `python -m pytest` puts the project first on sys.path, as a user's run does.
    run = subprocess.run([str(installed / "python"), "-m", "pytest", "-q", "-p",
                          "no:cacheprovider"], cwd=project, env=_clean_env(),
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "5 passed" in run.stdout, run.stdout[-2000:]


def test_the_wheel_s_metadata_passes_twine_check(installed: Path) -> None:
    [wheel] = (installed.parent.parent / "dist").glob("hostcall-*.whl")
    run = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    with zipfile.ZipFile(wheel) as archive:
        meta = archive.read("hostcall-0.1.0.dist-info/METADATA").decode()
        assert "hostcall-0.1.0.dist-info/licenses/LICENSE" in archive.namelist()
    for field in ("License-Expression: MIT", "Description-Content-Type: text/markdown",
                  "Classifier: Framework :: Pytest", "Requires-Python: >=3.11",
                  "Provides-Extra: test"):  # fmt: skip
        assert field in meta, field
