"""The browser benchmark's round trip, run as a person runs it: the headline figure must not
stop being measured unseen (a widget that made its conversation later once broke it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hostcall.settings import ROOT

pytestmark = pytest.mark.e2e


def test_the_browser_bench_measures_the_round_trip_beside_its_floor() -> None:
    done = subprocess.run(
        [sys.executable, "bench/browser_bench.py", "--quick", "--only", "round trip"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout[done.stdout.index("## 3. Browser tool round trip") :]
    row = next(line for line in table.splitlines() if "has validated result, p50" in line)
    hostcall, floor = (float(cell.split()[0]) for cell in row.split("  ") if "ms" in cell)
    assert hostcall > 0 and floor > 0, row
    # What the widget's main thread runs while the call is with the page, from a trace.
    traced = done.stdout[done.stdout.index("## 3d. Widget frame's main thread") :]
    layouts = next(line for line in traced.splitlines() if line.startswith("layouts"))
    assert len([cell for cell in layouts.split("  ") if "(max " in cell]) == 2, layouts


def test_the_browser_bench_times_a_webmcp_page_tool_beside_a_client_tool() -> None:
    done = subprocess.run(
        [sys.executable, "bench/browser_bench.py", "--quick", "--only", "page tool"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout[done.stdout.index("## 4. Page tool (WebMCP) round trip") :]
    row = next(line for line in table.splitlines() if "has validated result, p50" in line)
    page, client = (float(cell.split()[0]) for cell in row.split("  ") if "ms" in cell)
    assert page > 0 and client > 0, row
    assert "x  <= 1.1x" in row, row  # the ratio, against its target
    # The page's part step by step: stamped in the page (the bench's STEPS and its tool).
    steps = done.stdout[done.stdout.index("## 4b. The page's part") :]
    hop = next(line for line in steps.splitlines() if "page's execute runs (Chromium)" in line)
    assert len([cell for cell in hop.split("  ") if cell.strip().endswith(" ms")]) == 2, hop


def test_the_browser_bench_times_an_image_attachment_beside_a_text_message() -> None:
    done = subprocess.run(
        [sys.executable, "bench/browser_bench.py", "--quick", "--only", "attachment"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout[done.stdout.index("## 5. An image attachment") :]
    row = next(line for line in table.splitlines() if "first model byte" in line and "p50" in line)
    image, text = (float(cell.split()[0]) for cell in row.split("  ") if "ms" in cell)
    assert image > 0 and text > 0, row
    upload = next(line for line in table.splitlines() if "of which the upload" in line)
    assert "% of it" in upload, upload
