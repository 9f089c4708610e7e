"""The widget's JavaScript unit tests (tests/widget/*.test.mjs), run by node's test runner,
so the one pytest run that CI makes covers them too."""

from __future__ import annotations

import shutil
import subprocess

from hostcall.settings import ROOT


def test_the_widget_modules_pass_their_node_tests() -> None:
    node = shutil.which("node")
    assert node, "node is missing: run scripts/install --test"
    tests = sorted(str(p) for p in (ROOT / "tests" / "widget").glob("*.test.mjs"))
    assert tests, "no widget tests found"
    done = subprocess.run(
        [node, "--test", *tests], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout
