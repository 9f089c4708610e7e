"""``Widget``: drive the Hostcall widget in a host page through Playwright (sync API).

Everything is selected by the widget's documented hooks (``data-part``, ``data-tool``,
``data-path``, the root's ``data-agent-state``), never by CSS class, so a restyled widget
does not break a suite. Every wait is an auto-retrying Playwright assertion with a timeout:
no sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from playwright.sync_api import FrameLocator, Locator, Page, expect

#: Generous for a first paint in a cold Chromium; the scripted model answers in milliseconds.
DEFAULT_TIMEOUT = 15_000


class Widget:
    """The widget embedded in ``page`` (as a launcher bubble, or inline with ``data-mount``)."""

    def __init__(self, page: Page, *, timeout: int = DEFAULT_TIMEOUT) -> None:
        self.page = page
        self.timeout = timeout
        self.frame: FrameLocator = page.frame_locator("[data-part=hostcall-frame]")

    # ------------------------------------------------------------------ the chat

    def open(self) -> Widget:
        """Open the chat (click the launcher unless it is already open or inline) and wait
        until it accepts a message."""
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
        box = self.frame.locator("[data-part=composer-input]")
        box.fill(text)
        box.press("Enter")
        mine = self.frame.locator("[data-part=message][data-role=user] [data-part=message-text]")
        expect(mine.last).to_have_text(text.strip(), timeout=self.timeout)

    def wait_until_idle(self) -> None:
        """Wait until the agent has finished (``data-agent-state="idle"`` on the widget's root:
        no run going, nothing waiting for a person or the page)."""
        expect(self.frame.locator("html[data-agent-state=idle]")).to_have_count(
            1, timeout=self.timeout
        )

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
        radio = card.locator(f"[data-part={json.dumps('scope-' + scope)}]")
        if scope != "once" or radio.count():
            radio.check(timeout=self.timeout)
        card.locator("[data-part=approve]").first.click()
        expect(card.locator("[data-part=confirm]")).to_have_count(0, timeout=self.timeout)

    def edit(self, values: Mapping[str, Any], name: str | None = None) -> None:
        """Edit the proposed input (fields by name, nested with dicts) and approve it."""
        card = self._confirming(name)
        card.locator("[data-part=edit]").click()
        form = card.locator("[data-part=form][data-purpose=edit]")
        expect(form).to_be_visible(timeout=self.timeout)
        _fill(form, values)
        form.locator("[data-part=submit]").click()
        expect(form).to_have_count(0, timeout=self.timeout)

    def reject(self, reason: str = "", name: str | None = None) -> None:
        """Reject the proposed call, with an optional reason the model receives."""
        card = self._confirming(name)
        card.locator("[data-part=reject]").click()
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
