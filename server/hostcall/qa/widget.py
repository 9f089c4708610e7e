"""``Widget``: drive the Hostcall widget in a host page through Playwright (sync API).

Everything is selected by the widget's documented hooks (``data-part``, ``data-tool``,
``data-path``, the root's ``data-agent-state``), never by CSS class, so a restyled widget
does not break a suite. Every wait is an auto-retrying Playwright assertion with a timeout:
no sleeps. A wait that fails says what the widget was doing (``WidgetStateError``): open or
closed, its agent state, its cards and forms, its last messages and the page API's last
events — a test asking for what never comes reads why, not a bare timeout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import FrameLocator, Locator, Page, expect

#: Generous for a first paint in a cold Chromium; the scripted model answers in milliseconds.
DEFAULT_TIMEOUT = 15_000

#: Keeps the page API's last events in the page, for ``Widget.describe``. Run before the
#: snippet (an init script), it is the snippet's queue, which the loader keeps.
EVENT_LOG = """(() => {
  if (window.__hostcallQaEvents) return
  const log = (window.__hostcallQaEvents = [])
  const H = (window.Hostcall = window.Hostcall || function () { (H.q = H.q || []).push(arguments) })
  const brief = (name, d) => name + (
    d?.toolName ? ` ${d.toolName} (${d.state}${d.route ? ', ' + d.route : ''})`
      : d?.role ? ` ${d.role}: ${String(d.text).slice(0, 60)}`
      : d?.code ? ` ${d.code}` : '')
  for (const name of ['ready', 'open', 'close', 'message', 'toolcall', 'toolresult', 'error'])
    H('on', name, d => { log.push(brief(name, d)); if (log.length > 8) log.shift() })
})()"""

#: What the widget shows, read inside its frame.
SHOWN = """() => {
  const all = sel => [...document.querySelectorAll(sel)]
  const text = el => (el?.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 80)
  return {
    agentState: document.documentElement.dataset.agentState || '',
    cards: all('[data-part=tool-call]').map(c => {
      const form = c.querySelector('[data-part=form]')?.dataset.purpose
      const shows = c.querySelector('[data-part=confirm]') ? 'asking for a decision'
        : form ? `the ${form} form` : ''
      return `${c.dataset.tool} ${c.dataset.state}` + (shows ? `, ${shows}` : '')
    }),
    error: text(all('[data-part=error]').pop()),
    messages: all('[data-part=message]').slice(-3).map(m =>
      `${m.dataset.role}: ${text(m.querySelector('[data-part=message-text]'))}`),
  }
}"""


class WidgetStateError(AssertionError):
    """A ``Widget`` wait failed; the message says what the widget was showing."""


class Widget:
    """The widget embedded in ``page`` (as a launcher bubble, or inline with ``data-mount``)."""

    def __init__(self, page: Page, *, timeout: int = DEFAULT_TIMEOUT) -> None:
        self.page = page
        self.timeout = timeout
        self.frame: FrameLocator = page.frame_locator("[data-part=hostcall-frame]")
        # The page API's events, from now on (this page) and from the start (its reloads).
        page.add_init_script(EVENT_LOG)
        try:
            page.evaluate(f"() => window.Hostcall && {EVENT_LOG}")
        except PlaywrightError:
            pass  # no page loaded yet: the init script covers the first one

    # ------------------------------------------------------------------ the page's tools

    def page_tools(self) -> list[str]:
        """The names of the tools the host page registered through WebMCP, as the browser
        lists them (``page.webmcp``: Chromium launched with WebMCP on, ``launch_chromium``)."""
        return sorted(tool["name"] for tool in self.page.webmcp.tools(timeout=self.timeout))

    def call_page_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call the page's WebMCP tool ``name`` as an agent in the browser would, bypassing
        Hostcall: what the tool itself returns, for checking it apart from the chat."""
        return self.page.webmcp.call_tool(name, dict(arguments or {}), timeout=self.timeout)

    # ------------------------------------------------------------------ the chat

    def open(self) -> Widget:
        """Open the chat (click the launcher unless it is already open or inline) and wait
        until it accepts a message."""
        with self._explained("open the chat"):
            # The loader is async: wait for its launcher (bubble) or its frame (inline).
            either = "[data-part=hostcall-launcher], [data-part=hostcall-frame]"
            self.page.locator(either).first.wait_for(timeout=self.timeout)
            launcher = self.page.locator("[data-part=hostcall-launcher]")
            if launcher.count() and launcher.get_attribute("aria-expanded") != "true":
                launcher.click()
            expect(self.frame.locator("html[data-agent-state=idle]")).to_have_count(
                1, timeout=self.timeout
            )
        return self

    def send(self, text: str) -> None:
        """Type ``text`` in the composer and press Enter; wait until it shows as sent."""
        with self._explained(f"send {text!r}"):
            box = self.frame.locator("[data-part=composer-input]")
            box.fill(text, timeout=self.timeout)
            box.press("Enter")
            mine = self.frame.locator(
                "[data-part=message][data-role=user] [data-part=message-text]"
            )
            expect(mine.last).to_have_text(text.strip(), timeout=self.timeout)

    def attach(self, paths: Sequence[str | Path]) -> None:
        """Choose ``paths`` with the composer's attach button (an agent whose file has an
        ``attachments`` block); wait until each shows as a chip, refused or not. Nothing is
        uploaded before the next message is sent (``send``)."""
        with self._explained(f"attach {[Path(p).name for p in paths]}"):
            chips = self.frame.locator("[data-part=attachment-chip]")
            before = chips.count()
            picker = self.frame.locator("[data-part=attach] input[type=file]")
            picker.set_input_files([str(p) for p in paths], timeout=self.timeout)
            expect(chips).to_have_count(before + len(paths), timeout=self.timeout)

    def wait_until_idle(self) -> None:
        """Wait until the agent has finished (``data-agent-state="idle"`` on the widget's root:
        no run going, nothing waiting for a person or the page)."""
        with self._explained("wait until the agent is idle"):
            expect(self.frame.locator("html[data-agent-state=idle]")).to_have_count(
                1, timeout=self.timeout
            )

    def stop(self) -> None:
        """Press Stop while the agent works; wait until the run has stopped (the widget idle)."""
        with self._explained("stop the reply"):
            self.frame.locator("[data-part=stop]").click(timeout=self.timeout)
            self._idle()

    # ------------------------------------------------------------------ history

    def history(self) -> list[str]:
        """Open the history (unless shown) and return the titles it lists, the conversation
        last written in first (its first page)."""
        with self._explained("list the history"):
            if not self.frame.locator("[data-part=history]").count():
                self.frame.locator("[data-part=open-history]").click(timeout=self.timeout)
            loaded = self.frame.locator("[data-part=history]:not([data-state=loading])")
            expect(loaded).to_have_count(1, timeout=self.timeout)
            expect(loaded).to_have_attribute("data-state", "ready", timeout=self.timeout)
            return self.frame.locator("[data-part=history-item-title]").all_inner_texts()

    def open_from_history(self, title: str) -> None:
        """Open the conversation titled ``title`` from the history; wait until its thread is
        drawn and the agent idle."""
        self.history()
        with self._explained(f"open {title!r} from the history"):
            self._history_item(title).locator("[data-part=history-open]").click()
            expect(self.frame.locator("[data-part=history]")).to_have_count(0, timeout=self.timeout)
            self._idle()

    def delete_from_history(self, title: str) -> None:
        """Delete the conversation titled ``title`` from the history (confirming); wait until
        it is gone (the one open: until a new one is ready)."""
        self.history()
        with self._explained(f"delete {title!r} from the history"):
            item = self._history_item(title)
            item.locator("[data-part=history-delete]").click(timeout=self.timeout)
            item.locator("[data-part=history-delete-yes]").click(timeout=self.timeout)
            expect(item).to_have_count(0, timeout=self.timeout)
            self._idle()

    def _history_item(self, title: str) -> Locator:
        titled = self.frame.locator("[data-part=history-item-title]").get_by_text(title, exact=True)
        return self.frame.locator("[data-part=history-item]").filter(has=titled).first

    def _idle(self) -> None:
        expect(self.frame.locator("html[data-agent-state=idle]")).to_have_count(
            1, timeout=self.timeout
        )

    def describe(self) -> str:
        """What the widget shows now, in a few lines (what a failed wait reports)."""
        page = self.page
        launcher = page.locator("[data-part=hostcall-launcher]")
        frames = page.locator("[data-part=hostcall-frame]").count()
        if launcher.count():
            chat = "open" if launcher.get_attribute("aria-expanded") == "true" else "closed"
            label = launcher.get_attribute("aria-label")
            chat = f"the chat is {chat} (launcher {label!r})"
        elif frames:
            chat = "the chat is inline"
        else:
            chat = "no launcher and no widget frame on the page (not loaded yet, or refused: see the console)"  # noqa: E501
        lines = [chat]
        frame = next((f for f in page.frames if "/widget/" in f.url), None)
        shown: dict[str, Any] | None = None
        if frame is not None:
            try:
                shown = frame.evaluate(SHOWN)
            except PlaywrightError:
                shown = None
        if shown is None:
            lines.append("the widget's frame is not loaded" if frames else "")
        else:
            lines.append(f"agent state: {shown['agentState'] or '-'}")
            lines.append("cards: " + ("; ".join(shown["cards"]) or "none"))
            if shown["error"]:
                lines.append(f"error shown: {shown['error']}")
            lines.append("last messages: " + (" | ".join(shown["messages"]) or "none"))
        try:
            events = page.evaluate("() => window.__hostcallQaEvents || []")
        except PlaywrightError:
            events = []
        lines.append("last page events: " + (", ".join(events) or "none"))
        return "\n  ".join(line for line in lines if line)

    @contextmanager
    def _explained(self, doing: str) -> Iterator[None]:
        """Turn a failed wait into a ``WidgetStateError`` saying what the widget shows."""
        try:
            yield
        except WidgetStateError:
            raise
        except (AssertionError, PlaywrightError) as err:
            why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise WidgetStateError(
                f"could not {doing} within {self.timeout / 1000:g} s; the widget:\n"
                f"  {self.describe()}\n(Playwright: {why})"
            ) from err

    def state(self) -> str:
        """``starting``, ``idle``, ``working``, ``waiting`` (a person must act) or ``failed``."""
        return str(self.frame.locator("html").get_attribute("data-agent-state"))

    def messages(self, role: str | None = None) -> list[str]:
        """The text of every message shown (``role``: ``user`` or ``assistant``), greeting
        included, without the screen-reader prefix."""
        where = f"[data-role={role}]" if role else ""
        return self.frame.locator(
            f"[data-part=message]{where} [data-part=message-text]"
        ).all_inner_texts()

    def last_reply(self) -> Locator:
        """The last assistant message's text element (use with ``expect(...)``)."""
        return self.frame.locator(
            "[data-part=message][data-role=assistant] [data-part=message-text]"
        ).last

    def error(self) -> Locator:
        """The conversation-level error shown to the visitor (``data-part=error``)."""
        return self.frame.locator("[data-part=error]").last

    # ------------------------------------------------------------------ tool calls

    def call(self, name: str) -> Locator:
        """The card of the last call of tool ``name``."""
        return self.calls(name).last

    def calls(self, name: str) -> Locator:
        """Every card of tool ``name``, in the thread's order: count them with
        ``expect(...).to_have_count(n)``, or take one with ``.nth(i)``."""
        return self.frame.locator(f"[data-part=tool-call][data-tool={json.dumps(name)}]")

    def wait_for_call(self, name: str, state: str | None = None) -> Locator:
        """Wait for a card of tool ``name`` (and, if given, its ``data-state``: ``running``,
        ``waiting``, ``done``, ``failed``, ``rejected``, ``expired``); return it."""
        card = self.call(name)
        with self._explained(f"see a {name!r} card" + (f" in state {state!r}" if state else "")):
            expect(card).to_be_visible(timeout=self.timeout)
            if state:
                expect(card).to_have_attribute("data-state", state, timeout=self.timeout)
        return card

    def approve(self, name: str | None = None, *, scope: str = "once") -> None:
        """Approve the waiting confirmation (of tool ``name``, else the last one).

        ``scope``: ``once``, or another scope the call offers (``conversation``: "allow for
        this conversation"), chosen with the card's ``scope-<scope>`` radio button first. A
        scope the call does not offer has no radio button: the wait for it fails.
        """
        card = self._confirming(name)
        with self._explained(f"approve ({scope})"):
            radio = card.locator(f"[data-part={json.dumps('scope-' + scope)}]")
            if scope != "once" or radio.count():
                radio.check(timeout=self.timeout)
            card.locator("[data-part=approve]").first.click(timeout=self.timeout)
            expect(card.locator("[data-part=confirm]")).to_have_count(0, timeout=self.timeout)

    def edit(self, values: Mapping[str, Any], name: str | None = None) -> None:
        """Edit the proposed input (fields by name, nested with dicts) and approve it."""
        card = self._confirming(name)
        with self._explained("edit the proposed input"):
            card.locator("[data-part=edit]").click(timeout=self.timeout)
            form = card.locator("[data-part=form][data-purpose=edit]")
            expect(form).to_be_visible(timeout=self.timeout)
            _fill(form, values)
            form.locator("[data-part=submit]").click()
            expect(form).to_have_count(0, timeout=self.timeout)

    def reject(self, reason: str = "", name: str | None = None) -> None:
        """Reject the proposed call, with an optional reason the model receives."""
        card = self._confirming(name)
        with self._explained("reject"):
            card.locator("[data-part=reject]").click(timeout=self.timeout)
            card.locator("[data-part=reject-reason]").fill(reason)
            card.locator("[data-part=reject-confirm]").click()
            expect(card).to_have_attribute("data-state", "rejected", timeout=self.timeout)

    def fill_form(
        self, values: Mapping[str, Any], name: str | None = None, *, submit: bool = True
    ) -> Locator:
        """Answer a call through its output-schema form (the fallback when the page has no
        handler): fill ``values`` and, unless ``submit=False``, submit. Returns the form."""
        card = self.call(name) if name else self.frame.locator(
            "[data-part=tool-call]:has([data-part=form][data-purpose=answer])"
        ).last  # fmt: skip
        form = card.locator("[data-part=form][data-purpose=answer]")
        with self._explained("fill " + (f"the {name!r} answer form" if name else "an answer form")):
            expect(form).to_be_visible(timeout=self.timeout)
            form = self._by_id(card).locator("[data-part=form][data-purpose=answer]")
            _fill(form, values)
            if submit:
                form.locator("[data-part=submit]").click()
        return form

    def _confirming(self, name: str | None) -> Locator:
        card = self.call(name) if name else self.frame.locator(
            "[data-part=tool-call][data-state=waiting]:has([data-part=confirm])"
        ).last  # fmt: skip
        what = f"the {name!r} card" if name else "a card"
        with self._explained(f"find {what} asking for a decision"):
            expect(card.locator("[data-part=confirm]")).to_be_visible(timeout=self.timeout)
            return self._by_id(card)

    def _by_id(self, card: Locator) -> Locator:
        """The same card by its call id: stays valid while its state and parts change."""
        call_id = card.get_attribute("data-call-id")
        return self.frame.locator(f"[data-part=tool-call][data-call-id={json.dumps(call_id)}]")


