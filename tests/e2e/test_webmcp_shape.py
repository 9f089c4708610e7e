"""WebMCP's ``document.modelContext`` on a page with the snippet, in real Chromium with WebMCP
on and off: the browser's is kept, a page's own polyfill is kept, and where there is none the
loader's shape works as the browser's does (register with an abort signal, list, toolchange,
execute to JSON text). The widget's use of it: tests/e2e/test_page_tools.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from hostcall.qa.plugin import launch_chromium
from hostcall.qa.servers import HostPage
from tests.e2e.flows_helpers import SLOW

pytestmark = pytest.mark.e2e

#: Run before any of the page's scripts: what document.modelContext was before the loader.
BEFORE = "window.before = document.modelContext"
#: A page's own polyfill, defined before the loader where the browser has none.
OWN_POLYFILL = """if (!('modelContext' in document)) {
  document.modelContext = Object.assign(new EventTarget(), { mine: true,
    registerTool: async () => {}, getTools: async () => [], executeTool: async () => 'null' })
}"""

EXERCISE = """async () => {
  const mc = document.modelContext
  const heard = []
  mc.addEventListener('toolchange', () => heard.push('event'))
  mc.ontoolchange = () => heard.push('handler')
  const ctl = new AbortController()
  await mc.registerTool({
    name: 'add_note', description: 'Adds a note.', annotations: { readOnlyHint: false },
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    execute: async ({ text }) => ({ saved: text }),
  }, { signal: ctl.signal })
  const [tool] = await mc.getTools()
  const listed = { name: tool.name, own: tool.window === window, schema: tool.inputSchema }
  const result = await mc.executeTool(tool, { text: 'milk' })
  ctl.abort()
  await new Promise(r => setTimeout(r, 0))
  return { listed, result, heard, after: (await mc.getTools()).map(t => t.name) }
}"""


@pytest.fixture(scope="module", params=["webmcp", "loader-shape"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def hostcall_browser(mode: str) -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = launch_chromium(p, webmcp=mode == "webmcp")
        yield browser
        browser.close()


def loaded(page: Page, host: HostPage) -> None:
    page.goto(host.url)
    page.wait_for_function("window.Hostcall?.loaded === 1", timeout=SLOW)


def test_the_browsers_model_context_is_kept_else_the_loader_offers_one_that_works(
    page: Page, host_page: HostPage, mode: str
) -> None:
    page.add_init_script(BEFORE)
    loaded(page, host_page)
    kept = page.evaluate("window.before === document.modelContext")
    assert kept is (mode == "webmcp")  # the browser's is kept; else there was none before
    used: dict[str, Any] = page.evaluate(EXERCISE)
    assert used["listed"] == {
        "name": "add_note",
        "own": True,
        "schema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    assert used["result"] == '{"saved":"milk"}'
    assert sorted(used["heard"]) == ["event", "event", "handler", "handler"]  # register, abort
    assert used["after"] == []


def test_a_pages_own_polyfill_is_never_replaced(page: Page, host_page: HostPage, mode: str) -> None:
    page.add_init_script(OWN_POLYFILL + ";" + BEFORE)
    loaded(page, host_page)
    assert page.evaluate("window.before === document.modelContext") is True
    assert page.evaluate("document.modelContext.mine === true") is (mode == "loader-shape")
