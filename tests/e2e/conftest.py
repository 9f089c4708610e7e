"""End-to-end fixtures, on the QA kit Hostcall ships (hostcall/qa, docs/testing.md): the real
``hostcall demo`` command as a subprocess on free ports, and Debian's Chromium driven by
Playwright (never Playwright's own browser download).

The host page is served on ``localhost`` and the widget on ``127.0.0.1``: two origins, as on
a real site. The names here (``demo``, ``browser``, ``page``, ``start_demo``, ``shot``) are
the ones the e2e modules grew up with; they are thin aliases of the plugin's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from hostcall.qa.plugin import CHROMIUM_ARGS
from hostcall.qa.servers import TEST_SECRET, HostcallServer, free_port, start_hostcall
from hostcall.settings import ROOT

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "SECRET", "Demo", "free_port", "shot", "start_demo"]

CHROMIUM = "/usr/bin/chromium"
SECRET = TEST_SECRET
SHOTS = ROOT / "test-results" / "screenshots"
#: The README's screenshots.
DOC_SHOTS = ROOT / "docs" / "screenshots"

#: A running ``hostcall demo``: Hostcall on 127.0.0.1, the task board on localhost.
Demo = HostcallServer

pytestmark = pytest.mark.e2e


def start_demo(tmp: Path, *, db: Path | None = None, port: int | None = None,
               host_port: int | None = None, extra: list[str] | None = None) -> Demo:  # fmt: skip
    return start_hostcall(
        tmp, command="demo", db=db or tmp / "e2e.db", port=port, host_port=host_port, extra=extra
    )


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = start_demo(tmp_path)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One demo for a module whose tests each open their own conversation, in a browser
    context of their own, and change nothing the others read: a server start (seconds on a
    loaded machine) saved a test. A test that changes the server (its agents, its users, a
    restart) or reads what all conversations share (the console, the people, the database)
    keeps its own ``demo``. The demo's rate limits count per address: some 30 tests a minute
    from this one would meet them."""
    running = start_demo(tmp_path_factory.mktemp("shared-demo"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser(hostcall_browser: Browser) -> Browser:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/install --test")
    return hostcall_browser


@pytest.fixture
def page(hostcall_page: Page) -> Page:
    return hostcall_page


def shot(page: Page, name: str, *, readme: str | None = None) -> Path:
    """Save a screenshot under test-results/screenshots (look at them: a person will).

    ``readme``: the name of the README's copy under docs/screenshots, written only when asked
    (``HOSTCALL_REFRESH_DOCS=1``): a normal run, CI's included, must not dirty the tree.
    """
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    if readme and os.environ.get("HOSTCALL_REFRESH_DOCS") == "1":
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_SHOTS / f"{readme}.png")
    return path