# ---------------------------------------------------------------------- form filling


def _fill(form: Locator, values: Mapping[str, Any], prefix: str = "") -> None:
    """Set each value on the control whose ``data-path`` is its JSON Pointer."""
    for key, value in values.items():
        path = f"{prefix}/{str(key).replace('~', '~0').replace('/', '~1')}"
        control = form.locator(f"[data-path={json.dumps(path)}]")
        if isinstance(value, Mapping) and not control.count():
            _fill(form, value, path)
        elif isinstance(value, list) and not control.count():
            add = form.locator(f"[data-part=add-item][data-array-path={json.dumps(path)}]")
            for index, item in enumerate(value):
                row = f"{path}/{index}"
                if not form.locator(f"[data-path^={json.dumps(row)}]").count():
                    add.click()
                if isinstance(item, Mapping):
                    _fill(form, item, row)
                else:
                    _set(form.locator(f"[data-path={json.dumps(row)}]"), item)
        else:
            _set(control, value)


def _set(control: Locator, value: Any) -> None:
    tag = control.evaluate("el => el.tagName + ':' + (el.type || '')")
    if tag == "INPUT:checkbox":
        control.set_checked(bool(value))
    elif tag.startswith("SELECT"):
        control.select_option(json.dumps(value))
    elif control.get_attribute("data-part") == "json-input":
        control.fill(json.dumps(value))
    else:
        control.fill("" if value is None else str(value))
